// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpx-multi-all's program (selftests/benchs/multi_all.c): one kprobe_multi
 * link over every traceable core-kernel function. Each run counts itself in
 * a per-CPU slot: slot 0 while the link is meant to be live, slot 1 (a late
 * run) once user space has set @dead, which it does right after
 * bpf_link__destroy() returns, or, for the negative control, right after
 * the attach.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} runs SEC(".maps");

volatile int dead;

SEC("kprobe.multi")
int multi_all(struct pt_regs *ctx)
{
	__u32 key = dead ? 1 : 0;
	__u64 *v = bpf_map_lookup_elem(&runs, &key);

	if (v)
		(*v)++;
	return 0;
}
