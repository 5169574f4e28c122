// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A kprobe program for selftests/vm/test_bpftool_kprobe.sh, loaded and
 * attached with bpftool only: counts its hits per BPF cookie (0..7) in the
 * "hits" array map.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define NR_SLOTS 8

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NR_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

SEC("kprobe")
int bpftool_kprobe(struct pt_regs *ctx)
{
	__u32 slot = (__u32)bpf_get_attach_cookie(ctx);
	__u64 *count;

	count = bpf_map_lookup_elem(&hits, &slot);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}
