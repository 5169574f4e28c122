// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpx-bench's BPF programs (selftests/benchs/bench.c). Every program has the same body:
 * one per-CPU counter increment, so that the per-hit figures compare the
 * attach mechanisms and not the programs.
 * - bench_kprobe: BPF kprobe (int3, jump optprobe, callopt, ftrace entry)
 * - bench_kretprobe: BPF kretprobe
 * - bench_kprobe_multi: a kprobe_multi link over the one function (fprobe)
 * - bench_fentry: BPF fentry (trampoline), the reference point; its target
 *   is set by the loader (bpf_program__set_attach_target)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

static __always_inline int count_hit(void)
{
	__u32 key = 0;
	__u64 *v = bpf_map_lookup_elem(&hits, &key);

	if (v)
		(*v)++;
	return 0;
}

SEC("kprobe")
int bench_kprobe(struct pt_regs *ctx)
{
	return count_hit();
}

SEC("kretprobe")
int bench_kretprobe(struct pt_regs *ctx)
{
	return count_hit();
}

SEC("kprobe.multi")
int bench_kprobe_multi(struct pt_regs *ctx)
{
	return count_hit();
}

SEC("fentry")
int bench_fentry(void *ctx)
{
	return count_hit();
}

/* bench_read_text (BPF_PROG_RUN): the first bytes of kernel text at @addr,
 * into text_buf: whether a probe site holds int3, a jmp or a call now. */
struct bench_text_args {
	__u64 addr;
	__s32 ret;
};

__u8 text_buf[16];

SEC("syscall")
int bench_read_text(struct bench_text_args *args)
{
	args->ret = bpf_probe_read_kernel(text_buf, sizeof(text_buf), (void *)args->addr);
	return 0;
}
