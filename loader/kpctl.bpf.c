// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl's BPF programs:
 * - kpctl_kprobe/kpctl_kretprobe: one program, attached once per probe site
 *   with the probe's slot as BPF cookie, counting hits per slot;
 *   kpctl_kprobe_multi/kpctl_kretprobe_multi: the same for 'attach --multi';
 * - kpctl_links: attached once per function by 'links' (cookie = index),
 *   counting hits per cookie and runs that happen after every link is gone;
 *   kpctl_links_multi: the same for 'links --multi', in one kprobe_multi link;
 * - kpctl_regs: copies the pt_regs its kprobe handler gets into a map;
 *   kpctl_regs_anchor: notes sp at the syscall function's entry for it;
 * - kpctl_read_text: reads kernel text for 'explain' (BPF_PROG_RUN).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kpctl.h"
#include "kpx_text.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Count only this process's hits when non-zero (set by the loader). */
const volatile __u32 target_tgid;
/* Hits of this thread are counted again in ctrl_hits (stress). */
const volatile __u32 ctrl_tid;

/*
 * Hits per probe (slot = BPF cookie), in .bss: kpctl reads them through the
 * skeleton's mmap, with no bpf() map syscall. A map syscall holds
 * bpf_prog_active while it copies, preemptibly (stock 6.12); kpctl
 * preempted there would make every kprobe program on its CPU count a miss
 * instead of running, for a whole time slice, and stress's exact counts
 * would come out short.
 */
struct kpctl_count counts[KPCTL_MAX_PROBES];

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kpctl_regs);
} regs_out SEC(".maps");

char text_buf[KPCTL_TEXT_MAX];

/* sp at the last entry of the syscall function (kpctl_regs_anchor). */
__u64 regs_anchor_sp;

static __always_inline int count_hit(void *ctx)
{
	__u32 slot = (__u32)bpf_get_attach_cookie(ctx);
	__u64 id = bpf_get_current_pid_tgid();
	struct kpctl_count *c;

	if (target_tgid && (id >> 32) != target_tgid)
		return 0;
	if (slot >= KPCTL_MAX_PROBES)
		return 0;
	c = &counts[slot];
	__sync_fetch_and_add(&c->hits, 1);
	if (ctrl_tid && (__u32)id == ctrl_tid)
		__sync_fetch_and_add(&c->ctrl_hits, 1);
	return 0;
}

SEC("kprobe")
int BPF_KPROBE(kpctl_kprobe)
{
	return count_hit(ctx);
}

SEC("kretprobe")
int BPF_KRETPROBE(kpctl_kretprobe)
{
	return count_hit(ctx);
}

/* 'attach --multi': the same, in one kprobe_multi link (cookie = slot). */
SEC("kprobe.multi")
int kpctl_kprobe_multi(struct pt_regs *ctx)
{
	return count_hit(ctx);
}

SEC("kretprobe.multi")
int kpctl_kretprobe_multi(struct pt_regs *ctx)
{
	return count_hit(ctx);
}

/*
 * 'links': set by the loader only after it destroyed every link and waited
 * for an RCU grace period (membarrier(MEMBARRIER_CMD_GLOBAL)). All cookies
 * die at once, so one flag stands for a dead flag per cookie. Kprobe
 * programs run inside an RCU read-side section (with preemption off), and
 * detaching takes the program out of what a new hit can reach; once that
 * grace period is over no invocation may still run or start. Any that sees
 * the flag is a late run, counted in links_late (the cookie of the last one,
 * plus 1, in links_late_cookie); it is not counted as a hit.
 */
__u32 links_dead;
__u64 links_late;
__u64 links_late_cookie;

static __always_inline int links_hit(void *ctx)
{
	__u32 slot = (__u32)bpf_get_attach_cookie(ctx);
	struct kpctl_count *c;

	if (*(volatile __u32 *)&links_dead) {
		__sync_fetch_and_add(&links_late, 1);
		links_late_cookie = (__u64)slot + 1;
		return 0;
	}
	if (slot >= KPCTL_MAX_PROBES)
		return 0;
	c = &counts[slot];
	__sync_fetch_and_add(&c->hits, 1);
	return 0;
}

SEC("kprobe")
int kpctl_links(struct pt_regs *ctx)
{
	return links_hit(ctx);
}

/* 'links --multi': one kprobe_multi link, the function's index as cookie. */
SEC("kprobe.multi")
int kpctl_links_multi(struct pt_regs *ctx)
{
	return links_hit(ctx);
}

SEC("kprobe")
int kpctl_regs(struct pt_regs *ctx)
{
	__u32 key = 0;
	struct kpctl_regs *r;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	r = bpf_map_lookup_elem(&regs_out, &key);
	if (!r)
		return 0;
	bpf_probe_read_kernel(r->words, sizeof(r->words), ctx);
	/* Each capture takes a fresh anchor, never one of an earlier syscall. */
	r->anchor_sp = regs_anchor_sp;
	regs_anchor_sp = 0;
	__sync_fetch_and_add(&r->seq, 1);
	return 0;
}

SEC("kprobe")
int kpctl_regs_anchor(struct pt_regs *ctx)
{
	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	regs_anchor_sp = PT_REGS_SP(ctx);
	return 0;
}

SEC("syscall")
int kpctl_read_text(struct kpx_text_args *args)
{
	return kpx_bpf_read_text(args, text_buf, KPCTL_TEXT_MAX);
}
