// SPDX-License-Identifier: GPL-2.0
/*
 * kpx_hog: hold off RCU-tasks grace periods for as long as it is loaded,
 * and ordinary RCU grace periods on demand.
 *
 * Its kthread spins with preemption enabled and never sleeps. On a PREEMPT
 * kernel the scheduler preempts it, which is no quiescent state for
 * RCU-tasks: synchronize_rcu_tasks() waits until the module is unloaded.
 * Tests use it to keep a multi-instruction callopt probe waiting (as int3,
 * "pending") and check that other probes attach and detach meanwhile.
 *
 * Writing N to /sys/module/kpx_hog/parameters/hold_rcu_ms makes the
 * kthread spin with preemption disabled for N ms (at most 5000, well below
 * the RCU stall timeout), during which no RCU grace period can end; "holds"
 * counts the holds that started, and "holding" is 1 while one lasts. "cpu" (at load time) binds the kthread to
 * one CPU, so that a test can run on another.
 */
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>

static int cpu = -1;
module_param(cpu, int, 0444);
MODULE_PARM_DESC(cpu, "CPU to bind the kthread to (-1: any)");

static unsigned int hold_rcu_ms;
module_param(hold_rcu_ms, uint, 0644);
MODULE_PARM_DESC(hold_rcu_ms, "spin this long with preemption disabled, once");

static unsigned int holds;
module_param(holds, uint, 0444);
MODULE_PARM_DESC(holds, "how many holds started");

static unsigned int holding;
module_param(holding, uint, 0444);
MODULE_PARM_DESC(holding, "1 while a hold lasts");

#define KPX_HOG_HOLD_MAX_MS	5000

static struct task_struct *kpx_hog_thread;

static void kpx_hog_hold(unsigned int ms)
{
	unsigned long end = jiffies + msecs_to_jiffies(min(ms, KPX_HOG_HOLD_MAX_MS));

	preempt_disable();
	WRITE_ONCE(holding, 1);
	WRITE_ONCE(holds, holds + 1);
	while (time_before(jiffies, end))
		cpu_relax();
	WRITE_ONCE(holding, 0);
	preempt_enable();
}

static int kpx_hog(void *unused)
{
	unsigned int ms;

	while (!kthread_should_stop()) {
		ms = READ_ONCE(hold_rcu_ms);
		if (ms) {
			WRITE_ONCE(hold_rcu_ms, 0);
			kpx_hog_hold(ms);
		}
		cpu_relax();
	}
	return 0;
}

static int __init kpx_hog_init(void)
{
	if (cpu >= 0 && (cpu >= nr_cpu_ids || !cpu_online(cpu)))
		return -EINVAL;
	kpx_hog_thread = kthread_create(kpx_hog, NULL, "kpx_hog");
	if (IS_ERR(kpx_hog_thread))
		return PTR_ERR(kpx_hog_thread);
	if (cpu >= 0)
		kthread_bind(kpx_hog_thread, cpu);
	wake_up_process(kpx_hog_thread);
	return 0;
}

static void __exit kpx_hog_exit(void)
{
	kthread_stop(kpx_hog_thread);
}

module_init(kpx_hog_init);
module_exit(kpx_hog_exit);
MODULE_DESCRIPTION("kpx: hold off RCU-tasks grace periods while loaded, RCU ones on demand");
MODULE_LICENSE("GPL");
