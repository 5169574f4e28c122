// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rsb_model: a QEMU TCG plugin (x86_64 system emulation, plugin API 1) that
 * models a return stack buffer (RSB) and the call depth count of Linux's
 * call depth tracking (retbleed=stuff) over the instructions the guest
 * really executes, and counts the returns the model mispredicts, per
 * syscall window, to compare kprobe mechanisms per hit
 * (selftests/benchs/rsb-model, docs/benchmarks.md "Return stack model").
 * TCG has no branch predictor: every figure here is the model's.
 *
 * The model, per vCPU:
 * - A near call (e8, ff /2; any prefixes) pushes its return address (the
 *   address after the call) on each modelled RSB when its store to the
 *   stack completes (the memory callback of that store; a load of call *mem
 *   is told apart). A call whose store faults pushes nothing.
 * - A near return (c3, c2 imm16; any prefixes: rep ret, cs ret) pops each
 *   RSB when its load from the stack completes; the address executed next
 *   (the next translation block to run) is the actual target. A pop of an
 *   empty RSB, or a popped address other than the target, is a mispredict.
 * - Each RSB is a ring of N entries (several N side by side, 16 and 32 by
 *   default): a push on a full ring overwrites the oldest entry, as
 *   hardware does; a pop of an empty ring predicts nothing (AMD detects the
 *   underflow; Skylake-class Intel cores fall back to the BTB, which may
 *   still predict right: "empty" counts them apart).
 * - Nothing else touches the RSBs: not syscall/sysret, not interrupts,
 *   exceptions or iret (as on hardware), and no RSB filling (the kernel's
 *   fills on context switch and VM exit are calls, modelled when executed;
 *   the fills of call depth tracking are not executed by a kernel without
 *   it and are only counted, below).
 * - Call depth tracking: a 64-bit count as in arch/x86 (call thunks do
 *   "sarq $5", return thunks "shlq $5"), reset to 1 << 63 on every entry to
 *   the kernel from user mode (RESET_CALL_DEPTH in UNTRAIN_RET); a kernel
 *   return that leaves it 0 is an underflow, where the kernel would stuff
 *   the RSB and credit the count (-1). Every kernel call and return
 *   counts, as if every one went through the thunks.
 *
 * Attribution. A window runs from one execution of the syscall entry
 * (sysentry=, entry_SYSCALL_64) to the next on the same vCPU: one syscall
 * and the user code after it. A window that executed the window function
 * (win=, e.g. __x64_sys_getpgid) is a "hit" window when an instruction at a
 * probe site (site=) ran with int3, call or jmp as its first byte (the
 * probe's; the runner checks that no site starts so by itself), else a
 * "plain" window; all others are "other". The guest separates runs by
 * executing the marker (mark=, the first instruction of a syscall it
 * makes only for that): statistics go to epoch 0 before the first marker,
 * epoch k after the k-th.
 * "Above the probed function": for each func= (the probed functions), the
 * stack slot its return address was pushed to is taken when its first
 * instruction runs (the stack pointer as the last call or return left it:
 * the function must be entered by a call, or by a jump from a frame that
 * pushed nothing since). A kernel return that pops that slot or one above
 * it on the same kernel stack (the function's own return and its callers'),
 * and every user-mode return after the function's frame was left or the
 * kernel returned to user mode, is counted "above" that function.
 *
 * Arguments (QEMU: -plugin rsb_model.so,out=FILE,sysentry=0x...,...):
 *   out=FILE         JSON written at exit (required)
 *   sysentry=ADDR    syscall entry (required)
 *   win=ADDR         the window function's first instruction (required)
 *   mark=ADDR        marker instruction (optional)
 *   site=ADDR        a probe site (up to 8)
 *   func=ADDR        a probed function's first instruction (up to 4)
 *   rsb=N[:N...]     RSB sizes, 1..64 each, up to 4 (default 16:32)
 *   stack=BYTES      kernel stack size and alignment (default 16384)
 *   thunk=LO:HI      the retpoline thunks: their returns' mispredicts (by
 *                    design) are also counted apart
 *   dump=LO:HI       list the instructions of [LO, HI) as translated, with
 *                    their kind and executions (a check of the decoding)
 * Requires single-threaded TCG (-accel tcg,thread=single): the epoch and its
 * counters are shared by all vCPUs without locks.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "qemu_plugin_api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MAX_SIZES	4
