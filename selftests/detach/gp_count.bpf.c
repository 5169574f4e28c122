// SPDX-License-Identifier: GPL-2.0
/*
 * How many grace periods one thread waits for (kpx-detach-race
 * --count-gp): fentry programs on the kernel's grace-period waits count
 * the calls that thread makes while user space has set "armed" (around
 * each detach). A detach that waits for no grace period makes none; the
 * stock one makes at least one (synchronize_rcu_tasks_trace()).
 * Some waits call others (synchronize_rcu() calls __wait_rcu_gp()): the
 * counts are of calls, not of distinct grace periods.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define GP_NR	8

const volatile __u32 tid;
__u32 armed;
__u64 waits[GP_NR];

#define GP_WAIT(i, fn)							\
SEC("fentry/" #fn)							\
int BPF_PROG(gp_##fn)							\
{									\
	if (armed && (__u32)bpf_get_current_pid_tgid() == tid)		\
		__sync_fetch_and_add(&waits[i], 1);			\
	return 0;							\
}

GP_WAIT(0, __wait_rcu_gp)
GP_WAIT(1, synchronize_rcu)
GP_WAIT(2, synchronize_rcu_expedited)
GP_WAIT(3, synchronize_srcu)
GP_WAIT(4, synchronize_srcu_expedited)
GP_WAIT(5, synchronize_rcu_tasks)
GP_WAIT(6, synchronize_rcu_tasks_trace)
GP_WAIT(7, synchronize_rcu_tasks_rude)
