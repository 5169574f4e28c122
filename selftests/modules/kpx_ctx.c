// SPDX-License-Identifier: GPL-2.0
/*
 * kpx_ctx: what a callopt probe does to the context of the code it probes.
 *
 * Loaded with exp=NAME, it runs one experiment in its init function and
 * keeps the result in /sys/kernel/debug/kpx_ctx/result ("key=value" lines,
 * "done=1" last), then waits to be unloaded. Each experiment registers a
 * kprobe on a site of one of the targets below (a site whose instruction
 * layout the asm fixes), with a pre_handler of its own, and reports the
 * mechanism the kernel chose (enum kprobe_mechanism: 2 callopt, 3 jmpopt,
 * 0 int3, 4 pending), right when register_kprobe() returned
 * (mech_registered=) and 200 ms later (mech=).
 *
 *   exp=df       site after STD: the handler must run with DF clear, see
 *                DF set in regs->flags, and the code after the site must
 *                still have DF (handler_df=0, regs_df=hits, after_df=hits)
 *   exp=ac       site between STAC and CLAC, and every PERIOD-th hit the
 *                handler wakes a competitor thread on the same CPU and
 *                asks for a reschedule, so that the task schedules on its
 *                way out of the probe (callopt_exit): the competitor must
 *                never run with AC set (ac_leaked=0) and the target must
 *                have AC back after the site (ac_lost=0)
 *   exp=preempt  the same forced reschedule at a plain site: switches= is
 *                how often the competitor ran while the target's loop,
 *                which has no scheduling point of its own, was running;
 *                it must be 0 on preempt=none and preempt=voluntary
 *   exp=flags    the flags on both sides of the displaced instruction
 *                (flags_bad=0, hits=iters): site=exit is "cmpl $imm32,
 *                %eax", whose ZF the code after the site reads (callopt_exit
 *                returns to it); site=entry is "adcl $imm32, %eax", which
 *                adds the carry of a cmp before the site (callopt_entry
 *                returns to the buffer that runs it). Call depth
 *                tracking's return thunk changes the flags, so both
 *                trampolines must return around it
 *   exp=unwind   the competitor takes a reliable stack trace (as
 *                arch_stack_walk_reliable() does) of the target stopped
 *                in the probe's exit: at_exit= samples show callopt_exit,
 *                wrong= of those unwound "reliably" to a chain other than
 *                target, kpx_tgt_fn, kthread. site=plain (a movabs) or site=push
 *                (pushq $decoy, which moves the stack pointer: the ORC data
 *                after it differ from before it)
 *
 * The target and the competitor are kthreads bound to one CPU, so the
 * competitor runs only when the target is not running. The competitor is
 * SCHED_FIFO, so that every reschedule the handler asks for switches to it
 * where the exit is a preemption point (and nowhere else: the target's
 * loop has no scheduling point of its own).
 */
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/kallsyms.h>
#include <linux/kprobes.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/unaligned.h>
#include <asm/irqflags.h>
#include <asm/preempt.h>
#include <asm/unwind.h>

static char *exp = "df";
module_param(exp, charp, 0444);
MODULE_PARM_DESC(exp, "experiment: df, ac, preempt, unwind, flags");
static char *site = "plain";
module_param(site, charp, 0444);
MODULE_PARM_DESC(site, "site of exp=unwind: plain or push; of exp=flags: exit or entry");
static unsigned int iters = 20000;
module_param(iters, uint, 0444);
static unsigned int period = 16;
module_param(period, uint, 0444);

#define KPX_IMM 0x6b70785f63747800UL

/* Targets. Each site is a 10-byte "movabs $KPX_IMM + n, %rax". */
static noinline unsigned long kpx_ctx_plain(void)
{
	asm volatile("movabs $0x6b70785f63747801, %%rax" : : : "rax", "memory");
	return 0;
}

static noinline unsigned long kpx_ctx_std(void)
{
	unsigned long fl;

	asm volatile("std\n\t"
		     "movabs $0x6b70785f63747802, %%rax\n\t"
		     "pushfq\n\t"
		     "popq %0\n\t"
		     "cld"
		     : "=r" (fl) : : "rax", "memory");
	return fl;
}

static noinline unsigned long kpx_ctx_stac(void)
{
	unsigned long fl;

	asm volatile(ASM_STAC "\n\t"
		     "movabs $0x6b70785f63747803, %%rax\n\t"
		     "pushfq\n\t"
		     "popq %0\n\t"
		     ASM_CLAC
		     : "=r" (fl) : : "rax", "memory");
	return fl;
}

/* The imm32 of the flags sites, which marks them. */
#define KPX_FLAGS_IMM 0x6b70785fU