#define MAX_RSB		64
#define MAX_SITES	8
#define MAX_FUNCS	4
#define MAX_EPOCHS	256
#define MAX_VCPUS	64

enum cls { CLS_HIT, CLS_PLAIN, CLS_OTHER, NR_CLS };
static const char *const cls_names[NR_CLS] = { "hit", "plain", "other" };

/* What one window, and the sum of windows of one class, counted. */
struct stats {
	uint64_t windows;	/* windows closed into this sum */
	uint64_t win_entries;	/* executions of win= */
	uint64_t site_hits;	/* executions of a probed site */
	uint64_t calls, rets;	/* all modes */
	uint64_t kcalls, krets;	/* kernel mode only */
	uint64_t misp[MAX_SIZES];	/* mispredicted returns */
	uint64_t empty[MAX_SIZES];	/* of them: popped an empty RSB */
	uint64_t thunk[MAX_SIZES];	/* of them: returns of thunk= */
	uint64_t above[MAX_FUNCS][MAX_SIZES];	/* of them: above func k */
	int64_t depth_net;	/* kernel calls - kernel returns */
	uint64_t cdt_underflows;	/* call depth count underflows */
};

struct epoch {
	uint64_t site_hits[MAX_SITES];	/* all executions, in windows or not */
	struct stats cls[NR_CLS];
};

/* A ring of @size entries; @count valid ones end below @top. */
struct rsb {
	uint64_t ent[MAX_RSB];
	unsigned int top, count, size;
};

struct vcpu {
	struct rsb rsb[MAX_SIZES];
	/* A return executed, its target not seen yet (the next block's). */
	bool pending;
	bool pred_ok[MAX_SIZES];
	uint64_t pred[MAX_SIZES];
	bool pend_above[MAX_FUNCS];
	bool pend_thunk;
	/*
	 * The call or return about to execute (its return address, its
	 * address), armed by its execution callback and disarmed by its own
	 * stack access or the next block: a memory callback that QEMU runs
	 * for another access (see vcpu_tb_trans()) finds it disarmed.
	 */
	uint64_t armed_call, armed_ret;
	/* The stack pointer as the last call (push) or return (pop) left it. */
	uint64_t sp;
	bool mode_known, kernel;
	uint64_t call_depth;
	/* The open window. */
	bool entered, hit;
	bool frame_valid[MAX_FUNCS], frame_left[MAX_FUNCS];
	uint64_t frame[MAX_FUNCS];
	struct stats w;
};

static unsigned int nsizes = 2;
static unsigned int sizes[MAX_SIZES] = { 16, 32 };
static uint64_t sysentry, win, mark;
static uint64_t sites[MAX_SITES], funcs[MAX_FUNCS];
static unsigned int nsites, nfuncs;
static uint64_t stack_size = 16384;
static uint64_t thunk_lo, thunk_hi;
static const char *out_path;
static int nr_vcpus;
static struct vcpu *vcpus;
/* Single-threaded TCG: one vCPU runs at a time, so plain globals suffice. */
static struct epoch epochs[MAX_EPOCHS];
static unsigned int cur_epoch;
static uint64_t marks, insn_calls, insn_rets;

#define MAX_DUMP	256
/* dump=: the instructions of [dump_lo, dump_hi) as last translated. */
struct dumped {
	uint64_t pc, execs;
	uint8_t bytes[16];
	unsigned int len, kind, translations;
};
static uint64_t dump_lo, dump_hi;
static struct dumped dumped[MAX_DUMP];
static unsigned int ndumped;

static bool is_kernel(uint64_t addr)
{
	return addr >> 63;
}

