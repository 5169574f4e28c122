// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * model_check OUT.json: rsb_model.c driven without QEMU. This file provides
 * the plugin API functions rsb_model.c calls (registration only), then
 * "executes" a synthetic guest: a user loop that makes a syscall whose
 * kernel path calls the window function, with three kinds of epoch:
 *   1. callopt-like: at the site, a call to a trampoline that calls a
 *      handler, returns into a buffer, which pushes site+len and jumps to
 *      an exit that returns (no call pushed that address);
 *   2. int3-like, deep: int3 at the site, an exception handler 20 calls
 *      deep (deeper than 16, not than 32), iret back; the exception's
 *      frame pushes and iret's pops run the memory callbacks of the last
 *      call or return again (as QEMU 7.2's helpers do), which the plugin
 *      must ignore;
 *   3. plain only.
 * Each epoch: 10 plain syscalls, 20 with the probe, 10 plain. The plugin's
 * JSON (OUT.json) is then checked by selftests/host/test_rsb_model.sh
 * against the counts worked out by hand in the comments below.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "qemu_plugin_api.h"

struct cb {
	void *fn;
	void *udata;
};

struct qemu_plugin_insn {
	uint64_t vaddr;
	uint8_t b[16];
	size_t len;
	struct cb exec[8], mem[4];
	int nexec, nmem;
};

struct qemu_plugin_tb {
	uint64_t vaddr;
	size_t n;
	struct qemu_plugin_insn insn[8];
	struct cb exec[4];
	int nexec;
};

static qemu_plugin_vcpu_tb_trans_cb_t trans_cb;
static qemu_plugin_udata_cb_t atexit_cb;

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb)
{
	trans_cb = cb;
}

void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *udata)
{
	atexit_cb = cb;
}

void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags, void *userdata)
{
	tb->exec[tb->nexec++] = (struct cb){ (void *)cb, userdata };
}

void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata)
{
	insn->exec[insn->nexec++] = (struct cb){ (void *)cb, userdata };
}

void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
				      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
				      void *userdata)
{
	insn->mem[insn->nmem++] = (struct cb){ (void *)cb, userdata };
}

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb)
{
	return tb->n;
}

uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb)
{
	return tb->vaddr;
}

struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx)
{
	return (struct qemu_plugin_insn *)&tb->insn[idx];
}

const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn)
{
	return insn->b;
}

size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn)
{
	return insn->len;
}

uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn)
{
	return insn->vaddr;
}

bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info)
{
	return info;
}

void qemu_plugin_outs(const char *string)
{
	fputs(string, stderr);
}

/* The synthetic guest's addresses. */
#define USER_LOOP	0x400000ULL		/* call wrapper (5) ; jmp loop */
#define USER_WRAP	0x401000ULL		/* syscall (2) ; ret */
#define K		0xffffffff81000000ULL
#define SYSENTRY	(K + 0x600080)		/* nop ; call DO (5) ; sysret */
#define DO		(K + 0x10000)		/* call FUNC or MARK (5) ; ret */
#define FUNC		(K + 0x20000)		/* nop ; SITE: 5 bytes ; ret */
#define SITE		(FUNC + 1)
#define MARK		(K + 0x30000)		/* ret */
#define TRAMP		(K + 0x40000)		/* call HANDLER (5) ; ret */
#define HANDLER		(K + 0x41000)		/* ret */
#define BUF		(K + 0x42000)		/* push imm32 (5) ; jmp EXIT (5) */
#define EXIT		(K + 0x43000)		/* ret */
#define INT3_ENTRY	(K + 0x600200)		/* call DEEP (5) ; iretq (2) */
#define DEEP		(K + 0x50000)		/* DEEP+16*i: call next (5) ; ret */
#define NDEEP		20

static uint64_t rsp = 0x7ffffff00000ULL, krsp_top = 0xffffc90000004000ULL;
/* The memory callbacks of the last instruction that had some. */
static struct cb stale[4];
static int nstale;

/* A helper's @n accesses (stores or loads), under stale callbacks. */
static void helper_access(bool store, int n)
{
	for (int i = 0; i < n; i++)
		for (int c = 0; c < nstale; c++)
			((qemu_plugin_vcpu_mem_cb_t)stale[c].fn)(0, store, rsp - 8 * (i + 1),
								   stale[c].udata);
}

/* Executes the block at @pc made of @n instructions given as byte strings. */
static void run_tb(uint64_t pc, int n, const char *const *insns)
{
	struct qemu_plugin_tb tb = { .vaddr = pc, .n = n };
	uint64_t a = pc;

	for (int i = 0; i < n; i++) {
		const char *s = insns[i];
		struct qemu_plugin_insn *in = &tb.insn[i];

		in->vaddr = a;
		for (in->len = 0; s[2 * in->len]; in->len++)
			sscanf(s + 2 * in->len, "%2hhx", &in->b[in->len]);
		a += in->len;
	}
	trans_cb(1, &tb);
	for (int c = 0; c < tb.nexec; c++)
		((qemu_plugin_vcpu_udata_cb_t)tb.exec[c].fn)(0, tb.exec[c].udata);
	for (size_t i = 0; i < tb.n; i++) {
		struct qemu_plugin_insn *in = &tb.insn[i];
		uint8_t op = in->b[0];

		for (int c = 0; c < in->nexec; c++)
			((qemu_plugin_vcpu_udata_cb_t)in->exec[c].fn)(0, in->exec[c].udata);
		if (op == 0xe8 || op == 0x68)
			rsp -= 8;
		for (int c = 0; c < in->nmem; c++) {
			qemu_plugin_vcpu_mem_cb_t cb = (qemu_plugin_vcpu_mem_cb_t)in->mem[c].fn;

			cb(0, op == 0xe8, rsp, in->mem[c].udata);
		}
		if (in->nmem) {
			memcpy(stale, in->mem, sizeof(stale));
			nstale = in->nmem;
		}
		if (op == 0xc3)
			rsp += 8;
	}
}

