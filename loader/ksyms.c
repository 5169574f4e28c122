// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The running kernel's symbols, from /proc/kallsyms. A symbol's size is the
 * distance to the next higher core-kernel symbol: that is what
 * kallsyms_lookup_size_offset() computes, and what kprobes use as the
 * function's end.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "common.h"

static bool parse_line(const char *line, unsigned long long *addr, char *type,
		       char *name, size_t name_len)
{
	char fmt[32];

	/* Module, BPF and trampoline symbols carry a "[owner]" suffix. */
	if (strchr(line, '['))
		return false;
	snprintf(fmt, sizeof(fmt), "%%llx %%c %%%zus", name_len - 1);
	return sscanf(line, fmt, addr, type, name) == 3;
}

/*
 * Fills @sym for the core-kernel symbol @name. Returns 0, -ENOENT, or
 * -EACCES when kallsyms hides addresses (not root).
 */
int ksym_lookup(const char *name, struct ksym *sym)
{
	unsigned long long a, next = ~0ULL;
	char line[512], n[128], t;
	FILE *f;

	memset(sym, 0, sizeof(*sym));
	f = fopen("/proc/kallsyms", "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!parse_line(line, &a, &t, n, sizeof(n)))
			continue;
		if (!strcmp(n, name)) {
			if (!sym->count++) {
				sym->addr = a;
				sym->type = t;
			}
		}
	}
	if (!sym->count) {
		fclose(f);
		return -ENOENT;
	}
	if (!sym->addr) {
		fclose(f);
		return -EACCES;
	}
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		if (!parse_line(line, &a, &t, n, sizeof(n)))
			continue;
		if (a > sym->addr && a < next) {
			next = a;
			snprintf(sym->next, sizeof(sym->next), "%s", n);
		}
	}
	fclose(f);
	snprintf(sym->name, sizeof(sym->name), "%s", name);
	sym->size = next != ~0ULL ? next - sym->addr : 0;
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
