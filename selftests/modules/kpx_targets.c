// SPDX-License-Identifier: GPL-2.0
/*
 * kpx_targets: probe targets for the kpx preemption stress test.
 *
 * One preemptible kthread per online CPU calls three functions in a tight
 * loop, passing a per-thread sequence number that grows by one per loop:
 *
 *   kpx_target_entry()   its fentry site: an ftrace-based probe
 *   kpx_target_single()  a 10-byte movabs: a single-instruction site that
 *                        the kernel call-optimizes (callopt)
 *   kpx_target_multi()   four 2-byte instructions: a multi-instruction site
 *                        (jump optimization)
 *
 * At both mid-function sites the sequence number is in %rdi, so a BPF
 * program can check, per thread and site, that every hit it sees carries a
 * larger number than the one before: a hit seen twice, or with corrupted
 * registers, breaks that. The kthreads run until the module is removed.
 */
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>

/* Global, so that GCC keeps their signatures; not exported. */
void kpx_target_entry(unsigned long seq);
void kpx_target_single(unsigned long seq);
void kpx_target_multi(unsigned long seq);

static unsigned long kpx_sink;

noinline void kpx_target_entry(unsigned long seq)
{
	WRITE_ONCE(kpx_sink, seq);
}

noinline void kpx_target_single(unsigned long seq)
{
	/* The probe site: "movabs $imm64, %rax", 10 bytes. */
	asm volatile("movabs $0x6b70785f73697465, %%rax\n\t"
		     : : "D" (seq) : "rax", "memory");
	WRITE_ONCE(kpx_sink, seq);
}

noinline void kpx_target_multi(unsigned long seq)
{
	/* The probe site: xor, then three inc: 8 bytes in 4 instructions. */
	asm volatile("xorl %%eax, %%eax\n\t"
		     "incl %%eax\n\t"
		     "incl %%eax\n\t"
		     "incl %%eax\n\t"
		     : : "D" (seq) : "rax", "memory");
	WRITE_ONCE(kpx_sink, seq);
}

static struct task_struct **kpx_threads;

static int kpx_loop(void *unused)
{
	unsigned long seq = 1;

	while (!kthread_should_stop()) {
		kpx_target_entry(seq);
		kpx_target_single(seq);
		kpx_target_multi(seq);
		seq++;
		/* Let the controller and the other loops run now and then. */
		if (!(seq & 0xfff))
			usleep_range(50, 100);
	}
	return 0;
}

static int __init kpx_targets_init(void)
{
	unsigned int cpu;

	kpx_threads = kcalloc(nr_cpu_ids, sizeof(*kpx_threads), GFP_KERNEL);
	if (!kpx_threads)
		return -ENOMEM;
	for_each_online_cpu(cpu) {
		struct task_struct *t;

		t = kthread_create_on_cpu(kpx_loop, NULL, cpu, "kpx_target/%u");
		if (IS_ERR(t))
			continue;
		kpx_threads[cpu] = t;
		wake_up_process(t);
	}
	return 0;
}

static void __exit kpx_targets_exit(void)
{
	unsigned int cpu;

	for (cpu = 0; cpu < nr_cpu_ids; cpu++)
		if (kpx_threads[cpu])
			kthread_stop(kpx_threads[cpu]);
	kfree(kpx_threads);
}

module_init(kpx_targets_init);
module_exit(kpx_targets_exit);
MODULE_DESCRIPTION("Probe targets for the kpx preemption stress test");
MODULE_LICENSE("GPL");
