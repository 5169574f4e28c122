// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The running kernel's symbols (libkpx reads /proc/kallsyms once). A
 * symbol's size is the distance to the next higher core-kernel symbol: that
 * is what kallsyms_lookup_size_offset() computes, and what kprobes use as
 * the function's end.
 */
#include <errno.h>
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
 * -EINVAL for an address that does not parse.
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
