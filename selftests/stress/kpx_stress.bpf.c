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

/*
 * Hits per slot, in .bss: the controller reads them through the skeleton's
 * mmap, with no bpf() map syscall. A map syscall holds bpf_prog_active
 * while it copies, preemptibly (bpf_disable_instrumentation(), as stock
 * 6.12 does); a controller preempted there would make every kprobe program
 * on its CPU count a miss instead of running, for a whole time slice, and
 * the worker's exact count (below) would come out short. It did, once in a
 * few runs, while the hits were in a per-CPU array map.
 */
__u64 hits[MAX_SLOTS];

/*
 * The last sequence number per (thread, site): an array slot per pair, not
 * a hash map. Probes also run from int3, which the kernel enters like an
 * NMI, and a hash map update takes a bucket spinlock there that lockdep
 * (rightly, for a spinlock) reports once the same map took it outside NMI.
 * Array slots take no lock: one thread's hits come one after the other.
 */
#define SEQ_TIDS	32768		/* pid_max of the VM: every thread is checked */
#define SEQ_SITES	4		/* sites checked per thread (the test uses 3) */

struct seq_slot {
	__u32 tid;			/* 0: unused yet */
	__u32 pad;
	__u64 seq;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SEQ_TIDS * SEQ_SITES);
	__type(key, __u32);
	__type(value, struct seq_slot);
} last_seq SEC(".maps");

/* kthread hits that could not be checked (thread id too large): must be 0 */
__u64 unchecked;

SEC("kprobe")
int stress_probe(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 slot = cookie & 0xffff;
	__u32 site = cookie >> 16;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct seq_slot *last;
	char comm[16];
	__u64 seq;
	__u32 idx;

	__sync_fetch_and_add(&hits[slot & (MAX_SLOTS - 1)], 1);
	if (worker_tid && tid == worker_tid) {
		__sync_fetch_and_add(&worker_hits, 1);
		return 0;
	}
	bpf_get_current_comm(comm, sizeof(comm));
	if (comm[0] != 'k' || comm[1] != 'p' || comm[2] != 'x' || comm[3] != '_')
		return 0;
	seq = PT_REGS_PARM1(ctx);
	if (tid >= SEQ_TIDS || site >= SEQ_SITES) {
		__sync_fetch_and_add(&unchecked, 1);
		return 0;
	}
	idx = tid * SEQ_SITES + site;
	last = bpf_map_lookup_elem(&last_seq, &idx);
	if (!last)
		return 0;
	if (last->tid == tid && seq <= last->seq)
		__sync_fetch_and_add(&mismatches, 1);
	last->tid = tid;
	last->seq = seq;
	return 0;
}
