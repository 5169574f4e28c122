// SPDX-License-Identifier: GPL-2.0
/*
 * kpx_going_helper: runs a module's code after its GOING notification, to
 * test what a call-optimized probe killed with its module leaves at its
 * site (vm/test_callopt_going; "x86/kprobes: Give a killed callopt
 * probe's site its original bytes back").
 *
 * kpx_going (which needs this module's kpx_going_attach()) hands over its
 * function and the probe site in it when it loads. With probe=1 this module
 * registers a kprobe ("first") there, the first time; when kpx_going loads
 * again at the same address, a second one ("again"), which makes kprobes
 * prepare the killed probe anew (register_aggr_kprobe() on a gone probe).
 *
 * A module notifier of a lower priority than kprobes' own runs when
 * kpx_going goes, after kprobes killed the probes in it: it calls the
 * function KPX_GOING_CALLS times while the module's text is still there,
 * and records what it saw in going_calls, going_wrong (results other than
 * KPX_GOING_MAGIC), going_hits (hits of the probes meanwhile: a gone probe
 * runs no handler) and going_byte (the first byte at the site after the
 * kill: the movabs' REX prefix, 0x48, once the site has its original
 * bytes back) and going_site_diff (how many of the site's 10 bytes then
 * differ from a copy taken when the module loaded, before any probe: 0
 * once the whole instruction is back). Before that fix the first call
 * never returned: the site still called callopt_entry, which found no
 * probe and returned to it.
 *
 * Writing 1 to spin starts a kthread, bound to CPU 1, that calls the
 * function in a loop until the notifier stops it, so that calls run
 * while kprobes kills the probe and restores the site: spin_wrong counts
 * its wrong results, spin_after_kill its calls that returned after the
 * probe was gone (the notifier waits for 100 of them, for at most 2 s).
 */
#include <linux/delay.h>
#include <linux/kprobes.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/uaccess.h>

#include "kpx_going.h"

#define KPX_GOING_CALLS	100
/* The site's instruction: movabs $imm64, %rax. */
#define KPX_GOING_SITE_LEN	10

static bool probe;
module_param(probe, bool, 0444);
MODULE_PARM_DESC(probe, "register kprobes at kpx_going's site");

static unsigned long site;

static int kpx_going_get_site(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%016lx\n", READ_ONCE(site));
}

static const struct kernel_param_ops kpx_going_site_ops = {
	.get = kpx_going_get_site,
};
module_param_cb(site, &kpx_going_site_ops, NULL, 0444);
MODULE_PARM_DESC(site, "the probe site of the loaded kpx_going, in hex (0: none)");

static int again;
module_param(again, int, 0444);
MODULE_PARM_DESC(again, "1: the second kprobe is at the first one's address; -errno: it failed");

static int goings;
module_param(goings, int, 0444);
MODULE_PARM_DESC(goings, "GOING notifications of kpx_going handled");

static int going_calls;
module_param(going_calls, int, 0444);
MODULE_PARM_DESC(going_calls, "calls made after the last kill");

static int going_wrong;
module_param(going_wrong, int, 0444);
MODULE_PARM_DESC(going_wrong, "of those, the calls with a wrong result");

static int going_hits = -1;
module_param(going_hits, int, 0444);
MODULE_PARM_DESC(going_hits, "probe hits during those calls");

static int going_byte = -1;
module_param(going_byte, int, 0444);
MODULE_PARM_DESC(going_byte, "the first byte at the site after the last kill");

static int going_site_diff = -1;
module_param(going_site_diff, int, 0444);
MODULE_PARM_DESC(going_site_diff,
		 "bytes of the site that differ from their copy at load, after the last kill (-1: unread)");

/* The site's bytes when kpx_going loaded, before a probe was there. */
static u8 site_orig[KPX_GOING_SITE_LEN];

static int kpx_going_pre(struct kprobe *p, struct pt_regs *regs);
static struct kprobe kp_first = { .pre_handler = kpx_going_pre };
static struct kprobe kp_again = { .pre_handler = kpx_going_pre };


static unsigned int spin_wrong;
module_param(spin_wrong, uint, 0444);
MODULE_PARM_DESC(spin_wrong, "the loop's calls with a wrong result");

static unsigned int spin_after_kill;
module_param(spin_after_kill, uint, 0444);
MODULE_PARM_DESC(spin_after_kill, "the loop's calls that returned after the last kill");

static atomic_t hits_first = ATOMIC_INIT(0);
static atomic_t hits_again = ATOMIC_INIT(0);

static int kpx_going_get_atomic(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read((atomic_t *)kp->arg));
}

static const struct kernel_param_ops kpx_going_atomic_ops = {
	.get = kpx_going_get_atomic,
};
module_param_cb(hits, &kpx_going_atomic_ops, &hits_first, 0444);
MODULE_PARM_DESC(hits, "hits of the first kprobe");
module_param_cb(hits_again, &kpx_going_atomic_ops, &hits_again, 0444);
MODULE_PARM_DESC(hits_again, "hits of the second kprobe");

static int kpx_going_pre(struct kprobe *p, struct pt_regs *regs)
{
	atomic_inc(p == &kp_again ? &hits_again : &hits_first);
	return 0;
}

static bool first_registered, again_registered;

static DEFINE_MUTEX(kpx_going_lock);
static unsigned long (*victim_fn)(unsigned long);
static struct module *victim_mod;
static struct task_struct *spinner;

/* The probe whose kill the loop watches: the last one registered. */
static struct kprobe *kpx_going_watched(void)
{
	return again_registered ? &kp_again : &kp_first;
}

/*
 * victim_fn is set before the kthread starts and cleared only after
 * kthread_stop() returned.
 */