/* exp=flags site=exit: the site is "cmpl $KPX_FLAGS_IMM, %eax" (3d imm32). */
static noinline unsigned long kpx_ctx_flags_exit(unsigned long v)
{
	unsigned char z;

	asm volatile("cmpl %[imm], %k[v]\n\t"
		     "setz %[z]"
		     : [z] "=q" (z) : [v] "a" (v), [imm] "i" (KPX_FLAGS_IMM) : "cc", "memory");
	return z;
}

/*
 * exp=flags site=entry: the site is "adcl $KPX_FLAGS_IMM + 1, %eax"
 * (15 imm32). Returns the carry the cmp before it set: 1 when a < b.
 */
static noinline unsigned long kpx_ctx_flags_entry(unsigned long a, unsigned long b)
{
	unsigned long r = 0;

	asm volatile("cmpq %[b], %[a]\n\t"
		     "adcl %[imm], %k[r]"
		     : [r] "+a" (r) : [a] "r" (a), [b] "r" (b), [imm] "i" (KPX_FLAGS_IMM + 1)
		     : "cc", "memory");
	return r - (KPX_FLAGS_IMM + 1);
}

/* One call of the flags target: 1 when it computed the wrong result. */
static unsigned long kpx_flags_check(unsigned int i)
{
	unsigned long want = !(i & 1);

	if (!strcmp(site, "entry"))
		return kpx_ctx_flags_entry(i & 1, 1) != want;
	return kpx_ctx_flags_exit(KPX_FLAGS_IMM + (i & 1)) != want;
}

/* Offset of the flags site (@op, then KPX_FLAGS_IMM + @add) in @fn. */
static int kpx_flags_offset(const void *fn, u8 op, u32 add)
{
	const u8 *p = fn;
	int i;

	for (i = 0; i < 128; i++)
		if (p[i] == op && get_unaligned((u32 *)(p + i + 1)) == KPX_FLAGS_IMM + add)
			return i;
	return -1;
}

/* Never called: only its address is pushed. */
static noinline void kpx_ctx_decoy(void)
{
	asm volatile("");
}

/*
 * The site is "pushq $kpx_ctx_decoy" (5 bytes, sign-extended imm32: module
 * text is in the top 2GB), which the "movabs" after it marks.
 */
static noinline unsigned long kpx_ctx_push(void)
{
	asm volatile("pushq %0\n\t"
		     "popq %%rax\n\t"
		     "movabs $0x6b70785f63747804, %%rax"
		     : : "i" (kpx_ctx_decoy) : "rax", "memory");
	return 0;
}

struct kpx_ctx {
	struct kprobe kp;
	unsigned long (*target)(void);
	struct task_struct *tgt, *comp;
	unsigned int cpu;
	bool in_loop, stop, want_unwind, want_flags;
	unsigned long hits, handler_df, regs_df, regs_ac, after_df, after_ac;
	unsigned long switched, ac_lost, ac_leaked, comp_runs, comp_in_loop;
	unsigned long samples, at_exit, reliable, wrong, unreliable;
	unsigned long flags_bad;
	char first_wrong[256];
	int mech_registered, mech_before, mech_after;
	bool done;
};

static struct kpx_ctx ctx;
static struct dentry *kpx_dir;

static int kpx_pre(struct kprobe *kp, struct pt_regs *regs)
{
	if (current != ctx.tgt)
		return 0;
	ctx.hits++;
	if (native_save_fl() & X86_EFLAGS_DF)
		ctx.handler_df++;
	if (regs->flags & X86_EFLAGS_DF)
		ctx.regs_df++;
	if (regs->flags & X86_EFLAGS_AC)
		ctx.regs_ac++;
	/* Not from int3, which the kernel enters as an NMI. */
	if (period && !(ctx.hits % period) && ctx.comp && !in_nmi()) {
		/* Make the task schedule on its way out of the probe. */
		wake_up_process(ctx.comp);
		set_tsk_need_resched(current);
		set_preempt_need_resched();
	}
	return 0;
}

/* A reliable stack trace, as arch_stack_walk_reliable() takes it. */
static int kpx_walk(struct task_struct *t, unsigned long *buf, int max)
{
	struct unwind_state state;
	int n = 0;

	for (unwind_start(&state, t, NULL, NULL);
	     !unwind_done(&state) && !unwind_error(&state);
	     unwind_next_frame(&state)) {
		unsigned long addr = unwind_get_return_address(&state);

		if (!addr)
			return -EINVAL;
		if (n < max)
			buf[n++] = addr;
	}
	return unwind_error(&state) ? -EINVAL : n;
}

