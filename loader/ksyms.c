// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The running kernel's symbols (libkpx reads /proc/kallsyms once). A
 * symbol's size is the distance to the next higher core-kernel symbol: that
 * is what kallsyms_lookup_size_offset() computes, and what kprobes use as
 * the function's end. Module symbols ("[module]" lines) are read here, once,
 * when a SPEC needs them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

/* @sym from @s, of @count symbols of its name: its size up to the next symbol. */
static void ksym_fill(struct ksym *sym, const struct kpx_ksym *s, int count)
{
	const struct kpx_ksym *next = kpx_ksym_next(s);

	snprintf(sym->name, sizeof(sym->name), "%s", s->name);
	sym->addr = s->addr;
	sym->type = s->type;
	sym->count = count;
	if (next) {
		sym->size = next->addr - s->addr;
		snprintf(sym->next, sizeof(sym->next), "%s", next->name);
	}
}

/*
 * Fills @sym for the core-kernel symbol @name. Returns 0, -ENOENT, or
 * -EACCES when kallsyms hides addresses (not root).
 */
int ksym_lookup(const char *name, struct ksym *sym)
{
	const struct kpx_ksym *s;
	int err = kpx_kallsyms_load(), count;

	memset(sym, 0, sizeof(*sym));
	if (err)
		return err;
	s = kpx_ksym_find(name, &count);
	if (!s)
		return -ENOENT;
	if (!s->addr)
		return -EACCES;
	ksym_fill(sym, s, count);
	return 0;
}

/*
 * ksym_lookup(), or for "0xADDR" the symbol that starts at ADDR: several
 * static functions can share a name, and only an address tells them apart.
 * -EINVAL for an address that does not parse, -EACCES when kallsyms hides
 * addresses.
 */
int ksym_lookup_func(const char *arg, struct ksym *sym)
{
	const struct kpx_ksym *s;
	unsigned long long a;
	char *end;
	int err, count;

	if (strncmp(arg, "0x", 2))
		return ksym_lookup(arg, sym);
	memset(sym, 0, sizeof(*sym));
	errno = 0;
	a = strtoull(arg + 2, &end, 16);
	if (end == arg + 2 || *end || errno)
		return -EINVAL;
	err = kpx_kallsyms_load();
	if (err)
		return err;
	if (!ksym_addrs_visible())
		return -EACCES;
	s = kpx_ksym_at(a);
	if (!s)
		return -ENOENT;
	if (!s->addr)
		return -EACCES;
	kpx_ksym_find(s->name, &count);
	ksym_fill(sym, s, count);
	return 0;
}

unsigned long long ksym_addr(const char *name)
{
	struct ksym s;

	return ksym_lookup(name, &s) ? 0 : s.addr;
}

/* do_getpgid, or the syscall wrapper it is inlined into. */
const char *getpgid_func(void)
{
	struct ksym s;

	return ksym_lookup("do_getpgid", &s) ? "__x64_sys_getpgid" : "do_getpgid";
}

/*
 * Module symbols: the lines of /proc/kallsyms with a "[module]" suffix
 * (libkpx keeps the core kernel's only), read once, sorted by module, then
 * address. A module symbol's size is the distance to the next symbol of the
 * same module, as find_kallsyms_symbol() computes it (which ends the last
 * one at the end of the module's text: kallsyms does not show that, so the
 * last symbol of a module has no size here).
 */
struct modsym {
	unsigned long long addr;
	char type;
	char name[128];
	char mod[64];
};

static struct {
	bool loaded;
	int err;
	struct modsym *v;
	size_t n;
} ms;

static int cmp_modsym(const void *a, const void *b)
{
	const struct modsym *x = a, *y = b;
	int c = strcmp(x->mod, y->mod);

	if (c)
		return c;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int modsyms_load(void)
{
	FILE *f;
	char line[1024];
	size_t cap = 0;

	if (ms.loaded)
		return ms.err;
	ms.loaded = true;
	f = fopen("/proc/kallsyms", "r");
	if (!f)
		return ms.err = -errno;
	while (fgets(line, sizeof(line), f)) {
		struct modsym s = {};

		if (!strchr(line, '[') ||
		    sscanf(line, "%llx %c %127s [%63[^]]]", &s.addr, &s.type, s.name, s.mod) != 4)
			continue;
		if (ms.n == cap) {
			struct modsym *v;

			cap = cap ? 2 * cap : 4096;
			v = realloc(ms.v, cap * sizeof(*v));
			if (!v) {
				fclose(f);
				return ms.err = -ENOMEM;
			}
			ms.v = v;
		}
		ms.v[ms.n++] = s;
	}
	fclose(f);
	qsort(ms.v, ms.n, sizeof(*ms.v), cmp_modsym);
	return 0;
}

/*
 * Fills @sym for @name in module @mod (NULL: in any module; the first one
 * found), its size up to the next symbol of that module (0: unknown). 0,
 * -ENOENT, or -EACCES when kallsyms hides addresses (not root).
 */
int ksym_lookup_module(const char *mod, const char *name, struct ksym *sym)
{
	const struct modsym *s = NULL;
	int err = modsyms_load();

	memset(sym, 0, sizeof(*sym));
	if (err)
		return err;
	for (size_t i = 0; i < ms.n; i++) {
		if (strcmp(ms.v[i].name, name) || (mod && strcmp(ms.v[i].mod, mod)))
			continue;
		if (!s)
			s = &ms.v[i];
		sym->count++;
	}
	if (!s)
		return -ENOENT;
	snprintf(sym->name, sizeof(sym->name), "%s", s->name);
	sym->addr = s->addr;
	sym->type = s->type;
	if (!s->addr)
		return -EACCES;
	/* The next higher address of the same module (sorted: the next ones). */
	for (const struct modsym *t = s + 1; t < ms.v + ms.n && !strcmp(t->mod, s->mod); t++) {
		if (t->addr <= s->addr)
			continue;
		sym->size = t->addr - s->addr;
		snprintf(sym->next, sizeof(sym->next), "%s", t->name);
		break;
	}
	return 0;
}

/*
 * Whether the kernel has the function a SPEC names (FUNC: in the core
 * kernel or a loaded module; MOD:FUNC: in module MOD, which must be
 * loaded), as kprobes look it up (kallsyms_lookup_name()). Names need no
 * root. 1 yes, 0 no, -errno when kallsyms cannot be read.
 */
int ksym_func_exists(const char *func)
{
	const char *colon = strchr(func, ':');
	struct ksym sym;
	char mod[64];
	int err, count;

	if (!colon) {
		err = kpx_kallsyms_load();
		if (err)
			return err;
		if (kpx_ksym_find(func, &count))
			return 1;
		err = ksym_lookup_module(NULL, func, &sym);
	} else {
		if ((size_t)(colon - func) >= sizeof(mod))
			return 0;
		snprintf(mod, sizeof(mod), "%.*s", (int)(colon - func), func);
		err = ksym_lookup_module(mod, colon + 1, &sym);
	}
	if (err == -ENOENT)
		return 0;
	return err == -EACCES ? 1 : err ? err : 1;
}

/* Whether kallsyms shows addresses (root, or kptr_restrict allows it). */
bool ksym_addrs_visible(void)
{
	int count;
	const struct kpx_ksym *s = kpx_ksym_find("_text", &count);

	if (!s)
		s = kpx_ksym_find("_stext", &count);
	return s && s->addr;
}