static void rsb_push(struct rsb *r, uint64_t addr)
{
	r->ent[r->top] = addr;
	r->top = (r->top + 1) % r->size;
	if (r->count < r->size)
		r->count++;
}

/* Returns false when the ring is empty (no prediction). */
static bool rsb_pop(struct rsb *r, uint64_t *addr)
{
	if (!r->count)
		return false;
	r->top = (r->top + r->size - 1) % r->size;
	r->count--;
	*addr = r->ent[r->top];
	return true;
}

static void stats_add(struct stats *sum, const struct stats *w)
{
	sum->windows++;
	sum->win_entries += w->win_entries;
	sum->site_hits += w->site_hits;
	sum->calls += w->calls;
	sum->rets += w->rets;
	sum->kcalls += w->kcalls;
	sum->krets += w->krets;
	for (unsigned int m = 0; m < nsizes; m++) {
		sum->misp[m] += w->misp[m];
		sum->empty[m] += w->empty[m];
		sum->thunk[m] += w->thunk[m];
		for (unsigned int f = 0; f < nfuncs; f++)
			sum->above[f][m] += w->above[f][m];
	}
	sum->depth_net += w->depth_net;
	sum->cdt_underflows += w->cdt_underflows;
}

/* Closes @v's window into the current epoch and opens the next one. */
static void window_next(struct vcpu *v)
{
	enum cls c = !v->entered ? CLS_OTHER : v->hit ? CLS_HIT : CLS_PLAIN;

	stats_add(&epochs[cur_epoch].cls[c], &v->w);
	memset(&v->w, 0, sizeof(v->w));
	v->entered = v->hit = false;
	memset(v->frame_valid, 0, sizeof(v->frame_valid));
	memset(v->frame_left, 0, sizeof(v->frame_left));
}

/* The target of a pending return is the first block that runs after it. */
static void resolve_ret(struct vcpu *v, uint64_t target)
{
	for (unsigned int m = 0; m < nsizes; m++) {
		if (v->pred_ok[m] && v->pred[m] == target)
			continue;
		v->w.misp[m]++;
		if (!v->pred_ok[m])
			v->w.empty[m]++;
		if (v->pend_thunk)
			v->w.thunk[m]++;
		for (unsigned int f = 0; f < nfuncs; f++)
			if (v->pend_above[f])
				v->w.above[f][m]++;
	}
	v->pending = false;
}

static void vcpu_tb_exec(unsigned int idx, void *udata)
{
	struct vcpu *v = &vcpus[idx];
	uint64_t pc = (uintptr_t)udata;
	bool kernel = is_kernel(pc);

	v->armed_call = v->armed_ret = 0;
	if (v->pending)
		resolve_ret(v, pc);
	if (v->mode_known && kernel != v->kernel) {
		if (kernel) {
			/* Entry from user mode: RESET_CALL_DEPTH. */
			v->call_depth = 1ULL << 63;
		} else {
			/* Back in user mode: every probed frame was left. */
			for (unsigned int f = 0; f < nfuncs; f++)
				if (v->frame_valid[f])
					v->frame_left[f] = true;
		}
	}
	v->kernel = kernel;
	v->mode_known = true;
}

/* A call's push completed at @slot; @udata is its return address. */
static void vcpu_call(unsigned int idx, qemu_plugin_meminfo_t info, uint64_t slot, void *udata)
{
	struct vcpu *v = &vcpus[idx];
	uint64_t ret_addr = (uintptr_t)udata;

	if (!qemu_plugin_mem_is_store(info) || v->armed_call != ret_addr)
		return;	/* the load of call *mem, or not this call's access */
	v->armed_call = 0;
	for (unsigned int m = 0; m < nsizes; m++)
		rsb_push(&v->rsb[m], ret_addr);
	v->sp = slot;
	v->w.calls++;
	if (is_kernel(ret_addr)) {
		v->w.kcalls++;
		v->w.depth_net++;
		v->call_depth = (uint64_t)((int64_t)v->call_depth >> 5);
	}
}

