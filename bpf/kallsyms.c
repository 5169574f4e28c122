// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libkpx: the core-kernel symbols of /proc/kallsyms, read once and kept
 * sorted twice: by address (for the symbol that follows one: a symbol's
 * size is the distance to it, as kallsyms_lookup_size_offset() computes and
 * kprobes take as the function's end) and by name (binary search).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kpx.h"

static struct {
	bool loaded;
	int err;
	struct kpx_ksym *by_addr;	/* sorted by address, then name */
	struct kpx_ksym **by_name;	/* sorted by name, then address */
	size_t n;
	char *names;
} ks;

static int cmp_addr(const void *a, const void *b)
{
	const struct kpx_ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_name(const void *a, const void *b)
{
	const struct kpx_ksym *const *x = a, *const *y = b;
	int c = strcmp((*x)->name, (*y)->name);

	if (c)
		return c;
	return (*x)->addr < (*y)->addr ? -1 : (*x)->addr > (*y)->addr;
}

/* Appends @s to the name buffer; returns its offset, or -1. */
static long add_name(size_t *len, size_t *cap, const char *s)
{
	size_t l = strlen(s) + 1;
	long off = *len;

	if (*len + l > *cap) {
		size_t c = *cap ? 2 * *cap : 1 << 20;
		char *p;

		while (c < *len + l)
			c *= 2;
		p = realloc(ks.names, c);
		if (!p)
			return -1;
		ks.names = p;
		*cap = c;
	}
	memcpy(ks.names + *len, s, l);
	*len += l;
	return off;
}

/* Reads @f (closed here), in /proc/kallsyms' format. */
static int load(FILE *f)
{
	size_t cap = 0, nlen = 0, ncap = 0;
	/* A name has up to KSYM_NAME_LEN (512) bytes with its NUL. */
	char line[1024], name[512];

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct kpx_ksym s;
		long off;

		/* Longer than any kallsyms line: skip it whole, not in pieces. */
		if (!strchr(line, '\n') && !feof(f)) {
			int c;

			while ((c = fgetc(f)) != EOF && c != '\n')
				;
			continue;
		}
		/* Module, BPF and trampoline symbols carry a "[owner]" suffix. */
		if (strchr(line, '[') ||
		    sscanf(line, "%llx %c %511s", &s.addr, &s.type, name) != 3)
			continue;
		off = add_name(&nlen, &ncap, name);
		if (off < 0)
			goto nomem;
		if (ks.n == cap) {
			struct kpx_ksym *v;

			cap = cap ? 2 * cap : 65536;
			v = realloc(ks.by_addr, cap * sizeof(*v));
			if (!v)
				goto nomem;
			ks.by_addr = v;
		}
		s.name = (const char *)(uintptr_t)off;	/* an offset until the end */
		ks.by_addr[ks.n++] = s;
	}
	fclose(f);
	f = NULL;
	for (size_t i = 0; i < ks.n; i++)
		ks.by_addr[i].name = ks.names + (uintptr_t)ks.by_addr[i].name;
	qsort(ks.by_addr, ks.n, sizeof(*ks.by_addr), cmp_addr);
	ks.by_name = calloc(ks.n ? ks.n : 1, sizeof(*ks.by_name));
	if (!ks.by_name)
		goto nomem;
	for (size_t i = 0; i < ks.n; i++)
		ks.by_name[i] = &ks.by_addr[i];
	qsort(ks.by_name, ks.n, sizeof(*ks.by_name), cmp_name);
	return ks.n ? 0 : -ENOENT;
nomem:
	if (f)
		fclose(f);
	ks.n = 0;
	return -ENOMEM;
}

int kpx_kallsyms_load(void)
{
	if (!ks.loaded) {
		ks.err = load(fopen("/proc/kallsyms", "r"));
		ks.loaded = true;
	}
	return ks.err;
}

int kpx_kallsyms_load_stream(FILE *f)
{
	if (ks.loaded) {
		if (f)
			fclose(f);
		return -EBUSY;
	}
	ks.err = load(f);
	ks.loaded = true;
	return ks.err;
}

const struct kpx_ksym *kpx_ksym_find(const char *name, int *count)
{
	size_t lo = 0, hi, first;

	*count = 0;
	if (kpx_kallsyms_load())
		return NULL;
	hi = ks.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(ks.by_name[mid]->name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	first = lo;
	while (lo < ks.n && !strcmp(ks.by_name[lo]->name, name))
		lo++;
	*count = lo - first;
	return *count ? ks.by_name[first] : NULL;
}

const struct kpx_ksym *kpx_ksym_next(const struct kpx_ksym *sym)
{
	size_t lo = 0, hi = ks.n;

	/* The first symbol above sym->addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ks.by_addr[mid].addr <= sym->addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ks.n ? &ks.by_addr[lo] : NULL;
}

const struct kpx_ksym *kpx_ksym_at(unsigned long long addr)
{
	size_t lo = 0, hi;

	if (kpx_kallsyms_load())
		return NULL;
	hi = ks.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ks.by_addr[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ks.n && ks.by_addr[lo].addr == addr ? &ks.by_addr[lo] : NULL;
}
