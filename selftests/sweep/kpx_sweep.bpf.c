// SPDX-License-Identifier: GPL-2.0
/*
 * BPF side of the every-site sweep (kpx_sweep.c).
 *
 * sweep_probe: one program, attached at every site of a batch with the
 * site's index as BPF cookie. Per site, in .bss (read by the controller
 * through the skeleton's mmap, never with a map syscall: see
 * selftests/stress/kpx_stress.bpf.c for why):
 *  - hits: how often it ran;
 *  - last_ip: the pt_regs ip of its last run, which must be the probed
 *    address + 1 on every x86 mechanism (int3, ftrace, jump optimization,
 *    callopt), so a program run for the wrong site or with a wrong frame
 *    shows up.
 *
 * sweep_read_text: reads kernel text (BPF_PROG_RUN), so that the sweep can
 * record the instruction bytes the running kernel has at each site (boot
 * patching: alternatives, ENDBR sealing, return thunks) beside vmlinux's.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kpx_sweep.h"
#include "kpx_text.h"

char LICENSE[] SEC("license") = "GPL";

__u64 hits[SWEEP_MAX_SITES];
__u64 last_ip[SWEEP_MAX_SITES];
/* Runs whose cookie is out of range: must stay 0. */
__u64 bad_cookie;

static __always_inline int sweep_hit(struct pt_regs *ctx)
{
	__u64 i = bpf_get_attach_cookie(ctx);

	if (i >= SWEEP_MAX_SITES) {
		__sync_fetch_and_add(&bad_cookie, 1);
		return 0;
	}
	__sync_fetch_and_add(&hits[i], 1);
	last_ip[i] = PT_REGS_IP(ctx);
	return 0;
}

SEC("kprobe")
int sweep_probe(struct pt_regs *ctx)
{
	return sweep_hit(ctx);
}

/* --multi: the sites of a batch in kprobe_multi links, with offsets. */
SEC("kprobe.multi")
int sweep_probe_multi(struct pt_regs *ctx)
{
	return sweep_hit(ctx);
}

char text_buf[SWEEP_TEXT_MAX];

SEC("syscall")
int sweep_read_text(struct kpx_text_args *args)
{
	return kpx_bpf_read_text(args, text_buf, SWEEP_TEXT_MAX);
}