static bool same_stack(uint64_t a, uint64_t b)
{
	return (a & ~(stack_size - 1)) == (b & ~(stack_size - 1));
}

/* A return's pop completed at @slot; @udata is the return's address. */
static void vcpu_ret(unsigned int idx, qemu_plugin_meminfo_t info, uint64_t slot, void *udata)
{
	struct vcpu *v = &vcpus[idx];
	bool kernel = is_kernel((uintptr_t)udata);

	if (qemu_plugin_mem_is_store(info) || v->armed_ret != (uintptr_t)udata)
		return;
	v->armed_ret = 0;
	for (unsigned int m = 0; m < nsizes; m++)
		v->pred_ok[m] = rsb_pop(&v->rsb[m], &v->pred[m]);
	for (unsigned int f = 0; f < nfuncs; f++) {
		bool above;

		if (kernel) {
			above = v->frame_valid[f] && slot >= v->frame[f] &&
				same_stack(slot, v->frame[f]);
			if (above)
				v->frame_left[f] = true;
		} else {
			above = v->frame_valid[f] && v->frame_left[f];
		}
		v->pend_above[f] = above;
	}
	v->pend_thunk = (uintptr_t)udata >= thunk_lo && (uintptr_t)udata < thunk_hi;
	v->pending = true;
	v->sp = slot + 8;
	v->w.rets++;
	if (kernel) {
		v->w.krets++;
		v->w.depth_net--;
		v->call_depth <<= 5;
		if (!v->call_depth) {
			/* The return thunk would stuff 16 entries and credit. */
			v->w.cdt_underflows++;
			v->call_depth = ~0ULL;
		}
	}
}

static void vcpu_arm_call(unsigned int idx, void *udata)
{
	vcpus[idx].armed_call = (uintptr_t)udata;
}

static void vcpu_arm_ret(unsigned int idx, void *udata)
{
	vcpus[idx].armed_ret = (uintptr_t)udata;
}

static void vcpu_sysentry(unsigned int idx, void *udata)
{
	window_next(&vcpus[idx]);
}

static void vcpu_mark(unsigned int idx, void *udata)
{
	window_next(&vcpus[idx]);
	marks++;
	if (cur_epoch < MAX_EPOCHS - 1)
		cur_epoch++;
}

static void vcpu_win(unsigned int idx, void *udata)
{
	vcpus[idx].entered = true;
	vcpus[idx].w.win_entries++;
}

static void vcpu_site(unsigned int idx, void *udata)
{
	vcpus[idx].hit = true;
	vcpus[idx].w.site_hits++;
	epochs[cur_epoch].site_hits[(uintptr_t)udata]++;
}

static void vcpu_func(unsigned int idx, void *udata)
{
	struct vcpu *v = &vcpus[idx];
	unsigned int f = (uintptr_t)udata;

	v->frame[f] = v->sp;
	v->frame_valid[f] = true;
	v->frame_left[f] = false;
}

enum kind { K_OTHER, K_CALL, K_RET };

static void vcpu_dumped(unsigned int idx, void *udata)
{
	dumped[(uintptr_t)udata].execs++;
}

static void dump_insn(struct qemu_plugin_insn *insn, uint64_t pc, const uint8_t *p, size_t len,
		      enum kind kind)
{
	unsigned int i;

	for (i = 0; i < ndumped && dumped[i].pc != pc; i++)
		;
	if (i == MAX_DUMP)
		return;
	if (i == ndumped)
		ndumped++;
	dumped[i].pc = pc;
	dumped[i].len = len < 16 ? len : 16;
	memcpy(dumped[i].bytes, p, dumped[i].len);
	dumped[i].kind = kind;
	dumped[i].translations++;
	qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_dumped, QEMU_PLUGIN_CB_NO_REGS,
					       (void *)(uintptr_t)i);
}

