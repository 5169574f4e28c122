// SPDX-License-Identifier: GPL-2.0
/*
 * kpx_hog: hold off RCU-tasks grace periods for as long as it is loaded.
 *
 * Its kthread spins with preemption enabled and never sleeps. On a PREEMPT
 * kernel the scheduler preempts it, which is no quiescent state for
 * RCU-tasks: synchronize_rcu_tasks() waits until the module is unloaded.
 * Tests use it to keep a multi-instruction callopt probe waiting (as int3,
 * "pending") and check that other probes attach and detach meanwhile.
 */
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>

static struct task_struct *kpx_hog_thread;

static int kpx_hog(void *unused)
{
	while (!kthread_should_stop())
		cpu_relax();
	return 0;
}

static int __init kpx_hog_init(void)
{
	kpx_hog_thread = kthread_run(kpx_hog, NULL, "kpx_hog");
	return PTR_ERR_OR_ZERO(kpx_hog_thread);
}

static void __exit kpx_hog_exit(void)
{
	kthread_stop(kpx_hog_thread);
}

module_init(kpx_hog_init);
module_exit(kpx_hog_exit);
MODULE_DESCRIPTION("kpx: hold off RCU-tasks grace periods while loaded");
MODULE_LICENSE("GPL");