#define RUN(pc, ...) run_tb(pc, sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(char *), \
			    (const char *const[]){ __VA_ARGS__ })

enum probe { P_NONE, P_CALLOPT, P_INT3 };

/* One getpgid-like syscall (or the marker's), from the user loop and back. */
static void syscall_once(enum probe p, bool marker)
{
	uint64_t ursp;

	RUN(USER_LOOP, "e800000000");			/* call USER_WRAP */
	RUN(USER_WRAP, "0f05");				/* syscall */
	ursp = rsp;
	rsp = krsp_top - 64;				/* the kernel stack */
	RUN(SYSENTRY, "90", "e800000000");		/* call DO */
	RUN(DO, "e800000000");				/* call FUNC or MARK */
	if (marker) {
		RUN(MARK, "c3");
	} else if (p == P_NONE) {
		RUN(FUNC, "90", "0f1f440000", "c3");
	} else if (p == P_CALLOPT) {
		/*
		 * RSB (oldest first) at the site: U+5 S+6 D+5. call: +F+6;
		 * TRAMP call: +T+5; HANDLER ret: T+5 right; TRAMP ret to
		 * BUF pops F+6 (1: mispredict); EXIT's ret to F+6 pops D+5
		 * (2); FUNC's ret to D+5 pops S+6 (3, above); DO's ret to
		 * S+6 pops U+5 (4, above); the user's ret pops an empty RSB
		 * (5, above). 5 per hit, 3 above, either size; kernel calls
		 * 4, returns 5: depth -1; the call depth count underflows at
		 * DO's return: 1. TRAMP's return lies in thunk=: 1 per hit.
		 */
		RUN(FUNC, "90", "e800000000");		/* call TRAMP at SITE */
		RUN(TRAMP, "e800000000");		/* call HANDLER */
		RUN(HANDLER, "c3");
		RUN(TRAMP + 5, "c3");			/* into BUF */
		RUN(BUF, "6800000000", "e900000000");	/* push SITE+5; jmp EXIT */
		RUN(EXIT, "c3");			/* to SITE+5 */
		RUN(SITE + 5, "c3");			/* FUNC's own ret */
		goto out;
	} else {
		/*
		 * int3 at the site; the handler nests NDEEP + 1 calls: 3 + 21
		 * = 24 entries pushed. RSB 16 keeps the last 16: the 16
		 * innermost returns predict, the other 5 of the handler
		 * find it empty (inside), then FUNC's, DO's and the user's
		 * returns (above): 8 per hit, 3 above. RSB 32: 0. iretq
		 * touches no RSB. Depth: balanced, 0; the count underflows
		 * once (23 calls saturate it at 13, 21 + 2 returns empty it).
		 */
		RUN(FUNC, "90", "cc");
		helper_access(true, 5);			/* the exception frame */
		RUN(INT3_ENTRY, "e800000000");		/* call DEEP */
		for (int i = 0; i < NDEEP; i++)
			RUN(DEEP + 16 * i, "e800000000");
		RUN(DEEP + 16 * NDEEP, "c3");
		for (int i = NDEEP - 1; i >= 0; i--)
			RUN(DEEP + 16 * i + 5, "c3");
		RUN(INT3_ENTRY + 5, "48cf");		/* iretq */
		helper_access(false, 5);
		RUN(SITE + 5, "c3");
		goto out;
	}
	RUN(DO + 5, "c3");
	goto sysret;
out:
	RUN(DO + 5, "c3");
sysret:
	RUN(SYSENTRY + 6, "0f07");			/* sysret */
	rsp = ursp;
	RUN(USER_WRAP + 2, "c3");			/* to USER_LOOP + 5 */
	RUN(USER_LOOP + 5, "ebf9");			/* jmp USER_LOOP */
}

static void epoch(enum probe p)
{
	syscall_once(P_NONE, true);
	for (int i = 0; i < 10; i++)
		syscall_once(P_NONE, false);
	for (int i = 0; i < 20; i++)
		syscall_once(p, false);
	for (int i = 0; i < 10; i++)
		syscall_once(P_NONE, false);
}

int main(int argc, char **argv)
{
	char out[4200], a[6][64];
	char *args[] = { out, a[0], a[1], a[2], a[3], a[4], a[5], "rsb=16:32" };
	qemu_info_t info = { .target_name = "x86_64", .version = { 0, 1 },
			     .system_emulation = true, .system = { 1, 1 } };

	if (argc != 2) {
		fprintf(stderr, "usage: model_check OUT.json\n");
		return 2;
	}
	snprintf(out, sizeof(out), "out=%s", argv[1]);
	snprintf(a[0], 64, "sysentry=0x%llx", SYSENTRY);
	snprintf(a[1], 64, "win=0x%llx", FUNC);
	snprintf(a[2], 64, "mark=0x%llx", MARK);
	snprintf(a[3], 64, "site=0x%llx", SITE);
	snprintf(a[4], 64, "func=0x%llx", FUNC);
	snprintf(a[5], 64, "thunk=0x%llx:0x%llx", TRAMP + 5, TRAMP + 6);
	if (qemu_plugin_install(1, &info, 8, args) || !trans_cb || !atexit_cb) {
		fprintf(stderr, "model_check: the plugin did not install\n");
		return 1;
	}
	epoch(P_CALLOPT);
	epoch(P_INT3);
	epoch(P_NONE);
	syscall_once(P_NONE, true);
	atexit_cb(1, NULL);
	return 0;
}