static int kpx_going_spin(void *unused)
{
	struct kprobe *kp = kpx_going_watched();
	unsigned long n;

	for (n = 0; !kthread_should_stop(); n++) {
		if (victim_fn(n) != KPX_GOING_MAGIC)
			WRITE_ONCE(spin_wrong, spin_wrong + 1);
		if (READ_ONCE(kp->flags) & KPROBE_FLAG_GONE)
			WRITE_ONCE(spin_after_kill, spin_after_kill + 1);
		if (!(n % 256))
			cond_resched();
	}
	return 0;
}

static int kpx_going_register(struct kprobe *kp, void *addr)
{
	kp->addr = addr;
	return register_kprobe(kp);
}

int kpx_going_attach(unsigned long (*fn)(unsigned long), void *addr,
		     struct module *mod)
{
	int ret = 0;

	mutex_lock(&kpx_going_lock);
	/* Before a probe there: what the kill must give back. */
	if (copy_from_kernel_nofault(site_orig, addr, sizeof(site_orig))) {
		mutex_unlock(&kpx_going_lock);
		return -EFAULT;
	}
	if (probe && !first_registered) {
		ret = kpx_going_register(&kp_first, addr);
		first_registered = !ret;
	} else if (probe && !again_registered) {
		/* A second load: the killed first probe is prepared again. */
		if (addr != kp_first.addr) {
			again = -EADDRNOTAVAIL;
		} else {
			ret = kpx_going_register(&kp_again, addr);
			again_registered = !ret;
			again = ret ? ret : 1;
		}
	}
	if (!ret) {
		victim_fn = fn;
		victim_mod = mod;
		WRITE_ONCE(site, (unsigned long)addr);
	}
	mutex_unlock(&kpx_going_lock);
	return ret;
}
EXPORT_SYMBOL_GPL(kpx_going_attach);

static int kpx_going_spin_start(const char *val, const struct kernel_param *kp)
{
	struct task_struct *t;
	bool on;
	int ret;

	ret = kstrtobool(val, &on);
	if (ret)
		return ret;
	if (!on)
		return -EINVAL;
	mutex_lock(&kpx_going_lock);
	if (!victim_fn || spinner) {
		ret = -EBUSY;
	} else {
		WRITE_ONCE(spin_after_kill, 0);
		t = kthread_create(kpx_going_spin, NULL, "kpx_going_spin");
		if (IS_ERR(t)) {
			ret = PTR_ERR(t);
		} else {
			if (cpu_online(1))
				kthread_bind(t, 1);
			spinner = t;
			wake_up_process(t);
		}
	}
	mutex_unlock(&kpx_going_lock);
	return ret;
}

static const struct kernel_param_ops kpx_going_spin_ops = {
	.set = kpx_going_spin_start,
};
module_param_cb(spin, &kpx_going_spin_ops, NULL, 0200);
MODULE_PARM_DESC(spin, "1: call kpx_going's function in a loop on CPU 1 until it goes");

static int kpx_going_notify(struct notifier_block *nb, unsigned long val,
			    void *data)
{
	u8 byte, now[KPX_GOING_SITE_LEN];
	int before, i, wrong = 0;

	if (val != MODULE_STATE_GOING)
		return NOTIFY_DONE;
	mutex_lock(&kpx_going_lock);
	if (data != victim_mod || !victim_fn) {
		mutex_unlock(&kpx_going_lock);
		return NOTIFY_DONE;
	}
	before = atomic_read(&hits_first) + atomic_read(&hits_again);
	for (i = 1; i <= KPX_GOING_CALLS; i++) {
		if (victim_fn(i) != KPX_GOING_MAGIC)
			wrong++;
	}
	if (spinner) {
		/* Let the loop return from the killed site too. */
		for (i = 0; i < 200 && READ_ONCE(spin_after_kill) < KPX_GOING_CALLS; i++)
			msleep(10);
		kthread_stop(spinner);
		spinner = NULL;
	}
	going_calls = KPX_GOING_CALLS;
	going_wrong = wrong;
	going_hits = atomic_read(&hits_first) + atomic_read(&hits_again) - before;
	going_byte = copy_from_kernel_nofault(&byte, (void *)site, 1) ? -1 : byte;
	going_site_diff = -1;
	if (!copy_from_kernel_nofault(now, (void *)site, sizeof(now))) {
		going_site_diff = 0;
		for (i = 0; i < KPX_GOING_SITE_LEN; i++)
			going_site_diff += now[i] != site_orig[i];
	}
	goings++;
	pr_info("kpx_going_helper: after the kill: %d calls, %d wrong, %d probe hits, site byte %02x, %d bytes changed\n",
		going_calls, going_wrong, going_hits, going_byte & 0xff, going_site_diff);
	victim_fn = NULL;
	victim_mod = NULL;
	WRITE_ONCE(site, 0);
	mutex_unlock(&kpx_going_lock);
	return NOTIFY_DONE;
}

/* Below kprobes' own notifier (priority 0), which kills the probes. */
static struct notifier_block kpx_going_nb = {
	.notifier_call = kpx_going_notify,
	.priority = -100,
};

static int __init kpx_going_helper_init(void)
{
	return register_module_notifier(&kpx_going_nb);
}

static void __exit kpx_going_helper_exit(void)
{
	unregister_module_notifier(&kpx_going_nb);
	if (spinner)
		kthread_stop(spinner);
	if (again_registered)
		unregister_kprobe(&kp_again);
	if (first_registered)
		unregister_kprobe(&kp_first);
}

module_init(kpx_going_helper_init);
module_exit(kpx_going_helper_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpx: run a module's code after its GOING notification");