static bool kpx_is(unsigned long addr, const char *name)
{
	char sym[KSYM_SYMBOL_LEN];

	/* "name" or, in a module, "name [module]" */
	snprintf(sym, sizeof(sym), "%ps", (void *)addr);
	return !strncmp(sym, name, strlen(name)) &&
	       (!sym[strlen(name)] || sym[strlen(name)] == ' ');
}

static void kpx_sample(void)
{
	unsigned long buf[32];
	int n, i, exit_at = -1;
	const char *want[] = { NULL, "kpx_tgt_fn", "kthread" };

	n = kpx_walk(ctx.tgt, buf, ARRAY_SIZE(buf));
	ctx.samples++;
	if (n < 0) {
		ctx.unreliable++;
		return;
	}
	for (i = 0; i < n; i++) {
		if (kpx_is(buf[i], "callopt_exit")) {
			exit_at = i;
			break;
		}
	}
	if (exit_at < 0)
		return;
	ctx.at_exit++;
	want[0] = !strcmp(site, "push") ? "kpx_ctx_push" : "kpx_ctx_plain";
	for (i = 0; i < ARRAY_SIZE(want); i++) {
		if (exit_at + 1 + i >= n || !kpx_is(buf[exit_at + 1 + i], want[i]))
			break;
	}
	if (i == ARRAY_SIZE(want)) {
		ctx.reliable++;
		return;
	}
	if (!ctx.wrong++) {
		int len = 0;

		for (i = exit_at; i < n && len < sizeof(ctx.first_wrong) - 1; i++)
			len += scnprintf(ctx.first_wrong + len, sizeof(ctx.first_wrong) - len,
					 "%ps,", (void *)buf[i]);
	}
}

static int kpx_comp_fn(void *unused)
{
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop()) {
			__set_current_state(TASK_RUNNING);
			break;
		}
		schedule();
		/* Switched in: the target, on this CPU, is not running. */
		ctx.comp_runs++;
		if (native_save_fl() & X86_EFLAGS_AC)
			ctx.ac_leaked++;
		if (READ_ONCE(ctx.in_loop)) {
			ctx.comp_in_loop++;
			if (ctx.want_unwind)
				kpx_sample();
		}
	}
	return 0;
}

static int kpx_tgt_fn(void *unused)
{
	unsigned int i;

	WRITE_ONCE(ctx.in_loop, true);
	/* No scheduling point of its own in this loop. */
	for (i = 0; i < iters; i++) {
		unsigned long sw = current->nvcsw + current->nivcsw;
		unsigned long fl;

		if (ctx.want_flags) {
			ctx.flags_bad += kpx_flags_check(i);
			continue;
		}
		fl = ctx.target();

		if (current->nvcsw + current->nivcsw != sw) {
			ctx.switched++;
			if (ctx.target == kpx_ctx_stac && !(fl & X86_EFLAGS_AC))
				ctx.ac_lost++;
		}
		if (fl & X86_EFLAGS_DF)
			ctx.after_df++;
		if (fl & X86_EFLAGS_AC)
			ctx.after_ac++;
	}
	WRITE_ONCE(ctx.in_loop, false);
	WRITE_ONCE(ctx.stop, true);
	while (!kthread_should_stop())
		schedule_timeout_interruptible(1);
	return 0;
}

/* Offset of the site in @fn: the movabs, or the pushq before it. */
static int kpx_site_offset(unsigned long (*fn)(void), bool push)
{
	const u8 *p = (const u8 *)fn;
	int i;

	for (i = 0; i < 128; i++) {
		if (p[i] == 0x48 && p[i + 1] == 0xb8 &&
		    (*(u64 *)(p + i + 2) & ~0xffUL) == KPX_IMM)
			return push ? i - 5 - 1 : i;	/* pushq imm32 (5), popq (1) */
	}
	return -1;
}

static int kpx_result_show(struct seq_file *m, void *v)
{
	seq_printf(m, "exp=%s\nsite=%s\nmech_registered=%d\nmech=%d\nmech_after=%d\nhits=%lu\n",
		   exp, site, ctx.mech_registered, ctx.mech_before, ctx.mech_after, ctx.hits);
	seq_printf(m, "handler_df=%lu\nregs_df=%lu\nafter_df=%lu\nregs_ac=%lu\nafter_ac=%lu\n",
		   ctx.handler_df, ctx.regs_df, ctx.after_df, ctx.regs_ac, ctx.after_ac);
	seq_printf(m, "switched=%lu\nac_lost=%lu\nac_leaked=%lu\ncomp_runs=%lu\nswitches=%lu\n",
		   ctx.switched, ctx.ac_lost, ctx.ac_leaked, ctx.comp_runs, ctx.comp_in_loop);
	seq_printf(m, "samples=%lu\nat_exit=%lu\nreliable=%lu\nwrong=%lu\nunreliable=%lu\n",
		   ctx.samples, ctx.at_exit, ctx.reliable, ctx.wrong, ctx.unreliable);
	seq_printf(m, "flags_bad=%lu\n", ctx.flags_bad);
	seq_printf(m, "first_wrong=%s\nsmap=%d\ndone=%d\n", ctx.first_wrong,
		   boot_cpu_has(X86_FEATURE_SMAP), ctx.done);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kpx_result);

