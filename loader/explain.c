// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl explain FUNC: for each offset of FUNC, the mechanism a kprobe there
 * gets on the running kernel, and why not a faster one. The decisions
 * mirror register_kprobe() (kernel/kprobes.c), the x86 kprobes code
 * (arch/x86/kernel/kprobes/core.c, opt.c) and the trace_kprobe checks that
 * BPF kprobes go through; see docs/kpctl.md.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "common.h"
#include "kimage.h"
#include "x86_rules.h"
#include "kpctl.skel.h"

struct kstate {
	int callopt;		/* kprobes/callopt; -1: no such knob */
	int optimization;	/* debug.kprobes-optimization */
	bool retpoline_or_ibt;	/* no jump tables: indirect jumps are not checked */
};

#define MAX_REFUSALS 8

struct refusal {
	const char *rule;		/* gs, fs, rep, orc, boost, insn, ... */
	unsigned long off;		/* the instruction or site it is about */
	char why[200];
};

/* Why callopt refuses a site: every check that fails, in the kernel's order. */
struct refusals {
	int n;				/* how many failed; at most MAX_REFUSALS kept */
	struct refusal r[MAX_REFUSALS];
};

struct site {
	unsigned long off;
	unsigned long long addr;	/* where the kernel puts the probe */
	bool boundary;
	struct kp_insn ki;		/* the instruction at addr */
	const char *mech;		/* ftrace, callopt, jmpopt, int3, refused */
	int region;			/* callopt, jmpopt: the bytes displaced */
	struct refusals no_call;	/* every check that refuses callopt here */
	char reason[768];
	char observed[16];		/* --verify; "" when kpctl cannot tell (JSON null) */
	const char *observed_source;	/* "link_info", "debugfs", "none" */
	char observed_err[96];
	bool wrong_addr;		/* --verify: the probe landed elsewhere */
};

struct explain_opts {
	const char *vmlinux;
	bool offline;
	bool callopt;			/* --callopt: decide as with callopt */
	unsigned int mechs;		/* --mechanism: bit i for mech_names[i]; 0: all */
	bool all;
	bool verify;
	double wait_opt;
	double settle;
};

static struct kpctl_bpf *text_skel;

/* Reads kernel text with the kpctl_read_text program (BPF_PROG_RUN). */
static int read_live_text(unsigned long long addr, void *buf, size_t len)
{
	if (!text_skel)
		return -EINVAL;
	return kpx_read_text(bpf_program__fd(text_skel->progs.kpctl_read_text),
			     text_skel->bss->text_buf, KPCTL_TEXT_MAX, addr, buf, len);
}

static bool has_endbr(const struct kfunc *f)
{
	uint32_t v;

	memcpy(&v, f->text, sizeof(v));
	if (v == 0x001f0f66)		/* sealed ENDBR (gen_endbr_poison()) */
		return true;
	return (v & ~0x01000000U) == 0xfa1e0ff3;
}

static bool in_entry_text(const struct kfunc *f, unsigned long long a)
{
	return a >= f->entry_text_start && a < f->entry_text_end;
}

/* Decodes FUNC from its start: boundary[off] is set at each instruction start. */
static int decode_boundaries(const struct kfunc *f, bool *boundary, int *bad_off)
{
	size_t off = 0, avail = f->size + KFUNC_SLACK;
	struct kp_insn ki;

	while (off < f->size) {
		if (!kp_decode(f->text + off, avail - off, &ki)) {
			*bad_off = off;
			return -EILSEQ;
		}
		boundary[off] = true;
		off += ki.len;
	}
	return 0;
}