/* Decodes a 64-bit mode near call or near return; anything else is K_OTHER. */
static enum kind insn_kind(const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len && (p[i] == 0x66 || p[i] == 0x67 || p[i] == 0xf0 || p[i] == 0xf2 ||
			   p[i] == 0xf3 || p[i] == 0x2e || p[i] == 0x36 || p[i] == 0x3e ||
			   p[i] == 0x26 || p[i] == 0x64 || p[i] == 0x65))
		i++;
	if (i < len && (p[i] & 0xf0) == 0x40)	/* REX */
		i++;
	if (i >= len)
		return K_OTHER;
	switch (p[i]) {
	case 0xe8:
		return K_CALL;
	case 0xff:
		return i + 1 < len && ((p[i + 1] >> 3) & 7) == 2 ? K_CALL : K_OTHER;
	case 0xc3:
	case 0xc2:
		return K_RET;
	}
	return K_OTHER;
}

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);

	qemu_plugin_register_vcpu_tb_exec_cb(tb, vcpu_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
					     (void *)(uintptr_t)qemu_plugin_tb_vaddr(tb));
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		const uint8_t *p = qemu_plugin_insn_data(insn);
		size_t len = qemu_plugin_insn_size(insn);
		uint64_t pc = qemu_plugin_insn_vaddr(insn);
		enum kind kind = insn_kind(p, len);

		if (pc >= dump_lo && pc < dump_hi)
			dump_insn(insn, pc, p, len, kind);
		switch (kind) {
		/*
		 * QEMU_PLUGIN_MEM_RW and a test of the access in the callback:
		 * QEMU up to 8.0 matched a load only to callbacks registered
		 * with the W bit (plugin-gen.c's op_rw() added 1 to the
		 * already 1-based enum), so a MEM_R callback never ran. And
		 * QEMU 7.2 leaves the last instruction's memory callbacks
		 * installed after it, so the accesses of helpers (exception
		 * delivery pushing its frame, iret popping it) run them too:
		 * the execution callback arms them for the instruction's own
		 * access only.
		 */
		case K_CALL:
			qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_arm_call,
							       QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(uintptr_t)(pc + len));
			qemu_plugin_register_vcpu_mem_cb(insn, vcpu_call, QEMU_PLUGIN_CB_NO_REGS,
							 QEMU_PLUGIN_MEM_RW,
							 (void *)(uintptr_t)(pc + len));
			insn_calls++;
			break;
		case K_RET:
			qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_arm_ret,
							       QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(uintptr_t)pc);
			qemu_plugin_register_vcpu_mem_cb(insn, vcpu_ret, QEMU_PLUGIN_CB_NO_REGS,
							 QEMU_PLUGIN_MEM_RW, (void *)(uintptr_t)pc);
			insn_rets++;
			break;
		default:
			break;
		}
		if (pc == sysentry)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_sysentry,
							       QEMU_PLUGIN_CB_NO_REGS, NULL);
		if (mark && pc == mark)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_mark,
							       QEMU_PLUGIN_CB_NO_REGS, NULL);
		if (pc == win)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_win,
							       QEMU_PLUGIN_CB_NO_REGS, NULL);
		for (unsigned int f = 0; f < nfuncs; f++)
			if (pc == funcs[f])
				qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_func,
								       QEMU_PLUGIN_CB_NO_REGS,
								       (void *)(uintptr_t)f);
		/* A probe replaces the site's first byte by int3, call or jmp. */
		for (unsigned int s = 0; s < nsites; s++)
			if (pc == sites[s] && len && (p[0] == 0xcc || p[0] == 0xe8 || p[0] == 0xe9))
				qemu_plugin_register_vcpu_insn_exec_cb(insn, vcpu_site,
								       QEMU_PLUGIN_CB_NO_REGS,
								       (void *)(uintptr_t)s);
	}
}

static void json_u64s(FILE *f, const char *name, const uint64_t *v, unsigned int n)
{
	fprintf(f, "\"%s\": [", name);
	for (unsigned int i = 0; i < n; i++)
		fprintf(f, "%s%" PRIu64, i ? ", " : "", v[i]);
	fprintf(f, "]");
}

