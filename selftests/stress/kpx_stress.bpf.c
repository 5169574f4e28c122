// SPDX-License-Identifier: GPL-2.0
/*
 * BPF side of the kpx preemption stress test. One program, attached at many
 * sites with cookie = slot:
 *  - counts hits per slot;
 *  - for kpx_target kthreads, checks that the sequence number in %rdi grows
 *    strictly per (thread, site): a hit seen twice, or corrupted registers,
 *    count as a mismatch;
 *  - for the controller's own worker thread, counts its hits exactly.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define MAX_SLOTS 8192

/* Set by the controller before load. */
const volatile __u32 worker_tid;

__u64 mismatches;
__u64 worker_hits;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

struct seq_key {
	__u32 tid;
	__u32 site;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct seq_key);
	__type(value, __u64);
} last_seq SEC(".maps");

SEC("kprobe")
int stress_probe(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 slot = cookie & 0xffff;
	__u32 site = cookie >> 16;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct seq_key key = { .tid = tid, .site = site };
	char comm[16];
	__u64 *v, seq;

	v = bpf_map_lookup_elem(&hits, &slot);
	if (v)
		(*v)++;
	if (worker_tid && tid == worker_tid) {
		__sync_fetch_and_add(&worker_hits, 1);
		return 0;
	}
	bpf_get_current_comm(comm, sizeof(comm));
	if (comm[0] != 'k' || comm[1] != 'p' || comm[2] != 'x' || comm[3] != '_')
		return 0;
	seq = PT_REGS_PARM1(ctx);
	v = bpf_map_lookup_elem(&last_seq, &key);
	if (v) {
		if (seq <= *v)
			__sync_fetch_and_add(&mismatches, 1);
		*v = seq;
	} else {
		bpf_map_update_elem(&last_seq, &key, &seq, BPF_ANY);
	}
	return 0;
}
