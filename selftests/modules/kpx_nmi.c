// SPDX-License-Identifier: GPL-2.0
/*
 * kpx_nmi: a probe target that only NMI handlers call.
 *
 * An NMI_UNKNOWN handler claims every NMI that no other handler claimed
 * (QEMU's monitor command "nmi" sends such NMIs to every vCPU), so the
 * kernel does not report them as unknown. While "armed" is set, it calls
 * kpx_nmi_target(), whose probe site is a 10-byte movabs: one instruction
 * of at least 5 bytes that does not branch, which the kernel call-optimizes
 * (callopt), as kpx_target_single in kpx_targets. Nothing else calls it.
 *
 * Parameters (/sys/module/kpx_nmi/parameters/):
 *   nmis    (read-only) NMIs this handler saw
 *   calls   (read-only) calls of kpx_nmi_target(); the number of this call
 *           is in %rdi at the probe site
 *   cpus    (read-only) mask of the CPUs that called it (CPUs 0-63), in hex
 *   armed   (0644) whether the handler calls kpx_nmi_target(). Writing it
 *           returns only after an RCU grace period: NMI handlers are RCU
 *           read-side critical sections, so no handler that saw the old
 *           value still runs then. After "echo 0 > armed" no call is in
 *           flight, and "calls" stays put until it is armed again.
 */
#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/rcupdate.h>
#include <linux/sysfs.h>
#include <asm/nmi.h>

/* Global, so that GCC keeps its name and signature; not exported. */
void kpx_nmi_target(unsigned long n);

static atomic_long_t kpx_nmis = ATOMIC_LONG_INIT(0);
static atomic_long_t kpx_calls = ATOMIC_LONG_INIT(0);
static atomic_long_t kpx_cpus = ATOMIC_LONG_INIT(0);
static bool kpx_armed;
static unsigned long kpx_nmi_sink;

noinline void kpx_nmi_target(unsigned long n)
{
	/* The probe site: "movabs $imm64, %rax", 10 bytes. */
	asm volatile("movabs $0x6b70785f5f6e6d69, %%rax\n\t"
		     : : "D" (n) : "rax", "memory");
	WRITE_ONCE(kpx_nmi_sink, n);
}

static int kpx_nmi_handler(unsigned int type, struct pt_regs *regs)
{
	atomic_long_inc(&kpx_nmis);
	if (READ_ONCE(kpx_armed)) {
		kpx_nmi_target(atomic_long_inc_return(&kpx_calls));
		atomic_long_or(BIT(smp_processor_id() % BITS_PER_LONG), &kpx_cpus);
	}
	return NMI_HANDLED;
}

static int kpx_get_count(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(kp->arg));
}

static int kpx_get_mask(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "0x%lx\n", atomic_long_read(kp->arg));
}

static int kpx_set_count(const char *val, const struct kernel_param *kp)
{
	return -EPERM;
}

static const struct kernel_param_ops kpx_count_ops = {
	.get = kpx_get_count,
	.set = kpx_set_count,
};

static const struct kernel_param_ops kpx_mask_ops = {
	.get = kpx_get_mask,
	.set = kpx_set_count,
};

static int kpx_set_armed(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	/* Wait for every NMI handler that may have read the old value. */
	if (!ret)
		synchronize_rcu();
	return ret;
}

static const struct kernel_param_ops kpx_armed_ops = {
	.get = param_get_bool,
	.set = kpx_set_armed,
};

module_param_cb(nmis, &kpx_count_ops, &kpx_nmis, 0444);
MODULE_PARM_DESC(nmis, "NMIs handled");
module_param_cb(calls, &kpx_count_ops, &kpx_calls, 0444);
MODULE_PARM_DESC(calls, "calls of kpx_nmi_target()");
module_param_cb(cpus, &kpx_mask_ops, &kpx_cpus, 0444);
MODULE_PARM_DESC(cpus, "mask of the CPUs that called kpx_nmi_target()");
module_param_cb(armed, &kpx_armed_ops, &kpx_armed, 0644);
MODULE_PARM_DESC(armed, "call kpx_nmi_target() from the NMI handler");

static int __init kpx_nmi_init(void)
{
	return register_nmi_handler(NMI_UNKNOWN, kpx_nmi_handler, 0, "kpx_nmi");
}

static void __exit kpx_nmi_exit(void)
{
	/* Waits for handlers in flight (synchronize_rcu()). */
	unregister_nmi_handler(NMI_UNKNOWN, "kpx_nmi");
}

module_init(kpx_nmi_init);
module_exit(kpx_nmi_exit);
MODULE_DESCRIPTION("A kprobe target called only from an NMI handler");
MODULE_LICENSE("GPL");
