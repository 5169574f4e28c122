// SPDX-License-Identifier: GPL-2.0
/*
 * kpx_going: a probe target whose code runs after the module's GOING
 * notification. At load it hands kpx_going_helper its function and the
 * address of the probe site in it; the helper calls the function from its
 * own module notifier when this module goes, after kprobes killed the
 * probes in it (vm/test_callopt_going).
 *
 * Writing N to /sys/module/kpx_going/parameters/kick calls the function N
 * times; "calls" counts the calls and "wrong" those that returned anything
 * but KPX_GOING_MAGIC.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "kpx_going.h"

/* Global, so that GCC keeps its signature; not exported. */
unsigned long kpx_going_site(unsigned long seq);
extern const unsigned long kpx_going_site_off;

/*
 * The probe site is the label kpx_going_movabs: "movabs $imm64, %rax", 10
 * bytes, a single-instruction site that the kernel call-optimizes. noipa:
 * one copy of the function, so one label. Its offset in the function is
 * kpx_going_site_off, a constant (an address inside the function would be
 * an indirect branch target without ENDBR to objtool).
 */
noinline __attribute__((__noipa__)) unsigned long kpx_going_site(unsigned long seq)
{
	unsigned long v;

	asm volatile("kpx_going_movabs:\n\t"
		     "movabs $" __stringify(KPX_GOING_MAGIC) ", %%rax\n\t"
		     ".pushsection .rodata\n\t"
		     ".balign 8\n\t"
		     ".globl kpx_going_site_off\n"
		     "kpx_going_site_off:\n\t"
		     ".quad kpx_going_movabs - kpx_going_site\n\t"
		     ".popsection\n\t"
		     : "=a" (v) : "D" (seq) : "memory");
	return v;
}

static unsigned int calls;
module_param(calls, uint, 0444);
MODULE_PARM_DESC(calls, "calls made through kick");

static unsigned int wrong;
module_param(wrong, uint, 0444);
MODULE_PARM_DESC(wrong, "calls that returned something else than the movabs immediate");

static int kpx_going_kick(const char *val, const struct kernel_param *kp)
{
	unsigned int n, i;
	int ret;

	ret = kstrtouint(val, 0, &n);
	if (ret)
		return ret;
	if (n > 1000000)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (kpx_going_site(i) != KPX_GOING_MAGIC)
			WRITE_ONCE(wrong, wrong + 1);
		WRITE_ONCE(calls, calls + 1);
	}
	return 0;
}

static const struct kernel_param_ops kpx_going_kick_ops = {
	.set = kpx_going_kick,
};
module_param_cb(kick, &kpx_going_kick_ops, NULL, 0200);
MODULE_PARM_DESC(kick, "call the probed function this many times");

static int __init kpx_going_init(void)
{
	return kpx_going_attach(kpx_going_site,
				(void *)kpx_going_site + kpx_going_site_off,
				THIS_MODULE);
}

static void __exit kpx_going_exit(void)
{
}

module_init(kpx_going_init);
module_exit(kpx_going_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpx: a probe target whose code runs after its module went");
