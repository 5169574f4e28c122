// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl's probe program: one program, attached once per probe site with the
 * probe's slot as BPF cookie, counting hits per slot.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kpctl.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Count only this process's hits when non-zero (set by the loader). */
const volatile __u32 target_tgid;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KPCTL_MAX_PROBES);
	__type(key, __u32);
	__type(value, struct kpctl_count);
} counts SEC(".maps");

static __always_inline int count_hit(void *ctx)
{
	__u32 slot = (__u32)bpf_get_attach_cookie(ctx);
	struct kpctl_count *c;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	c = bpf_map_lookup_elem(&counts, &slot);
	if (c)
		c->hits++;
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
