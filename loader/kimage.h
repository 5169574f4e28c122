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

struct vmlinux {
	char path[4096];
	const unsigned char *map;
	size_t len;
	long long delta;	/* running address - link address (KASLR) */
	int build_id_match;	/* 1 match, 0 differ, -1 unknown */
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
};

#define KFUNC_SLACK 32

int vmlinux_open(struct vmlinux *vm, const char *path);
void vmlinux_close(struct vmlinux *vm);
int kfunc_load(struct kfunc *f, struct vmlinux *vm, const char *name,
	       int (*read_live)(unsigned long long addr, void *buf, size_t len));
void kfunc_free(struct kfunc *f);
bool addr_set_has(const struct addr_set *s, unsigned long long a);
/* A span that overlaps [start, end] (end inclusive, as the kernel's checks). */
const struct span *span_set_overlap(const struct span_set *s, unsigned long long start,
				    unsigned long long end);

#endif /* KPCTL_KIMAGE_H */