static void json_stats(FILE *f, const struct stats *s)
{
	fprintf(f, "{\"windows\": %" PRIu64 ", \"win_entries\": %" PRIu64
		", \"site_hits\": %" PRIu64 ", \"calls\": %" PRIu64 ", \"rets\": %" PRIu64
		", \"kcalls\": %" PRIu64 ", \"krets\": %" PRIu64 ", ",
		s->windows, s->win_entries, s->site_hits, s->calls, s->rets, s->kcalls, s->krets);
	json_u64s(f, "mispredicts", s->misp, nsizes);
	fprintf(f, ", ");
	json_u64s(f, "empty", s->empty, nsizes);
	fprintf(f, ", ");
	json_u64s(f, "thunk", s->thunk, nsizes);
	fprintf(f, ", \"above\": [");
	for (unsigned int k = 0; k < nfuncs; k++) {
		fprintf(f, "%s[", k ? ", " : "");
		for (unsigned int m = 0; m < nsizes; m++)
			fprintf(f, "%s%" PRIu64, m ? ", " : "", s->above[k][m]);
		fprintf(f, "]");
	}
	fprintf(f, "], \"depth_net\": %" PRId64 ", \"cdt_underflows\": %" PRIu64 "}",
		s->depth_net, s->cdt_underflows);
}

static void write_json(void)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", out_path);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "rsb_model: cannot write %s: %s\n", tmp, strerror(errno));
		return;
	}
	fprintf(f, "{\"plugin\": \"rsb_model\", \"api_version\": %d, \"vcpus\": %d, ",
		QEMU_PLUGIN_VERSION, nr_vcpus);
	fprintf(f, "\"rsb_sizes\": [");
	for (unsigned int m = 0; m < nsizes; m++)
		fprintf(f, "%s%u", m ? ", " : "", sizes[m]);
	fprintf(f, "], \"sysentry\": \"0x%" PRIx64 "\", \"win\": \"0x%" PRIx64
		"\", \"mark\": \"0x%" PRIx64 "\", \"sites\": [", sysentry, win, mark);
	for (unsigned int s = 0; s < nsites; s++)
		fprintf(f, "%s\"0x%" PRIx64 "\"", s ? ", " : "", sites[s]);
	fprintf(f, "], \"funcs\": [");
	for (unsigned int k = 0; k < nfuncs; k++)
		fprintf(f, "%s\"0x%" PRIx64 "\"", k ? ", " : "", funcs[k]);
	fprintf(f, "], \"marks\": %" PRIu64 ", \"translated_calls\": %" PRIu64
		", \"translated_rets\": %" PRIu64 ", \"epochs\": [\n",
		marks, insn_calls, insn_rets);
	for (unsigned int e = 0; e <= cur_epoch; e++) {
		fprintf(f, "{\"epoch\": %u, ", e);
		json_u64s(f, "site_hits", epochs[e].site_hits, nsites);
		for (unsigned int c = 0; c < NR_CLS; c++) {
			fprintf(f, ", \"%s\": ", cls_names[c]);
			json_stats(f, &epochs[e].cls[c]);
		}
		fprintf(f, "}%s\n", e < cur_epoch ? "," : "");
	}
	fprintf(f, "], \"dump\": [");
	for (unsigned int i = 0; i < ndumped; i++) {
		fprintf(f, "%s\n{\"pc\": \"0x%" PRIx64 "\", \"kind\": %u, \"translations\": %u, "
			"\"execs\": %" PRIu64 ", \"bytes\": \"", i ? "," : "", dumped[i].pc,
			dumped[i].kind, dumped[i].translations, dumped[i].execs);
		for (unsigned int b = 0; b < dumped[i].len; b++)
			fprintf(f, "%02x", dumped[i].bytes[b]);
		fprintf(f, "\"}");
	}
	fprintf(f, "]}\n");
	if (fclose(f) || rename(tmp, out_path))
		fprintf(stderr, "rsb_model: cannot write %s: %s\n", out_path, strerror(errno));
}

