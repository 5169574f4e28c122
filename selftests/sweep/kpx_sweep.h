/* SPDX-License-Identifier: GPL-2.0 */
/* Shared between the sweep's BPF program and its controller. */
#ifndef KPX_SWEEP_H
#define KPX_SWEEP_H

/* Sites per run (the cookie indexes the .bss arrays). */
#define SWEEP_MAX_SITES	65536

/* sweep_read_text: copy @len bytes of kernel text at @addr into text_buf. */
#define SWEEP_TEXT_MAX	16

struct sweep_text_args {
	__u64 addr;
	__u32 len;
	__s32 ret;		/* bpf_probe_read_kernel()'s return value */
};

#endif /* KPX_SWEEP_H */