static int __init kpx_ctx_init(void)
{
	bool push = false;
	int off, ret;

	if (!strcmp(exp, "df")) {
		ctx.target = kpx_ctx_std;
		period = 0;
	} else if (!strcmp(exp, "ac")) {
		ctx.target = kpx_ctx_stac;
	} else if (!strcmp(exp, "preempt")) {
		ctx.target = kpx_ctx_plain;
	} else if (!strcmp(exp, "unwind")) {
		ctx.want_unwind = true;
		push = !strcmp(site, "push");
		ctx.target = push ? kpx_ctx_push : kpx_ctx_plain;
	} else if (!strcmp(exp, "flags") && (!strcmp(site, "exit") || !strcmp(site, "entry"))) {
		ctx.want_flags = true;
		period = 0;
	} else {
		pr_err("kpx_ctx: unknown exp=%s (site=%s)\n", exp, site);
		return -EINVAL;
	}
	if (!ctx.want_flags) {
		off = kpx_site_offset(ctx.target, push);
		ctx.kp.addr = (kprobe_opcode_t *)ctx.target + off;
	} else if (!strcmp(site, "exit")) {
		off = kpx_flags_offset(kpx_ctx_flags_exit, 0x3d, 0);
		ctx.kp.addr = (kprobe_opcode_t *)kpx_ctx_flags_exit + off;
	} else {
		off = kpx_flags_offset(kpx_ctx_flags_entry, 0x15, 1);
		ctx.kp.addr = (kprobe_opcode_t *)kpx_ctx_flags_entry + off;
	}
	if (off < 0)
		return -ENOENT;

	ctx.kp.pre_handler = kpx_pre;
	ret = register_kprobe(&ctx.kp);
	if (ret)
		return ret;
	/* A single-instruction callopt probe is installed when it is armed. */
	ctx.mech_registered = kprobe_mechanism(&ctx.kp);
	/* A jump-optimized or multi-instruction probe takes a while. */
	msleep(200);
	ctx.mech_before = kprobe_mechanism(&ctx.kp);

	ctx.cpu = cpumask_last(cpu_online_mask);
	ctx.comp = kthread_create(kpx_comp_fn, NULL, "kpx_ctx_comp");
	if (IS_ERR(ctx.comp)) {
		ret = PTR_ERR(ctx.comp);
		goto out;
	}
	ctx.tgt = kthread_create(kpx_tgt_fn, NULL, "kpx_ctx_tgt");
	if (IS_ERR(ctx.tgt)) {
		ret = PTR_ERR(ctx.tgt);
		kthread_stop(ctx.comp);
		goto out;
	}
	kthread_bind(ctx.comp, ctx.cpu);
	kthread_bind(ctx.tgt, ctx.cpu);
	/*
	 * The competitor is SCHED_FIFO: when the handler has asked for a
	 * reschedule, a preemption point on the way out of the probe always
	 * switches to it. As a fair task it could lose the scheduler's pick
	 * to the target (EEVDF keeps running a task that is still eligible
	 * with the earlier deadline): in one make check run the target was
	 * picked again on every hit, and the test saw 1 switch in 20000.
	 */
	sched_set_fifo_low(ctx.comp);
	wake_up_process(ctx.comp);
	msleep(20);
	wake_up_process(ctx.tgt);
	while (!READ_ONCE(ctx.stop))
		msleep(20);
	ctx.mech_after = kprobe_mechanism(&ctx.kp);
	kthread_stop(ctx.tgt);
	kthread_stop(ctx.comp);
	ret = 0;
out:
	unregister_kprobe(&ctx.kp);
	if (ret)
		return ret;
	ctx.done = true;
	kpx_dir = debugfs_create_dir("kpx_ctx", NULL);
	debugfs_create_file("result", 0444, kpx_dir, NULL, &kpx_result_fops);
	return 0;
}

static void __exit kpx_ctx_exit(void)
{
	debugfs_remove_recursive(kpx_dir);
}

module_init(kpx_ctx_init);
module_exit(kpx_ctx_exit);
MODULE_DESCRIPTION("kpx: what a callopt probe changes in the context it probes");
MODULE_LICENSE("GPL");
