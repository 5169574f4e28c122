/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The kernel image (vmlinux) and the running kernel's view of one function:
 * its text, the table entries that fall into it, and the kernel's
 * run-time state that decides how it is probed.
 */
#ifndef KPCTL_KIMAGE_H
#define KPCTL_KIMAGE_H

#include <stdbool.h>
#include <stddef.h>

struct addr_set {
	unsigned long long *a;
	size_t n;
};

struct span {
	unsigned long long start, end;	/* [start, end) */
	char name[64];
};

struct span_set {
	struct span *s;
	size_t n;
};

/*
 * One ORC entry (arch/x86/include/asm/orc_types.h, struct orc_entry: s16
 * sp_offset, s16 bp_offset, then sp_reg:4, bp_reg:4, type:3, signal:1 in
 * 16 bits), decoded.
 */
struct kp_orc {
	bool found;		/* orc_find() has an entry for the address */
	short sp_offset, bp_offset;
	unsigned char sp_reg, bp_reg, type, signal;
};

struct vm_sym {
	const char *name;
	unsigned long long value;
};

struct vmlinux {
	char path[4096];
	const unsigned char *map;
	size_t len;
	long long delta;	/* running address - link address (KASLR) */
	int build_id_match;	/* 1 match, 0 differ, -1 unknown */
	/* The ORC tables (.orc_unwind_ip, .orc_unwind); norc 0: none */
	const unsigned char *orc_ip, *orc;
	unsigned long long orc_ip_va;	/* link address of .orc_unwind_ip */
	size_t norc;
	unsigned int *orc_order;	/* NULL: sorted as in the file; else
					 * the entries in sorttable's order
					 */
	unsigned long long stext, etext;	/* the lookup range of orc_find() */
	/*
	 * Offline (vmlinux_open_offline()): no running kernel is asked. The
	 * symbols are vmlinux's own (given to libkpx as kallsyms), at their
	 * link addresses; ftrace sites come from __mcount_loc, the blacklist
	 * from _kprobe_blacklist and the blacklisted sections; no kprobes
	 * are registered; the SMP alternatives are in place.
	 */
	bool offline;
	/* vmlinux's symbols by name (elf_sym()), built on the first lookup */
	struct vm_sym *syms;
	size_t nsyms, syms_cap;
};

struct kfunc {
	char name[128];
	unsigned long long addr, size;
	char next[128];
	int nsyms;			/* kallsyms symbols of that name */
	bool init_text;
	unsigned char *text;		/* size + KFUNC_SLACK bytes, as decoded */
	unsigned char *image;		/* the same bytes from vmlinux */
	bool live;			/* text was read from the running kernel */
	struct addr_set extable;	/* exception-table entries (insn addresses) */
	struct addr_set bugs;		/* BUG/WARN sites */
	struct addr_set smp_locks;	/* lock prefixes (SMP alternatives) */
	struct span_set jump_labels;	/* jump label sites (2 or 5 bytes) */
	struct span_set static_calls;	/* static call sites (5 bytes) */
	struct span_set alternatives;	/* alternative sites, for the notes */
	struct span_set ftrace;		/* ftrace call sites (5 bytes) */
	bool ftrace_from_tracefs;
	struct span_set blacklist;	/* debugfs kprobes blacklist */
	struct addr_set kprobes;	/* kprobes already registered in FUNC */
	unsigned long long entry_text_start, entry_text_end;
	bool smp_alt_reserved;		/* the kernel runs UP-patched SMP alternatives */
	/*
	 * orc[off]: the ORC entry in effect at addr + off, for off in
	 * 0 .. size (NULL when vmlinux has no ORC tables).
	 */
	struct kp_orc *orc;
};

#define KFUNC_SLACK 32

int vmlinux_open(struct vmlinux *vm, const char *path);
/*
 * vmlinux_open() for a kernel that need not be running here (see
 * ->offline). Must come before any kallsyms lookup: libkpx then reads
 * vmlinux's symbols instead of /proc/kallsyms.
 */
int vmlinux_open_offline(struct vmlinux *vm, const char *path);
void vmlinux_close(struct vmlinux *vm);
int kfunc_load(struct kfunc *f, struct vmlinux *vm, const char *name,
	       int (*read_live)(unsigned long long addr, void *buf, size_t len));
void kfunc_free(struct kfunc *f);
/*
 * orc_find() of arch/x86/kernel/unwind_orc.c for the running address @a in
 * vmlinux: the last entry (by address) whose address is <= @a; ->found is
 * false when vmlinux has no ORC tables or @a is outside [_stext, _etext).
 */
struct kp_orc vmlinux_orc_find(const struct vmlinux *vm, unsigned long long a);
/* unwind_orc_same_frame(): both found, and every field equal. */
bool kp_orc_same(const struct kp_orc *a, const struct kp_orc *b);
/* The entry as objtool --dump=orc shows it ("type:call sp:sp+8 bp:(und) signal:0"). */
void kp_orc_format(const struct kp_orc *o, char *buf, size_t len);
bool addr_set_has(const struct addr_set *s, unsigned long long a);
/* A span that overlaps [start, end] (end inclusive, as the kernel's checks). */
const struct span *span_set_overlap(const struct span_set *s, unsigned long long start,
				    unsigned long long end);

#endif /* KPCTL_KIMAGE_H */
