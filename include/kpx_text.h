/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading kernel text from user space with a BPF_PROG_RUN program, shared by
 * kpctl (loader/kpctl.bpf.c, 'explain') and the sweep
 * (selftests/sweep/kpx_sweep.bpf.c): the program's context says what to read,
 * the program copies it into a .bss buffer of its object, libkpx's
 * kpx_read_text() runs it and copies the buffer out.
 */
#ifndef KPX_TEXT_H
#define KPX_TEXT_H

struct kpx_text_args {
	__u64 addr;
	__u32 len;
	__s32 ret;		/* bpf_probe_read_kernel()'s return value */
};

#ifdef __bpf__
/* The body of a SEC("syscall") program: copy args->len bytes into @buf. */
static __always_inline int kpx_bpf_read_text(struct kpx_text_args *args, char *buf, __u32 max)
{
	__u32 len = args->len;

	if (len > max)
		len = max;
	args->ret = bpf_probe_read_kernel(buf, len, (void *)args->addr);
	return 0;
}
#endif

#endif /* KPX_TEXT_H */