static void plugin_exit(qemu_plugin_id_t id, void *udata)
{
	/* Close the windows still open, into the last epoch. */
	for (int i = 0; i < nr_vcpus; i++) {
		if (vcpus[i].pending)
			vcpus[i].pending = false;	/* no target: not counted */
		window_next(&vcpus[i]);
	}
	write_json();
}

static int parse_addr(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, 0);
	return errno || end == s || *end ? -1 : 0;
}

/* LO:HI, LO < HI */
static int parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
	char *end;

	errno = 0;
	*lo = strtoull(s, &end, 0);
	if (errno || end == s || *end != ':')
		return -1;
	return parse_addr(end + 1, hi) || *hi <= *lo ? -1 : 0;
}

static int parse_arg(const char *arg)
{
	const char *val = strchr(arg, '=');
	size_t klen;
	uint64_t a;

	if (!val)
		return -1;
	klen = val++ - arg;
#define KEY(k) (klen == strlen(k) && !strncmp(arg, k, klen))
	if (KEY("out")) {
		out_path = val;
		return *val ? 0 : -1;
	}
	if (KEY("sysentry"))
		return parse_addr(val, &sysentry);
	if (KEY("win"))
		return parse_addr(val, &win);
	if (KEY("mark"))
		return parse_addr(val, &mark);
	if (KEY("site")) {
		if (nsites == MAX_SITES || parse_addr(val, &a))
			return -1;
		sites[nsites++] = a;
		return 0;
	}
	if (KEY("func")) {
		if (nfuncs == MAX_FUNCS || parse_addr(val, &a))
			return -1;
		funcs[nfuncs++] = a;
		return 0;
	}
	if (KEY("stack"))
		return parse_addr(val, &stack_size) || !stack_size ||
		       (stack_size & (stack_size - 1)) ? -1 : 0;
	if (KEY("dump"))
		return parse_range(val, &dump_lo, &dump_hi);
	if (KEY("thunk"))
		return parse_range(val, &thunk_lo, &thunk_hi);
	if (KEY("rsb")) {
		char buf[64], *tok, *save;

		snprintf(buf, sizeof(buf), "%s", val);
		nsizes = 0;
		for (tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
			if (nsizes == MAX_SIZES || parse_addr(tok, &a) || a < 1 || a > MAX_RSB)
				return -1;
			sizes[nsizes++] = a;
		}
		return nsizes ? 0 : -1;
	}
#undef KEY
	return -1;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	if (info->version.min > QEMU_PLUGIN_VERSION || info->version.cur < QEMU_PLUGIN_VERSION) {
		fprintf(stderr, "rsb_model: built for plugin API %d, QEMU offers %d..%d\n",
			QEMU_PLUGIN_VERSION, info->version.min, info->version.cur);
		return -1;
	}
	if (!info->system_emulation || strcmp(info->target_name, "x86_64")) {
		fprintf(stderr, "rsb_model: needs qemu-system-x86_64 (target %s)\n",
			info->target_name);
		return -1;
	}
	for (int i = 0; i < argc; i++) {
		if (parse_arg(argv[i])) {
			fprintf(stderr, "rsb_model: bad argument '%s' (see rsb_model.c)\n",
				argv[i]);
			return -1;
		}
	}
	if (!out_path || !sysentry || !win) {
		fprintf(stderr, "rsb_model: out=, sysentry= and win= are required\n");
		return -1;
	}
	nr_vcpus = info->system.max_vcpus;
	if (nr_vcpus < 1 || nr_vcpus > MAX_VCPUS) {
		fprintf(stderr, "rsb_model: %d vCPUs (1..%d)\n", nr_vcpus, MAX_VCPUS);
		return -1;
	}
	vcpus = calloc(nr_vcpus, sizeof(*vcpus));
	if (!vcpus)
		return -1;
	for (int i = 0; i < nr_vcpus; i++)
		for (unsigned int m = 0; m < nsizes; m++)
			vcpus[i].rsb[m].size = sizes[m];
	qemu_plugin_register_vcpu_tb_trans_cb(id, vcpu_tb_trans);
	qemu_plugin_register_atexit_cb(id, plugin_exit, NULL);
	return 0;
}
