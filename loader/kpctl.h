/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between kpctl's BPF programs and the loader. */
#ifndef KPCTL_H
#define KPCTL_H

/* One slot per attached probe; the slot is the link's BPF cookie. */
#define KPCTL_MAX_PROBES 4096

struct kpctl_count {
	__u64 hits;		/* hits of the target process (all when none) */
	__u64 ctrl_hits;	/* hits of the controller thread (stress) */
};

/* kpctl_read_text (include/kpx_text.h): up to this many bytes of kernel text. */
#define KPCTL_TEXT_MAX 65536

/* kpctl_regs: the pt_regs a kprobe handler saw, as 21 raw words in the
 * order of the kernel's struct pt_regs. */
#define KPCTL_REGS_WORDS 21

struct kpctl_regs {
	__u64 seq;		/* number of captures so far */
	__u64 words[KPCTL_REGS_WORDS];
	/*
	 * sp at the entry of the syscall function earlier in the same syscall
	 * (kpctl_regs_anchor), 0 when it did not run since the last capture.
	 * The kernel may put a random offset on the stack of each syscall
	 * (RANDOMIZE_KSTACK_OFFSET, on by default in Debian's kernels), so
	 * two hits' sp are compared relative to this.
	 */
	__u64 anchor_sp;
};

#endif /* KPCTL_H */