static void add(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void add(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n >= len - 1)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

/*
 * ftrace_text_reserved(), alternatives_text_reserved(),
 * jump_label_text_reserved() and static_call_text_reserved() over [start, end].
 */
static const char *reserved(const struct kfunc *f, unsigned long long start,
			    unsigned long long end)
{
	if (span_set_overlap(&f->ftrace, start, end))
		return "overlaps the ftrace site";
	if (f->smp_alt_reserved)
		for (size_t i = 0; i < f->smp_locks.n; i++)
			if (start <= f->smp_locks.a[i] && end > f->smp_locks.a[i])
				return "holds a lock prefix reserved for SMP alternatives";
	if (span_set_overlap(&f->jump_labels, start, end))
		return "overlaps a jump label site";
	if (span_set_overlap(&f->static_calls, start, end))
		return "overlaps a static call site";
	return NULL;
}

static unsigned long off_of(const struct kfunc *f, unsigned long long a)
{
	return a - f->addr;
}

static const char *why_not_jump_func(const struct kfunc *f, const struct kstate *ks,
				     unsigned long long a, char *buf, size_t len);

/*
 * callopt_frame_unchanged(): unwind_orc_same_frame(site, x) for every byte x
 * after the site up to and including site+len (the unwinder looks a return
 * address minus one up, which can be any byte of the region, and ORC
 * entries need not start at instruction boundaries). The entry in effect
 * at an address is the last one at or below it (orc_find()); kimage.c read
 * them from vmlinux's .orc_unwind_ip and .orc_unwind, one per byte of FUNC.
 * *at: the offset of the first byte whose frame differs.
 */
static const char *why_orc_changes(const struct kfunc *f, unsigned long long a,
				   unsigned long long end, unsigned long *at, char *buf, size_t len)
{
	const struct kp_orc *site;
	char at_site[72], at_end[72];

	*at = off_of(f, a);
	if (!f->orc)
		return "vmlinux has no ORC tables (.orc_unwind_ip, .orc_unwind) to compare "
		       "the frames of the displaced region with: callopt unknown, "
		       "predicted refused";
	site = &f->orc[off_of(f, a)];
	for (unsigned long long x = a + 1; x <= end; x++) {
		const struct kp_orc *e = &f->orc[off_of(f, x)];

		if (kp_orc_same(site, e))
			continue;
		*at = off_of(f, x);
		if (!site->found || !e->found) {
			snprintf(buf, len, "no ORC data at +0x%lx (unwind_orc_same_frame() "
				 "fails)", off_of(f, site->found ? x : a));
			return buf;
		}
		kp_orc_format(site, at_site, sizeof(at_site));
		kp_orc_format(e, at_end, sizeof(at_end));
		snprintf(buf, len, "the ORC frame changes in the displaced region (+0x%lx: "
			 "%s; at the site: %s)", off_of(f, x), at_end, at_site);
		return buf;
	}
	return NULL;
}

/*
 * Every check of callopt_prepare() that fails at a site, not only the
 * first: which rule refused it shows whether one rule alone decides (the
 * tests pick sites that only one rule refuses, scripts/sites/callopt-sites).
 * The first one is the reason the text output gives.
 */
static void no_call(struct refusals *rs, const char *rule, unsigned long off,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void no_call(struct refusals *rs, const char *rule, unsigned long off,
		    const char *fmt, ...)
{
	struct refusal *r;
	va_list ap;

	if (rs->n++ >= MAX_REFUSALS)
		return;		/* counted, not kept */
	r = &rs->r[rs->n - 1];
	r->rule = rule;
	r->off = off;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

/* The rule a callopt_insn_ok() refusal belongs to (x86_rules.c's texts). */
static const char *insn_rule(const char *why)
{
	if (!strncmp(why, "%gs", 3))
		return "gs";
	if (!strncmp(why, "%fs", 3))
		return "fs";
	if (!strncmp(why, "REP string", 10))
		return "rep";
	return "insn";
}

/*
 * callopt_prepare() for a region of several instructions: each must be
 * copyable, out of the exception table, in callopt's allowlist, and no ENDBR after the first
 * byte; the function must pass can_optimize(); the ORC data must not
 * change in the region; the region must not be reserved. Sets *region to
 * the region's length.
 */
static void why_not_callopt_multi(const struct kfunc *f, const struct kstate *ks,
				  const struct site *s, int *region, struct refusals *rs)
{
	static const unsigned char endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	size_t avail = f->size + KFUNC_SLACK;
	unsigned long long end, ends[KP_JMP32_SIZE];
	const char *r;
	char buf[256];
	unsigned long at;
	int n = 0, ninsns = 0;

	while (n < KP_JMP32_SIZE) {
		size_t off = off_of(f, s->addr) + n;
		struct kp_insn ki;
		const char *why = NULL, *rule = NULL;

		if (off >= avail || !kp_decode(f->text + off, avail - off, &ki)) {
			no_call(rs, "decode", off, "undecodable instruction at +0x%zx", off);
			return;
		}
		if (ki.copy_refusal) {
			why = ki.copy_refusal;
			rule = "copy";
		} else if (addr_set_has(&f->extable, s->addr + n)) {
			why = "in the exception table";
			rule = "extable";
		} else if (ki.callopt_refusal) {
			why = ki.callopt_refusal;
			rule = insn_rule(why);
		} else if (n && ki.len == 4 && !memcmp(f->text + off, endbr64, 4)) {
			why = "an ENDBR (indirect branch target) inside the region";
			rule = "endbr";
		}
		if (why)
			no_call(rs, rule, off, "the %s at +0x%zx in the call's 5-byte region: %s",
				ki.mnemonic, off, why);
		n += ki.len;
		ends[ninsns++] = s->addr + n;
	}
	end = s->addr + n - 1;
	if (f->size - off_of(f, s->addr) < (unsigned long)n) {
		no_call(rs, "end", s->off, "the region runs past the function's end");
	} else {
		r = why_not_jump_func(f, ks, s->addr, buf, sizeof(buf));
		if (r)
			no_call(rs, "function", s->off, "%s", r);
		r = why_orc_changes(f, s->addr, ends[ninsns - 1], &at, buf, sizeof(buf));
		if (r)
			no_call(rs, "orc", at, "%s", r);
	}
	r = reserved(f, s->addr, end);
	if (r)
		no_call(rs, "reserved", s->off, "the region +0x%lx..+0x%lx %s",
			off_of(f, s->addr), off_of(f, end), r);
	for (size_t i = 0; i < f->kprobes.n; i++) {
		if (f->kprobes.a[i] > s->addr && f->kprobes.a[i] <= end) {
			no_call(rs, "kprobe", s->off, "another kprobe at +0x%lx lies in the region",
				off_of(f, f->kprobes.a[i]));
			break;
		}
	}
	*region = n;
}

/* Why callopt_prepare() would fail (none: it takes the site); *region: the displaced bytes. */
static void why_not_callopt(const struct kfunc *f, const struct kstate *ks,
			    const struct site *s, int *region, struct refusals *rs)
{
	const struct kp_insn *ki = &s->ki;
	unsigned long long end = s->addr + ki->len;
	unsigned long at;
	const char *r;
	char buf[256];

	if (ks->callopt < 0) {
		no_call(rs, "absent", s->off, "this kernel has no callopt (no " KPROBES_CALLOPT
			"; the callopt series builds it only with the ORC unwinder)");
		return;
	}
	if (!ks->callopt) {
		no_call(rs, "off", s->off, "callopt is off (kprobes/callopt off)");
		return;
	}
	if (in_entry_text(f, s->addr)) {
		no_call(rs, "entry-text", s->off, "entry text");
		return;
	}
	if (ki->len < KP_JMP32_SIZE) {
		why_not_callopt_multi(f, ks, s, region, rs);
		return;
	}
	*region = ki->len;
	if (addr_set_has(&f->extable, s->addr))
		no_call(rs, "extable", s->off, "the instruction is in the exception table");
	if (ki->callopt_refusal)
		no_call(rs, insn_rule(ki->callopt_refusal), s->off,
			"%s is unsafe in the call buffer: %s", ki->mnemonic, ki->callopt_refusal);
	if (f->size - off_of(f, s->addr) < (unsigned long)ki->len) {
		no_call(rs, "end", s->off, "the instruction runs past the function's end");
	} else {
		r = why_orc_changes(f, s->addr, end, &at, buf, sizeof(buf));
		if (r)
			no_call(rs, "orc", at, "%s", r);
	}
	r = reserved(f, s->addr, s->addr + ki->len - 1);
	if (r)
		no_call(rs, "reserved", s->off, "the instruction %s", r);
}

/* can_optimize(): the whole-function checks of the jump optimization. */
static const char *why_not_jump_func(const struct kfunc *f, const struct kstate *ks,
				     unsigned long long a, char *buf, size_t len)
{
	size_t off = 0, avail = f->size + KFUNC_SLACK;
	struct kp_insn ki;

	if (in_entry_text(f, a))
		return "entry text";
	if (f->size - off_of(f, a) < KP_JMP32_SIZE)
		return "fewer than 5 bytes to the function's end";
	while (off < f->size) {
		unsigned long long ia = f->addr + off, target;

		if (addr_set_has(&f->extable, ia)) {
			snprintf(buf, len, "%s has an exception-table entry (at +0x%zx): "
				 "can_optimize() refuses such a function", f->name, off);
			return buf;
		}
		if (!kp_decode(f->text + off, avail - off, &ki)) {
			snprintf(buf, len, "undecodable instruction at +0x%zx", off);
			return buf;
		}
		if (!ks->retpoline_or_ibt && ki.indirect_jump) {
			snprintf(buf, len, "indirect jump at +0x%zx (jump tables possible)", off);
			return buf;
		}
		target = ia + ki.len + ki.rel_target;
		if (ki.rel_jump && target >= a + 1 && target <= a + 1 + 4) {
			snprintf(buf, len, "the %s at +0x%zx targets +0x%llx, inside the bytes "
				 "the jump would overwrite", ki.mnemonic, off, target - f->addr);
			return buf;
		}
		off += ki.len;
	}
	return NULL;
}

/* copy_optimized_instructions() and arch_check_optimized_kprobe(). */
static const char *why_not_jump_region(const struct kfunc *f, unsigned long long a,
				       int *region, char *buf, size_t len)
{
	size_t avail = f->size + KFUNC_SLACK;
	unsigned long long end;
	const char *r;
	int n = 0;

	while (n < KP_JMP32_SIZE) {
		size_t off = off_of(f, a) + n;
		struct kp_insn ki;

		if (off >= avail || !kp_decode(f->text + off, avail - off, &ki)) {
			snprintf(buf, len, "undecodable instruction at +0x%zx", off);
			return buf;
		}
		if (addr_set_has(&f->extable, a + n)) {
			snprintf(buf, len, "the instruction at +0x%zx is in the exception table", off);
			return buf;
		}
		if (ki.boost_refusal) {
			snprintf(buf, len, "the %s at +0x%zx (in the 5-byte region) is not "
				 "boostable: %s", ki.mnemonic, off, ki.boost_refusal);
			return buf;
		}
		n += ki.len;
	}
	end = a + n - 1;
	r = reserved(f, a, end);
	if (r) {
		snprintf(buf, len, "the region +0x%lx..+0x%lx %s", off_of(f, a),
			 off_of(f, end), r);
		return buf;
	}
	for (size_t i = 0; i < f->kprobes.n; i++) {
		if (f->kprobes.a[i] > a && f->kprobes.a[i] <= end) {
			snprintf(buf, len, "another kprobe at +0x%lx lies in the region",
				 off_of(f, f->kprobes.a[i]));
			return buf;
		}
	}
	*region = n;
	return NULL;
}

static bool refuse(struct site *s, const char *why)
{
	snprintf(s->reason, sizeof(s->reason), "%s", why);
	s->mech = "refused";
	return true;
}

/* ftrace_location(addr) == addr */
static bool ftrace_site(const struct kfunc *f, unsigned long long a)
{
	for (size_t i = 0; i < f->ftrace.n; i++)
		if (f->ftrace.s[i].start == a)
			return true;
	return false;
}

/* check_kprobe_address_safe() and the trace_kprobe checks. */
static bool address_refused(const struct kfunc *f, struct site *s)
{
	const struct span *bl = span_set_overlap(&f->blacklist, s->addr, s->addr);
	char buf[256];

	if (f->nsyms > 1) {
		snprintf(buf, sizeof(buf), "%d kernel symbols are named %s: the kernel "
			 "refuses ambiguous names (EADDRNOTAVAIL)", f->nsyms, f->name);
		return refuse(s, buf);
	}
	if (bl) {
		snprintf(buf, sizeof(buf), "blacklisted: inside the kprobes blacklist range "
			 "of %s", bl->name);
		return refuse(s, buf);
	}
	/*
	 * __within_notrace_func(): no ftrace site in [FUNC, FUNC+size-1]
	 * (f->ftrace also holds the sites in the decoding slack past the end).
	 */
	if (!span_set_overlap(&f->ftrace, f->addr, f->addr + f->size - 1) &&
	    !strchr(f->name, '.'))
		return refuse(s, "notrace function (no fentry site): BPF and perf kprobes "
			      "refuse those (CONFIG_KPROBE_EVENTS_ON_NOTRACE=n)");
	if (f->init_text)
		return refuse(s, "init text, freed after boot");
	if (span_set_overlap(&f->jump_labels, s->addr, s->addr))
		return refuse(s, "a jump label site (jump_label_text_reserved)");
	if (span_set_overlap(&f->static_calls, s->addr, s->addr))
		return refuse(s, "a static call site (static_call_text_reserved)");
	if (addr_set_has(&f->bugs, s->addr))
		return refuse(s, "a BUG/WARN site (find_bug)");
	if (!strncmp(f->name, "__cfi_", 6) || !strncmp(f->name, "__pfx_", 6))
		return refuse(s, "a CFI/call-padding preamble symbol");
	return false;
}

/* arch_prepare_kprobe(): can_probe(), __copy_instruction(), prepare_emulation(). */
static bool insn_refused(struct site *s)
{
	char buf[256];

	if (!s->ki.len)
		return refuse(s, "the kernel's decoder cannot decode the instruction");
	if (s->ki.exception) {
		snprintf(buf, sizeof(buf), "%s (INT/UD instructions are never probed)",
			 s->ki.mnemonic);
		return refuse(s, buf);
	}
	if (s->ki.copy_refusal) {
		snprintf(buf, sizeof(buf), "cannot copy the instruction: %s", s->ki.copy_refusal);
		return refuse(s, buf);
	}
	if (s->ki.emul_refusal) {
		snprintf(buf, sizeof(buf), "cannot emulate the instruction: %s",
			 s->ki.emul_refusal);
		return refuse(s, buf);
	}
	return false;
}

static void decide_optimized(const struct kfunc *f, const struct kstate *ks, struct site *s)
{
	char jbuf[256];
	const char *no_call, *no_jump;
	int region = 0;

	if (!ks->optimization) {
		s->mech = "int3";
		snprintf(s->reason, sizeof(s->reason),
			 "kprobes optimization is off (debug.kprobes-optimization=0)");
		return;
	}
	why_not_callopt(f, ks, s, &region, &s->no_call);
	no_call = s->no_call.n ? s->no_call.r[0].why : NULL;
	if (!no_call && region == s->ki.len) {
		s->mech = "callopt";
		s->region = region;
		snprintf(s->reason, sizeof(s->reason), "a single %d-byte %s: boostable, "
			 "safe in the call buffer, same ORC frame after it, not reserved",
			 s->ki.len, s->ki.mnemonic);
		return;
	}
	if (!no_call) {
		s->mech = "callopt";
		s->region = region;
		snprintf(s->reason, sizeof(s->reason), "region +0x%lx..+0x%lx of several "
			 "instructions, all boostable and safe in the call buffer, no jump "
			 "into it, the same ORC frame throughout (installed after an "
			 "RCU-tasks wait, int3 until then)", s->off, s->off + region - 1);
		return;
	}
	region = 0;
	no_jump = why_not_jump_func(f, ks, s->addr, jbuf, sizeof(jbuf));
	if (!no_jump)
		no_jump = why_not_jump_region(f, s->addr, &region, jbuf, sizeof(jbuf));
	if (!no_jump) {
		s->mech = "jmpopt";
		s->region = region;
		snprintf(s->reason, sizeof(s->reason), "not callopt: %s; jump-optimized region "
			 "+0x%lx..+0x%lx, all boostable, no jump into it", no_call,
			 s->off, s->off + region - 1);
		return;
	}
	s->mech = "int3";
	snprintf(s->reason, sizeof(s->reason), "not callopt: %s; not jump-optimized: %s",
		 no_call, no_jump);
}

static void decide_past_end(const struct kfunc *f, struct site *s)
{
	bool pfx = !strncmp(f->next, "__pfx_", 6) || !strncmp(f->next, "__cfi_", 6);

	s->mech = "refused";
	snprintf(s->reason, sizeof(s->reason), "past the end of %s (0x%llx bytes): the "
		 "address is %s+0x%llx; kpctl refuses it%s", f->name, f->size,
		 f->next[0] ? f->next : "?", (unsigned long long)(s->off - f->size),
		 pfx ? " (so does the kernel: a call-padding preamble with no fentry site)"
		     : " (the kernel would probe that symbol instead)");
}

static int insn_start(const bool *boundary, unsigned long off)
{
	while (off > 0 && !boundary[off])
		off--;
	return off;
}

static void decide(const struct kfunc *f, const struct kstate *ks, const bool *boundary,
		   struct site *s)
{
	size_t avail = f->size + KFUNC_SLACK;
	bool endbr = has_endbr(f);
	unsigned long off = s->off;

	s->addr = f->addr + off;
	if (off >= f->size) {
		decide_past_end(f, s);
		return;
	}
	/* arch_adjust_kprobe_addr(): FUNC+0 and FUNC+4 are the fentry site. */
	if (endbr && (off == 0 || off == 4))
		s->addr = f->addr + 4;
	s->boundary = boundary[off_of(f, s->addr)];
	if (s->boundary)
		kp_decode(f->text + off_of(f, s->addr), avail - off_of(f, s->addr), &s->ki);
	if (address_refused(f, s))
		return;
	if (ftrace_site(f, s->addr)) {
		s->mech = "ftrace";
		snprintf(s->reason, sizeof(s->reason), "the fentry site%s: probed through "
			 "ftrace, with full pt_regs (never int3 or optimized)",
			 s->addr == f->addr + off ? "" : " (the kernel moves FUNC+0 past ENDBR)");
		return;
	}
	if (!s->boundary) {
		int start = insn_start(boundary, off);
		struct kp_insn ki;

		kp_decode(f->text + start, avail - start, &ki);
		snprintf(s->reason, sizeof(s->reason), "not on an instruction boundary: "
			 "inside the %d-byte %s at +0x%x (EILSEQ)", ki.len,
			 ftrace_site(f, f->addr + start) ? "fentry call" : ki.mnemonic, start);
		s->mech = "refused";
		return;
	}
	if (insn_refused(s))
		return;
	decide_optimized(f, ks, s);
}

static void print_bytes(char *buf, size_t len, const unsigned char *p, int n)
{
	buf[0] = '\0';
	for (int i = 0; i < n && i < KP_MAX_INSN_SIZE; i++)
		add(buf, len, "%s%02x", i ? " " : "", p[i]);
}

static void site_bytes(const struct kfunc *f, const struct site *s, char *buf, size_t len)
{
	unsigned long off = off_of(f, s->addr);

	if (s->off >= f->size || !s->boundary) {
		buf[0] = '\0';
		return;
	}
	print_bytes(buf, len, f->text + off, s->ki.len);
}

/* A jump, call or return: control need not go on to the next instruction. */
static bool is_branch(const struct kp_insn *ki)
{
	static const char *const flow[] = { "call", "call*", "ret" };

	if (ki->rel_jump || ki->indirect_jump)
		return true;
	for (size_t i = 0; i < sizeof(flow) / sizeof(flow[0]); i++)
		if (ki->mnemonic && !strcmp(ki->mnemonic, flow[i]))
			return true;
	return false;
}

static void print_site_json(struct kpx_json *w, const struct kfunc *f, const struct site *s,
			    bool verify)
{
	char bytes[64];

	site_bytes(f, s, bytes, sizeof(bytes));
	jw_start_object(w);
	jw_uint_field(w, "offset", s->off);
	jw_hex_field(w, "addr", s->addr);
	jw_bool_field(w, "boundary", s->boundary);
	jw_int_field(w, "len", s->boundary ? s->ki.len : 0);
	jw_string_field(w, "bytes", bytes);
	jw_string_field(w, "insn", s->boundary && s->ki.mnemonic ? s->ki.mnemonic : "");
	jw_bool_field(w, "branch", s->boundary && is_branch(&s->ki));
	if (s->boundary && s->ki.rel_jump)
		jw_hex_field(w, "target", s->addr + s->ki.len + s->ki.rel_target);
	/* The operand's address; %gs-relative: the per-CPU offset (wraps). */
	if (s->boundary && s->ki.rip_relative)
		jw_hex_field(w, "rip_target", s->addr + s->ki.len + s->ki.rip_disp);
	jw_string_field(w, "mechanism", s->mech);
	jw_int_field(w, "region", s->region);
	jw_string_field(w, "reason", s->reason);
	jw_int_field(w, "callopt_refusal_count", s->no_call.n);
	jw_array_field(w, "callopt_refusals");
	for (int i = 0; i < s->no_call.n && i < MAX_REFUSALS; i++) {
		jw_start_object(w);
		jw_string_field(w, "rule", s->no_call.r[i].rule);
		jw_uint_field(w, "offset", s->no_call.r[i].off);
		jw_string_field(w, "reason", s->no_call.r[i].why);
		jw_end_object(w);
	}
	jw_end_array(w);
	if (verify) {
		json_mech_field(w, "observed", s->observed);
		jw_bool_field(w, "match", !strcmp(s->observed, s->mech));
		if (s->observed_source)
			jw_string_field(w, "observed_source", s->observed_source);
		if (s->observed_err[0])
			jw_string_field(w, "error", s->observed_err);
	}
	jw_end_object(w);
}

struct report {
	const struct kfunc *f;
	const struct vmlinux *vm;
	const struct kstate *ks;
	struct site *sites;
	int n;
	char notes[8][256];
	int nnotes;
	bool verify;
	int mismatches;
};

/* The fields of one function's report, into the open object of @w. */
static void print_json_fields(struct kpx_json *w, const struct report *r)
{
	const struct kfunc *f = r->f;
	static const char *const bid[] = { "differ", "match" };

	jw_string_field(w, "func", f->name);
	jw_hex_field(w, "addr", f->addr);
	jw_uint_field(w, "size", f->size);
	jw_string_field(w, "next", f->next);
	jw_bool_field(w, "endbr", has_endbr(f));
	jw_string_field(w, "text", f->live ? "live" : "vmlinux");
	jw_bool_field(w, "offline", r->vm->offline);
	jw_object_field(w, "vmlinux");
	jw_string_field(w, "path", r->vm->path);
	jw_string_field(w, "build_id", r->vm->build_id_match < 0 ? "unknown" :
			bid[r->vm->build_id_match]);
	jw_end_object(w);
	jw_object_field(w, "kernel");
	if (r->ks->callopt < 0)
		jw_null_field(w, "callopt");
	else
		jw_int_field(w, "callopt", r->ks->callopt);
	jw_int_field(w, "optimization", r->ks->optimization);
	jw_end_object(w);
	jw_array_field(w, "notes");
	for (int i = 0; i < r->nnotes; i++)
		jw_string(w, r->notes[i]);
	jw_end_array(w);
	jw_array_field(w, "sites");
	for (int i = 0; i < r->n; i++)
		print_site_json(w, f, &r->sites[i], r->verify);
	jw_end_array(w);
	if (r->verify) {
		jw_object_field(w, "verify");
		jw_int_field(w, "checked", r->n);
		jw_int_field(w, "mismatches", r->mismatches);
		jw_end_object(w);
	}
}

static void print_text(const struct report *r)
{
	const struct kfunc *f = r->f;

	printf("%s at 0x%llx, 0x%llx bytes (to %s)%s; text from %s; vmlinux %s "
	       "(build id %s)\n", f->name, f->addr, f->size, f->next,
	       has_endbr(f) ? ", ENDBR" : "", f->live ? "the running kernel" : "vmlinux",
	       r->vm->path, r->vm->build_id_match < 0 ? "unknown" :
	       r->vm->build_id_match ? "matches" : "DIFFERS");
	printf("kernel: callopt %s, optimization %s%s\n",
	       r->ks->callopt < 0 ? "absent" : r->ks->callopt ? "on" : "off",
	       r->ks->optimization ? "on" : "off", r->vm->offline ? " (offline: assumed)" : "");
	for (int i = 0; i < r->nnotes; i++)
		printf("note: %s\n", r->notes[i]);
	printf("%-7s %-18s %-3s %-26s %-8s %-10s%s %s\n", "OFFSET", "ADDRESS", "LEN", "BYTES",
	       "INSN", "MECHANISM", r->verify ? " OBSERVED " : "", "WHY");
	for (int i = 0; i < r->n; i++) {
		const struct site *s = &r->sites[i];
		char bytes[64];

		site_bytes(f, s, bytes, sizeof(bytes));
		printf("+0x%-5lx 0x%016llx %-3d %-26s %-8s %-10s", s->off, s->addr,
		       s->boundary ? s->ki.len : 0, bytes,
		       s->boundary && s->ki.mnemonic ? s->ki.mnemonic : "-", s->mech);
		if (r->verify)
			printf(" %-9s", s->observed[0] ? s->observed : "-");
		printf(" %s\n", s->reason);
	}
	if (r->verify)
		printf("verify: %d site(s) attached, %d mismatch(es)\n", r->n, r->mismatches);
}

static void note(struct report *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note(struct report *r, const char *fmt, ...)
{
	va_list ap;

	if (r->nnotes >= 8)
		return;
	va_start(ap, fmt);
	vsnprintf(r->notes[r->nnotes++], sizeof(r->notes[0]), fmt, ap);
	va_end(ap);
}

/* Where the running text differs from vmlinux, other than probes and ftrace. */
static void note_patched(struct report *r)
{
	const struct kfunc *f = r->f;
	unsigned long first = ULONG_MAX, last = 0;
	int n = 0;

	for (unsigned long i = 0; i < f->size; i++) {
		unsigned long long a = f->addr + i;

		if (f->text[i] == f->image[i] || span_set_overlap(&f->ftrace, a, a))
			continue;
		if (first == ULONG_MAX)
			first = i;
		last = i;
		n++;
	}
	if (n)
		note(r, "%d byte(s) between +0x%lx and +0x%lx differ from vmlinux (patched at "
		     "boot: alternatives, return thunks, retpolines, jump labels or static "
		     "calls); decoded as running", n, first, last);
}

static void add_notes(struct report *r)
{
	const struct kfunc *f = r->f;

	if (r->vm->offline)
		note(r, "offline: decoded vmlinux as linked, with its own tables; assumed: "
		     "the knobs at their defaults, SMP, no kprobes registered; sites the "
		     "kernel patches at boot (alternatives, return thunks) may differ");
	else if (!f->live)
		note(r, "could not read the running kernel's text; decoded vmlinux, which "
		     "differs at sites the kernel patches at boot");
	else
		note_patched(r);
	if (r->vm->build_id_match == 0)
		note(r, "vmlinux's build id differs from the running kernel's");
	if (f->kprobes.n)
		note(r, "%zu kprobe(s) already registered in %s: predictions assume they stay; "
		     "their bytes were restored from vmlinux", f->kprobes.n, f->name);
	if (!f->ftrace_from_tracefs && !r->vm->offline)
		note(r, "ftrace sites from vmlinux's __mcount_loc (tracefs unreadable)");
	if (f->alternatives.n)
		note(r, "%zu alternative site(s) in %s: not reserved for kprobes, decoded as "
		     "patched", f->alternatives.n, f->name);
	if (f->extable.n)
		note(r, "%zu exception-table entr%s in %s", f->extable.n,
		     f->extable.n == 1 ? "y" : "ies", f->name);
	if (r->ks->callopt >= 0 && !r->vm->norc)
		note(r, "%s has no ORC tables (.orc_unwind_ip, .orc_unwind): callopt needs "
		     "the ORC unwinder and compares its frames; callopt predicted refused",
		     r->vm->path);
	else if (r->ks->callopt >= 0 && r->vm->orc_order)
		note(r, "vmlinux's ORC table is not sorted by address (sorttable did not "
		     "run on it): kpctl sorted it as sorttable does");
	if (strchr(f->name, '.') && !span_set_overlap(&f->ftrace, f->addr, f->addr + f->size - 1))
		note(r, "%s has no fentry site; the kernel then checks its parent function "
		     "(not checked here)", f->name);
}

/* Attaches at @s alone and records the mechanism the kernel chose. */
static void verify_site(struct kpctl_bpf *skel, const struct kfunc *f, struct site *s,
			const struct explain_opts *o)
{
	struct probe p = {};
	int err;

	snprintf(p.func, sizeof(p.func), "%s", f->name);
	snprintf(p.spec, sizeof(p.spec), "%s+0x%lx", f->name, s->off);
	p.offset = s->off;
	if (s->off >= f->size) {
		/* kpctl itself refuses these; attach would probe another symbol. */
		snprintf(s->observed, sizeof(s->observed), "refused");
		snprintf(s->observed_err, sizeof(s->observed_err), "past the end (kpctl)");
		return;
	}
	err = attach_probe(skel->progs.kpctl_kprobe, &p, 0);
	if (err) {
		snprintf(s->observed, sizeof(s->observed), "refused");
		snprintf(s->observed_err, sizeof(s->observed_err), "%s", strerror(-err));
		return;
	}
	if (!strcmp(s->mech, "int3"))
		wait_mechanism(&p, NULL, o->settle);
	else if (!strcmp(s->mech, "jmpopt"))
		wait_mechanism(&p, "jmpopt", o->wait_opt);
	else
		wait_mechanism(&p, s->mech, 2.0);
	snprintf(s->observed, sizeof(s->observed), "%s", p.mechanism);
	s->observed_source = p.mech_source;
	s->wrong_addr = p.addr && p.addr != s->addr;
	if (s->wrong_addr)
		snprintf(s->observed_err, sizeof(s->observed_err),
			 "probe at 0x%llx, predicted 0x%llx", (unsigned long long)p.addr, s->addr);
	else if (!s->observed[0])
		snprintf(s->observed_err, sizeof(s->observed_err),
			 "cannot tell the mechanism (class %s, source %s)",
			 probe_class(&p) ? probe_class(&p) : "-", p.mech_source);
	detach_probe(&p);
}

static int verify_all(struct kpctl_bpf *skel, struct report *r, const struct explain_opts *o)
{
	for (int i = 0; i < r->n && !stop_requested; i++) {
		struct site *s = &r->sites[i];

		verify_site(skel, r->f, s, o);
		if (strcmp(s->observed, s->mech) || s->wrong_addr)
			r->mismatches++;
		if (!env.json)
			fprintf(stderr, "\rkpctl: verified %d/%d", i + 1, r->n);
	}
	if (!env.json)
		fprintf(stderr, "\n");
	if (stop_requested) {
		errx("interrupted while verifying");
		return -EINTR;
	}
	return 0;
}

static void usage_explain(FILE *f)
{
	fprintf(f,
"Usage: kpctl explain [OPTIONS] FUNC...\n"
"\n"
"For each instruction boundary of FUNC (a vmlinux function), the mechanism a\n"
"kprobe there gets on the running kernel (ftrace, callopt, jmpopt, int3 or\n"
"refused) and why not a faster one. FUNC's text is read from the running\n"
"kernel (with a BPF program) and decoded with the kernel's own x86 decoder;\n"
"the kernel's tables (exception table, jump labels, static calls, BUG sites,\n"
"alternatives, ORC unwind data) come from vmlinux, which must match the\n"
"running kernel (its address of FUNC and build id are checked); the\n"
"blacklist, ftrace sites and the optimization knobs from debugfs, tracefs\n"
"and sysctl. Needs root.\n"
"\n"
"With --offline, nothing is asked of the running kernel: the image's own\n"
"symbols, tables and ftrace sites (__mcount_loc) and its blacklist\n"
"(_kprobe_blacklist, .kprobes.text, .noinstr.text, entry text) decide, for a\n"
"kernel with its knobs at their defaults (callopt, where the image has it,\n"
"and optimization on), SMP, and no kprobes registered.\n"
"Text as linked: where the kernel patches itself at boot, it may differ.\n"
"The project's scripts pick their test and benchmark sites this way.\n"
"\n"
"FUNC may be 0xADDR, the function that starts there (for static functions\n"
"that share a name). With several FUNCs, -j prints {\"functions\": [...]},\n"
"one report each.\n"
"\n"
"  -k, --vmlinux FILE  the kernel image (default: the first of vmlinux,\n"
"                      vmlinux-NAME for a release ending in -kpx-NAME and\n"
"                      vmlinux-debug next to kpctl, /boot/vmlinux-$(uname -r)\n"
"                      and /usr/lib/debug/boot/vmlinux-$(uname -r) whose build\n"
"                      id matches the running kernel)\n"
"  -o, --offline       decide from the image alone (needs --vmlinux; no root)\n"
"  -C, --callopt       with --offline: decide as a kernel with callopt, also\n"
"                      for an image built without it (where the series would\n"
"                      call-optimize; the scripts pick stock's sites so)\n"
"  -m, --mechanism LIST  only the sites of these mechanisms, comma-separated\n"
"                      (ftrace, callopt, jmpopt, int3, refused)\n"
"  -a, --all           list every byte offset, not only instruction boundaries\n"
"  -V, --verify        attach at every listed offset, one at a time, and\n"
"                      compare the mechanism the kernel chose; exit 1 on any\n"
"                      mismatch\n"
"  -w, --wait-opt S    with --verify: wait up to S s for jump optimization (10)\n"
"  -s, --settle S      with --verify: watch an int3 prediction S s (1)\n"
"  -h, --help          this help\n"
"\n"
"The offset just past the end is listed too (refused). See docs/kpctl.md for\n"
"how each decision mirrors the kernel's code.\n"
"\n"
"Examples:\n"
"  kpctl explain __x64_sys_getpgid\n"
"  kpctl -j explain --verify --wait-opt 10 __x64_sys_getpgid\n"
"  kpctl explain --all vfs_read\n"
"  kpctl -j explain --offline --vmlinux build/vmlinux --mechanism callopt vfs_read\n");
}

static const char *const mech_names[] = { "ftrace", "callopt", "jmpopt", "int3", "refused" };

/* --mechanism M[,M...]: a bit per name of mech_names[]. */
static int parse_mechs(const char *arg, unsigned int *mechs)
{
	char buf[128], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", arg);
	*mechs = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < sizeof(mech_names) / sizeof(mech_names[0]); i++)
			if (!strcmp(tok, mech_names[i]))
				break;
		if (i == sizeof(mech_names) / sizeof(mech_names[0])) {
			errx("explain: unknown mechanism '%s' (ftrace, callopt, jmpopt, int3, "
			     "refused)", tok);
			return -1;
		}
		*mechs |= 1U << i;
	}
	if (!*mechs) {
		errx("explain: --mechanism wants a list such as callopt,jmpopt");
		return -1;
	}
	return 0;
}

static int parse_explain_opts(int argc, char **argv, struct explain_opts *o)
{
	static const struct option opts[] = {
		{ "vmlinux", required_argument, NULL, 'k' },
		{ "offline", no_argument, NULL, 'o' },
		{ "callopt", no_argument, NULL, 'C' },
		{ "mechanism", required_argument, NULL, 'm' },
		{ "all", no_argument, NULL, 'a' },
		{ "verify", no_argument, NULL, 'V' },
		{ "wait-opt", required_argument, NULL, 'w' },
		{ "settle", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	char *end;
	int c;

	o->wait_opt = 10;
	o->settle = 1;
	optind = 0;
	while ((c = cmd_getopt(argc, argv, "k:oCm:aVw:s:h", opts)) != -1) {
		switch (c) {
		case 'k':
			o->vmlinux = optarg;
			break;
		case 'o':
			o->offline = true;
			break;
		case 'C':
			o->callopt = true;
			break;
		case 'm':
			if (parse_mechs(optarg, &o->mechs))
				return EXIT_USAGE;
			break;
		case 'a':
			o->all = true;
			break;
		case 'V':
			o->verify = true;
			break;
		case 'w':
		case 's':
			*(c == 'w' ? &o->wait_opt : &o->settle) = strtod(optarg, &end);
			if (*end || !(strtod(optarg, NULL) >= 0)) {
				errx("bad value '%s' for -%c", optarg, c);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			return show_help(usage_explain);
		default:
			return EXIT_USAGE;	/* said by cmd_getopt() */
		}
	}
	if (argc - optind < 1) {
		errx("explain: want a FUNC");
		usage_explain(stderr);
		return EXIT_USAGE;
	}
	if (o->offline && !o->vmlinux) {
		errx("explain: --offline needs --vmlinux FILE (the running kernel is not asked)");
		return EXIT_USAGE;
	}
	if (o->callopt && !o->offline) {
		errx("explain: --callopt is for --offline (the running kernel says what it has)");
		return EXIT_USAGE;
	}
	if (o->offline && o->verify) {
		errx("explain: --verify attaches probes to the running kernel: not with --offline");
		return EXIT_USAGE;
	}
	return -1;
}

static void candidate(char (*c)[PATH_MAX], int *n, const char *fmt, const char *arg)
{
	if (*n < 4)
		snprintf(c[(*n)++], PATH_MAX, fmt, arg);
}

/*
 * --vmlinux, or the first of vmlinux, vmlinux-NAME (release ...-kpx-NAME)
 * and vmlinux-debug next to kpctl, /boot/vmlinux-RELEASE and
 * /usr/lib/debug/boot/vmlinux-RELEASE whose build id matches the running
 * kernel (else the first that opens).
 */
static int find_vmlinux(struct vmlinux *vm, const char *path, bool quiet)
{
	char c[5][PATH_MAX], self[PATH_MAX - 64], rel[128] = "";
	const char *flavour;
	FILE *f = fopen("/proc/sys/kernel/osrelease", "r");
	int n = 0, first = -1, err = -ENOENT;
	ssize_t len;

	if (f) {
		if (!fgets(rel, sizeof(rel), f))
			rel[0] = '\0';
		fclose(f);
	}
	rel[strcspn(rel, "\n")] = '\0';
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[len > 0 ? len : 0] = '\0';
	if (strrchr(self, '/'))
		*strrchr(self, '/') = '\0';
	if (path) {
		candidate(c, &n, "%s", path);
	} else {
		candidate(c, &n, "%s/vmlinux", self);
		/* The project's flavours: release ...-kpx-NAME, image vmlinux-NAME */
		flavour = strstr(rel, "-kpx-");
		if (flavour && strcmp(flavour + 5, "debug")) {
			char alt[PATH_MAX];

			snprintf(alt, sizeof(alt), "%s/vmlinux-%s", self, flavour + 5);
			candidate(c, &n, "%s", alt);
		}
		candidate(c, &n, "%s/vmlinux-debug", self);
		candidate(c, &n, "/boot/vmlinux-%s", rel);
		candidate(c, &n, "/usr/lib/debug/boot/vmlinux-%s", rel);
	}
	for (int i = 0; i < n; i++) {
		if (vmlinux_open(vm, c[i]))
			continue;
		if (vm->build_id_match == 1 || path)
			return 0;
		vmlinux_close(vm);
		if (first < 0)
			first = i;
	}
	if (first >= 0)
		return vmlinux_open(vm, c[first]);
	if (path)
		err = vmlinux_open(vm, path);
	if (!quiet)
		errx("cannot read the kernel image '%s': %s (use --vmlinux)", c[0],
		     strerror(-err));
	return err;
}

static int open_vmlinux(struct vmlinux *vm, const char *path)
{
	return find_vmlinux(vm, path, false);
}

static int load_func(struct kfunc *f, struct vmlinux *vm, const char *name)
{
	int err = kfunc_load(f, vm, name, read_live_text);

	switch (err) {
	case 0:
		return 0;
	case -ENOENT:
		errx("no such function in the kernel: '%s'", name);
		break;
	case -EACCES:
		errx_unavailable("kallsyms hides addresses: explain needs root");
		break;
	case -ESRCH:
		errx("%s is not at 0x%llx in %s: the image does not match the running "
		     "kernel (use --vmlinux)", name, ksym_addr(name), vm->path);
		break;
	default:
		errx("cannot read %s from %s: %s", name, vm->path, strerror(-err));
	}
	return err;
}

static void kstate_read(struct kstate *ks)
{
	ks->callopt = kpx_sysctl_read(KPROBES_CALLOPT);
	ks->optimization = kpx_sysctl_read(KPROBES_OPTIMIZATION) > 0;
	ks->retpoline_or_ibt = ksym_addr("__x86_indirect_thunk_array") ||
			       ksym_addr("__x86_indirect_thunk_rax") ||
			       ksym_addr("ibt_selftest");
}

static bool mech_wanted(unsigned int mechs, const char *mech)
{
	if (!mechs)
		return true;
	for (size_t i = 0; i < sizeof(mech_names) / sizeof(mech_names[0]); i++)
		if (!strcmp(mech, mech_names[i]))
			return mechs & (1U << i);
	return false;
}

static int build_sites(struct report *r, const struct explain_opts *o)
{
	const struct kfunc *f = r->f;
	bool *boundary = calloc(f->size + 1, sizeof(bool));
	size_t nsites = 1;	/* the offset past the end */
	int bad = 0;

	if (!boundary)
		return -ENOMEM;
	if (decode_boundaries(f, boundary, &bad))
		note(r, "the kernel's decoder stops at +0x%x: later offsets are refused", bad);
	for (unsigned long off = 0; off < f->size; off++)
		nsites += o->all || boundary[off];
	r->sites = calloc(nsites, sizeof(*r->sites));
	if (!r->sites) {
		free(boundary);
		return -ENOMEM;
	}
	for (unsigned long off = 0; off <= f->size; off++) {
		struct site *s = &r->sites[r->n];

		if (!o->all && off < f->size && !boundary[off])
			continue;
		memset(s, 0, sizeof(*s));
		s->off = off;
		decide(f, r->ks, boundary, s);
		if (mech_wanted(o->mechs, s->mech))
			r->n++;
	}
	free(boundary);
	return 0;
}

/*
 * The state of a kernel that is not asked (--offline): the defaults of
 * its knobs, callopt where the image has it.
 */
static void kstate_offline(struct kstate *ks, bool callopt)
{
	/* The knob's variable (CONFIG_KPROBES_CALLOPT): the image has callopt. */
	ks->callopt = callopt || ksym_addr("kprobes_callopt_enabled") ? 1 : -1;
	ks->optimization = 1;
	ks->retpoline_or_ibt = ksym_addr("__x86_indirect_thunk_array") ||
			       ksym_addr("__x86_indirect_thunk_rax") ||
			       ksym_addr("ibt_selftest");
}

/* Explains one function: into the open object of @w with -j, else as text. */
/*
 * Explains one function. With -j: as the whole document when @w is NULL,
 * else into the open object of @w. Prints nothing when it fails to read FUNC.
 */
static int explain_one(const char *name, struct vmlinux *vm, const struct kstate *ks,
		       const struct explain_opts *o, struct kpx_json *w, bool *printed)
{
	struct report r = {};
	struct kfunc f = {};
	int ret = EXIT_FAIL;

	*printed = false;
	if (load_func(&f, vm, name))
		goto out;
	r.f = &f;
	r.vm = vm;
	r.ks = ks;
	r.verify = o->verify;
	add_notes(&r);
	if (build_sites(&r, o)) {
		errx("out of memory");
		goto out;
	}
	if (o->verify && verify_all(text_skel, &r, o))
		goto out;
	*printed = true;
	if (w) {
		print_json_fields(w, &r);
	} else if (env.json) {
		print_json_fields(json_begin(), &r);
		json_end();
	} else {
		print_text(&r);
	}
	ret = r.mismatches ? EXIT_FAIL : EXIT_OK;
	if (r.mismatches)
		errx("%s: %d offset(s) got another mechanism than predicted", name, r.mismatches);
out:
	free(r.sites);
	kfunc_free(&f);
	return ret;
}

int cmd_explain(int argc, char **argv)
{
	struct explain_opts o = {};
	struct vmlinux vm = {};
	struct kpx_json *w = NULL;
	struct kstate ks;
	struct ksym sym;
	int ret, nfuncs, nfailed = 0;

	ret = parse_explain_opts(argc, argv, &o);
	if (ret >= 0)
		return ret;
	ret = EXIT_FAIL;
	nfuncs = argc - optind;
	for (int i = optind; i < argc; i++) {
		if (strchr(argv[i], ':') || strchr(argv[i], '+')) {
			errx("explain takes vmlinux function names (no MODULE: or +OFF: it reads "
			     "the tables and ORC data of vmlinux only): '%s'", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (o.offline) {
		int err = vmlinux_open_offline(&vm, o.vmlinux);

		if (err) {
			errx("cannot read the kernel image '%s': %s", o.vmlinux, strerror(-err));
			return EXIT_FAIL;
		}
		kstate_offline(&ks, o.callopt);
	}
	/*
	 * Every name first, before anything is loaded (kallsyms' names need
	 * no root): one that is not there is bad usage and changes nothing
	 * printed. An address needs kallsyms' addresses: root, checked next.
	 */
	for (int i = optind; i < argc; i++) {
		int err = ksym_lookup_func(argv[i], &sym);

		if (err == -ENOENT || err == -EINVAL) {
			errx("no such function in %s: '%s'",
			     o.offline ? vm.path : "the kernel", argv[i]);
			ret = EXIT_USAGE;
			goto out;
		}
	}
	/* --vmlinux FILE too (an input), then what loading needs. */
	if (!o.offline) {
		if (o.vmlinux && open_vmlinux(&vm, o.vmlinux))
			goto out;
		if (require_privileges() || require_kprobes())
			goto out;
		text_skel = open_skel();
		if (!text_skel)
			goto out;
		if (load_skel(text_skel, "kpctl_read_text", "kpctl_kprobe", NULL))
			goto out;
		if (!o.vmlinux && open_vmlinux(&vm, NULL))
			goto out;
		kstate_read(&ks);
	}
	if (nfuncs == 1) {
		bool printed;

		ret = explain_one(argv[optind], &vm, &ks, &o, NULL, &printed);
		goto out;
	}
	/*
	 * Several: {"schema":2,"functions":[{...},...]}, or text one after
	 * another. A function that cannot be read (its text outside the
	 * image's sections, say) gets {"func":...,"error":...} and the others
	 * go on; the command then exits 1 with a top-level "error".
	 */
	if (env.json) {
		w = json_begin();
		jw_array_field(w, "functions");
	}
	ret = EXIT_OK;
	for (int i = optind; i < argc && !stop_requested; i++) {
		bool printed;
		int one;

		if (w)
			jw_start_object(w);
		else if (i > optind)
			putchar('\n');
		env.error[0] = '\0';	/* this function's error */
		one = explain_one(argv[i], &vm, &ks, &o, w, &printed);
		if (w && !printed) {
			jw_string_field(w, "func", argv[i]);
			jw_string_field(w, "error", env.error[0] ? env.error : "failed");
		}
		if (w)
			jw_end_object(w);
		if (one != EXIT_OK) {
			ret = one;
			nfailed++;
		}
	}
	if (stop_requested) {
		errx("interrupted");
		ret = EXIT_FAIL;
	} else if (nfailed) {
		snprintf(env.error, sizeof(env.error), "%d of %d functions failed", nfailed,
			 nfuncs);
		if (!env.json)
			warnx("%s", env.error);
	}
	if (w) {
		jw_end_array(w);
		if (ret != EXIT_OK)
			jw_string_field(w, "error", env.error);
		json_end();
	}
out:
	vmlinux_close(&vm);
	kpctl_bpf__destroy(text_skel);
	text_skel = NULL;
	return ret;
}

/*
 * kpctl_read_text alone, for explain_refusal(): quietly (a failure leaves
 * vmlinux's text, and the error kpctl reports is the attach's).
 */
static struct kpctl_bpf *open_text_skel(void)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts);
	struct bpf_program *prog;
	struct kpctl_bpf *skel;
	const char *what;

	opts.btf_custom_path = btf_override(&what);
	skel = kpctl_bpf__open_opts(&opts);
	if (!skel)
		return NULL;
	bpf_object__for_each_program(prog, skel->obj)
		bpf_program__set_autoload(prog, prog == skel->progs.kpctl_read_text);
	if (kpctl_bpf__load(skel)) {
		kpctl_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

/*
 * Why the kernel refused a probe at @p with EINVAL or EILSEQ, which have
 * several causes (blacklisted, notrace, inside an instruction, past the
 * end, ...): the decision 'explain' makes for that offset, from the
 * running kernel's text (else vmlinux's) and the tables of the vmlinux
 * 'explain' would use (no --vmlinux: the default places). The reason into
 * @buf, and 0, when 'explain' refuses the site too; -EAGAIN when it
 * predicts a mechanism there (the kernel's reason is one it does not
 * model); another -errno when it cannot tell (a module function, no
 * vmlinux that matches the running kernel). Prints nothing.
 */
int explain_refusal(const struct probe *p, char *buf, size_t len)
{
	struct kpctl_bpf *saved = text_skel;
	struct vmlinux vm = {};
	struct kfunc f = {};
	struct site s = {};
	struct kstate ks;
	bool *boundary = NULL;
	int bad = -1, err;

	if (strchr(p->func, ':'))
		return -EOPNOTSUPP;	/* explain reads vmlinux only */
	text_skel = open_text_skel();
	err = find_vmlinux(&vm, NULL, true);
	if (err)
		goto out;
	err = kfunc_load(&f, &vm, p->func, read_live_text);
	if (err)
		goto out;
	kstate_read(&ks);
	boundary = calloc(f.size + 1, sizeof(bool));
	if (!boundary) {
		err = -ENOMEM;
		goto out;
	}
	decode_boundaries(&f, boundary, &bad);
	s.off = p->offset;
	decide(&f, &ks, boundary, &s);
	if (strcmp(s.mech, "refused")) {
		err = -EAGAIN;
		goto out;
	}
	if (bad >= 0 && (unsigned long)bad <= p->offset && p->offset < f.size)
		snprintf(buf, len, "the kernel's x86 decoder stops at +0x%x of %s, before "
			 "the offset", bad, f.name);
	else
		snprintf(buf, len, "%s", s.reason);
out:
	free(boundary);
	kfunc_free(&f);
	vmlinux_close(&vm);
	kpctl_bpf__destroy(text_skel);
	text_skel = saved;
	return err;
}

/*
 * Default stress sites in the getpgid function, found as scripts/sites/gen-sites
 * does: its entry, the first boundary after the fentry site, and the first
 * instruction of at least 5 bytes after that which is no branch.
 */
int default_getpgid_sites(struct kpctl_bpf *skel, char (*specs)[256], int max)
{
	const char *name = getpgid_func();
	unsigned char text[512 + KFUNC_SLACK];
	unsigned long off, mid = 0, single = 0;
	struct kp_insn ki;
	struct ksym sym;
	int n = 0;

	if (ksym_lookup(name, &sym) || sym.size > 512 || max < 3)
		return -1;
	text_skel = skel;
	if (read_live_text(sym.addr, text, sym.size + KFUNC_SLACK))
		return -1;
	text_skel = NULL;
	/* ENDBR (if any), then the 5-byte fentry site. */
	off = (text[0] == 0xf3 && text[1] == 0x0f && text[2] == 0x1e) ? 4 : 0;
	mid = off + 5;
	for (off = mid; off < sym.size; off += ki.len) {
		if (!kp_decode(text + off, sizeof(text) - off, &ki))
			break;
		/* The first one that callopt_insn_ok() takes (not the %gs load). */
		if (ki.len >= KP_JMP32_SIZE && !ki.rel_jump && strcmp(ki.mnemonic, "call") &&
		    strcmp(ki.mnemonic, "ret") && !ki.indirect_jump && !ki.callopt_refusal &&
		    !ki.boost_refusal) {
			single = off;
			break;
		}
	}
	snprintf(specs[n++], 256, "%s", name);
	snprintf(specs[n++], 256, "%s+0x%lx", name, mid);
	if (single)
		snprintf(specs[n++], 256, "%s+0x%lx", name, single);
	return n;
}
