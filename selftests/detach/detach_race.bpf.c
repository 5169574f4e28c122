// SPDX-License-Identifier: GPL-2.0
/*
 * The programs of kpx-detach-race (detach_race.c): a kprobe program that is
 * still running on one CPU while another CPU detaches its link and closes
 * its object.
 *
 * run() counts each run that starts (enter) and each that ends (exit) in
 * the state map, which the controller keeps open after it closed the
 * object. Between the two it runs a bpf_loop() of loads through a BTF
 * pointer (bpf_rdonly_cast()) into a kernel address that nothing maps: each
 * load faults and is fixed up through the program's exception table, which
 * the kernel finds only through the program's ksym. A program that runs
 * on after its last reference was dropped has neither, and its next load
 * oopses. With loops = 0 it is a plain counting program.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

extern void *bpf_rdonly_cast(const void *obj__ign, __u32 btf_id) __ksym;

/* Set by the controller before load. */
const volatile __u32 loops = 1000;
/* The guard hole below the direct map: never mapped on x86_64. */
const volatile __u64 hole = 0xffff800000001000ULL;
/* Runs in other processes do not count (the probed function is common). */
const volatile __u32 target_tgid;

struct run_state {
	__u64 enter;	/* runs that started */
	__u64 exit;	/* runs that ended */
	__u64 sum;	/* what the faulting loads read (0 each) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct run_state);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} jmp SEC(".maps");

static long fault_one(__u64 i, void *ctx)
{
	struct task_struct *t;

	t = bpf_rdonly_cast((void *)(hole + (i & 7) * 64),
			    bpf_core_type_id_kernel(struct task_struct));
	/* A BPF_PROBE_MEM load: faults, and the extable makes it read 0. */
	*(__u64 *)ctx += t->pid;
	return 0;
}

static __always_inline int run(void)
{
	struct run_state *s;
	__u32 zero = 0;
	__u64 acc = 0;

	if ((bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	s = bpf_map_lookup_elem(&state, &zero);
	if (!s)
		return 0;
	__sync_fetch_and_add(&s->enter, 1);
	bpf_loop(loops, fault_one, &acc, 0);
	s->sum += acc;
	__sync_fetch_and_add(&s->exit, 1);
	return 0;
}

SEC("kprobe")
int race_kprobe(struct pt_regs *ctx)
{
	return run();
}

SEC("kprobe.multi")
int race_multi(struct pt_regs *ctx)
{
	return run();
}

/* The tail-call row: this one is attached and jumps to race_tail_target. */
SEC("kprobe")
int race_tail(struct pt_regs *ctx)
{
	if ((bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	bpf_tail_call(ctx, &jmp, 0);
	return 0;
}

SEC("kprobe")
int race_tail_target(struct pt_regs *ctx)
{
	return run();
}
