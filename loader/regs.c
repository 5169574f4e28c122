// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl regs SPEC: the pt_regs a BPF kprobe handler gets at SPEC, copied by
 * the kpctl_regs program into a map. With --compare, the same probe is
 * captured twice in this process, pinned to one CPU: once with the
 * mechanism the kernel chose and once as int3 (debug.kprobes-optimization
 * set to 0 meanwhile, and restored), and the two must agree. sp is compared
 * relative to sp at the entry of the syscall function in the same syscall
 * (a second probe, kpctl_regs_anchor): a kernel with RANDOMIZE_KSTACK_OFFSET
 * on (Debian's default) moves the stack of each syscall by a random offset.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "common.h"
#include "kpctl.skel.h"

static const char *const reg_names[KPCTL_REGS_WORDS] = {
	"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8",
	"ax", "cx", "dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss",
};

enum { REG_ORIG_AX = 15, REG_IP, REG_CS, REG_FLAGS, REG_SP, REG_SS };

struct capture {
	char mechanism[16];	/* "" when kpctl cannot tell (JSON null) */
	const char *source;	/* where the mechanism came from */
	__u64 w[KPCTL_REGS_WORDS];
	__u64 anchor_sp;	/* 0: no anchor (no --compare, or it missed) */
};

/* The anchor: outermost in the getpgid chain, so it runs before every site. */
#define REGS_ANCHOR "__x64_sys_getpgid"

struct regs_opts {
	bool compare;
	double timeout;
	double wait_opt;
};

/*
 * Sites kpctl can hit itself with getpgid(0): in the getpgid function, or
 * in pid_vnr(), which it calls once (pid_vnr(task_pgrp(current))).
 */
static bool trigger_site(const struct probe *p)
{
	return !strcmp(p->func, getpgid_func()) || !strcmp(p->func, "do_getpgid") ||
	       !strcmp(p->func, "__x64_sys_getpgid") || !strcmp(p->func, "pid_vnr");
}

static int read_regs(struct kpctl_bpf *skel, struct kpctl_regs *r)
{
	__u32 key = 0;

	return bpf_map__lookup_elem(skel->maps.regs_out, &key, sizeof(key), r, sizeof(*r), 0);
}

/* One capture: trigger getpgid(0), or wait for the next hit. */
static int capture_once(struct kpctl_bpf *skel, struct probe *p, bool trigger,
			double timeout, struct capture *c)
{
	struct kpctl_regs before, after;
	double t0 = kpx_now_ms();

	if (read_regs(skel, &before))
		return -EIO;
	if (trigger)
		getpgid_self();
	for (;;) {
		if (read_regs(skel, &after))
			return -EIO;
		if (after.seq != before.seq)
			break;
		if (trigger || stop_requested || kpx_now_ms() - t0 > timeout * 1e3)
			return stop_requested ? -EINTR : -ETIMEDOUT;
		usleep(1000);
	}
	memcpy(c->w, after.words, sizeof(c->w));
	c->anchor_sp = after.anchor_sp;
	probe_mechanism(p);
	snprintf(c->mechanism, sizeof(c->mechanism), "%s", p->mechanism);
	c->source = p->mech_source;
	return 0;
}

/* The registers that must agree, and how. */
static bool reg_checked(int i)
{
	return i != REG_SS && i != REG_IP;
}

static int compare(const struct probe *p, const struct capture *c, int n, char *bad,
		   size_t len)
{
	int mismatches = 0;

	bad[0] = '\0';
	for (int i = 0; i < KPCTL_REGS_WORDS; i++) {
		bool ok = true;

		for (int k = 0; k < n; k++) {
			if (i == REG_IP)
				ok &= c[k].w[i] == p->addr + 1;
			else if (i == REG_SP)
				ok &= c[k].anchor_sp && c[0].anchor_sp &&
				      c[k].w[i] - c[k].anchor_sp == c[0].w[i] - c[0].anchor_sp;
			else if (reg_checked(i) && k)
				ok &= c[k].w[i] == c[0].w[i];
		}
		if (ok)
			continue;
		mismatches++;
		snprintf(bad + strlen(bad), len - strlen(bad), "%s%s", mismatches > 1 ? "," : "",
			 reg_names[i]);
	}
	return mismatches;
}

static void print_regs_json(const struct probe *p, const struct capture *c, int n,
			    int mismatches, const char *bad)
{
	struct kpx_json *w = json_begin();
	char names[256], *tok, *save = NULL;

	jw_string_field(w, "spec", p->spec);
	jw_hex_field(w, "addr", p->addr);
	jw_array_field(w, "captures");
	for (int k = 0; k < n; k++) {
		jw_start_object(w);
		json_mech_field(w, "mechanism", c[k].mechanism);
		jw_string_field(w, "mechanism_source", c[k].source ? c[k].source : "none");
		jw_object_field(w, "regs");
		for (int i = 0; i < KPCTL_REGS_WORDS; i++)
			jw_hex_field(w, reg_names[i], c[k].w[i]);
		jw_end_object(w);
		if (n > 1) {
			jw_string_field(w, "anchor", REGS_ANCHOR);
			if (c[k].anchor_sp) {
				jw_hex_field(w, "anchor_sp", c[k].anchor_sp);
				jw_int_field(w, "sp_from_anchor",
					     (long long)(c[k].w[REG_SP] - c[k].anchor_sp));
			} else {
				jw_null_field(w, "anchor_sp");
				jw_null_field(w, "sp_from_anchor");
			}
		}
		jw_end_object(w);
	}
	jw_end_array(w);
	if (n > 1) {
		jw_object_field(w, "compare");
		jw_bool_field(w, "equal", !mismatches);
		jw_array_field(w, "differ");
		snprintf(names, sizeof(names), "%s", bad);
		for (tok = strtok_r(names, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			jw_string(w, tok);
		jw_end_array(w);
		jw_string_field(w, "rule", "15 GPRs, orig_ax, cs, flags equal; sp - anchor_sp equal; "
				 "ip == addr + 1");
		jw_end_object(w);
	}
	json_end();
}

static void print_regs_text(const struct probe *p, const struct capture *c, int n,
			    int mismatches, const char *bad)
{
	printf("%s at 0x%llx\n%-8s", p->spec, (unsigned long long)p->addr, "REG");
	for (int k = 0; k < n; k++)
		printf(" %-18s", c[k].mechanism[0] ? c[k].mechanism : "-");
	printf("%s\n", n > 1 ? " CHECK" : "");
	for (int i = 0; i < KPCTL_REGS_WORDS; i++) {
		bool same = true;

		printf("%-8s", reg_names[i]);
		for (int k = 0; k < n; k++) {
			printf(" 0x%016llx", (unsigned long long)c[k].w[i]);
			same &= c[k].w[i] == c[0].w[i];
		}
		if (n > 1 && i == REG_IP)
			printf(" %s", strstr(bad, "ip") ? "MISMATCH (want addr + 1)" : "= addr + 1");
		else if (n > 1 && i == REG_SP)
			printf(" %s relative to sp at %s's entry",
			       strstr(bad, "sp") ? "MISMATCH" : "equal", REGS_ANCHOR);
		else if (n > 1 && !reg_checked(i))
			printf(" %s", same ? "equal (not checked)" : "differs (not checked)");
		else if (n > 1)
			printf(" %s", same ? "equal" : "MISMATCH");
		printf("\n");
	}
	if (n > 1)
		printf("kpctl: %s\n", mismatches ? "pt_regs DIFFER between the mechanisms" :
		       "pt_regs agree (GPRs, orig_ax, cs, flags, sp from the syscall's entry; "
		       "ip == addr + 1)");
}

static void usage_regs(FILE *f)
{
	fprintf(f,
"Usage: kpctl regs [OPTIONS] SPEC\n"
"\n"
"Capture the pt_regs a BPF kprobe handler sees at SPEC (FUNC[+OFF]) once and\n"
"print them. In the getpgid function kpctl triggers the hit itself with\n"
"getpgid(0); elsewhere it waits for any task to hit the site.\n"
"\n"
"  -c, --compare       capture twice in this process, pinned to one CPU: with\n"
"                      the mechanism the kernel chose, then as int3 (writes 0 to\n"
"                      " KPROBES_OPTIMIZATION ", restored afterwards, also\n"
"                      on error or Ctrl-C). The 15 GPRs, orig_ax, cs and flags\n"
"                      must be equal, sp too relative to sp at the entry of\n"
"                      " REGS_ANCHOR " in the same syscall (a second probe:\n"
"                      the kernel may randomize each syscall's stack offset),\n"
"                      and ip == site + 1 in both; exit 1 if not (ss is shown\n"
"                      but not compared). Needs a triggerable site\n"
"  -t, --timeout S     wait up to S s for a hit (default 10)\n"
"  -w, --wait-opt S    wait up to S s for the probe to be optimized before the\n"
"                      first capture (default 2)\n"
"  -h, --help          this help\n"
"\n"
"Examples:\n"
"  kpctl regs __x64_sys_getpgid+0x20\n"
"  kpctl -j regs --compare __x64_sys_getpgid+0x9\n"
"  kpctl regs --timeout 5 vfs_read+0x10\n");
}

static int parse_regs_opts(int argc, char **argv, struct regs_opts *o)
{
	static const struct option opts[] = {
		{ "compare", no_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "wait-opt", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	char *end;
	double v;
	int c;

	o->timeout = 10;
	o->wait_opt = 2;
	optind = 0;
	while ((c = cmd_getopt(argc, argv, "ct:w:h", opts)) != -1) {
		switch (c) {
		case 'c':
			o->compare = true;
			break;
		case 't':
		case 'w':
			v = strtod(optarg, &end);
			if (*end || !(v >= 0)) {
				errx("bad value '%s' for -%c", optarg, c);
				return EXIT_USAGE;
			}
			*(c == 't' ? &o->timeout : &o->wait_opt) = v;
			break;
		case 'h':
			return show_help(usage_regs);
		default:
			return EXIT_USAGE;	/* said by cmd_getopt() */
		}
	}
	if (argc - optind != 1) {
		errx("regs: want exactly one SPEC");
		usage_regs(stderr);
		return EXIT_USAGE;
	}
	return -1;
}

static void pin_to_this_cpu(void)
{
	cpu_set_t set;
	int cpu = sched_getcpu();

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/*
 * Whether @p runs on int3. Without debugfs kpctl cannot name int3 (only the
 * list tells it from pending): with optimization off, the class trap from
 * the link info then does. (A jmpopt probe queued for unoptimizing reads
 * trap up to one optimizer round early: that capture may still run through
 * its jump, which must agree as well.)
 */
static bool runs_on_int3(const struct probe *p)
{
	if (!strcmp(p->mechanism, "int3"))
		return true;
	return !p->mechanism[0] && !strcmp(p->mech_source, "link_info") &&
	       p->probe_flags == BPF_PERF_PROBE_TRAP;
}

static int wait_int3(struct probe *p, double secs)
{
	double t0 = kpx_now_ms();

	for (;;) {
		probe_mechanism(p);
		if (runs_on_int3(p))
			return 0;
		if (kpx_now_ms() - t0 >= secs * 1e3 || stop_requested)
			return -ETIMEDOUT;
		usleep(20000);
	}
}

/* The int3 capture: optimization off for its duration, restored after. */
static int capture_int3(struct kpctl_bpf *skel, struct probe *p, double timeout,
			struct capture *c)
{
	int old = kpx_sysctl_read(KPROBES_OPTIMIZATION), err;

	if (old < 0) {
		errx("cannot read %s", KPROBES_OPTIMIZATION);
		return -ENOENT;
	}
	err = kpx_sysctl_write(KPROBES_OPTIMIZATION, 0);
	if (err == -EACCES || err == -EPERM) {
		errx_unavailable("cannot write %s: %s", KPROBES_OPTIMIZATION, strerror(-err));
		return err;
	} else if (err) {
		errx("cannot write %s: %s", KPROBES_OPTIMIZATION, strerror(-err));
		return err;
	}
	err = wait_int3(p, 5);
	if (err) {
		err = -EOPNOTSUPP;
		errx("the probe is still %s with optimization off%s",
		     p->mechanism[0] ? p->mechanism : "not known to be int3",
		     !strcmp(p->mechanism, "ftrace") ?
		     ": ftrace-based probes (function entry) have no int3 form to compare" : "");
	} else {
		err = capture_once(skel, p, true, timeout, c);
	}
	if (kpx_sysctl_write(KPROBES_OPTIMIZATION, old))
		errx("could not restore %s to %d", KPROBES_OPTIMIZATION, old);
	return err;
}

static int run_captures(struct kpctl_bpf *skel, struct probe *p, const struct regs_opts *o,
			bool trigger, struct capture *c)
{
	int err;

	wait_mechanism(p, NULL, o->wait_opt);
	err = capture_once(skel, p, trigger, o->timeout, &c[0]);
	if (err) {
		errx("no hit at '%s' within %.0f s%s", p->spec, o->timeout,
		     err == -EINTR ? " (interrupted)" : "");
		return err;
	}
	if (!o->compare)
		return 0;
	err = capture_int3(skel, p, o->timeout, &c[1]);
	if (err == -ETIMEDOUT)
		errx("no int3 hit at '%s'", p->spec);
	return err;
}

int cmd_regs(int argc, char **argv)
{
	struct regs_opts o = {};
	struct kpctl_bpf *skel = NULL;
	struct capture c[2] = {};
	struct probe p, anchor = {};
	char bad[256] = "";
	int ret, n, mismatches = 0;
	bool trigger;

	ret = parse_regs_opts(argc, argv, &o);
	if (ret >= 0)
		return ret;
	if (parse_spec(argv[optind], &p) || p.retprobe) {
		errx("bad probe '%s' (want FUNC, FUNC+OFF or MODULE:FUNC[+OFF])", argv[optind]);
		return EXIT_USAGE;
	}
	trigger = trigger_site(&p);
	if (o.compare && !trigger) {
		errx("--compare needs a site in %s or pid_vnr, which kpctl can trigger itself",
		     getpgid_func());
		return EXIT_USAGE;
	}
	ret = check_probes(&p, 1);
	if (ret >= 0)
		return ret;
	if (require_privileges() || require_kprobes())
		return EXIT_FAIL;
	ret = EXIT_FAIL;
	pin_to_this_cpu();
	skel = open_skel();
	if (!skel)
		return EXIT_FAIL;
	if (trigger)
		skel->rodata->target_tgid = getpid();
	if (load_skel(skel, "kpctl_regs", o.compare ? "kpctl_regs_anchor" : NULL, NULL))
		goto out;
	if (o.compare) {
		parse_spec(REGS_ANCHOR, &anchor);
		ret = attach_probe(skel->progs.kpctl_regs_anchor, &anchor, 0);
		if (ret) {
			attach_failed(&anchor, ret);
			ret = EXIT_FAIL;
			goto out;
		}
	}
	ret = attach_probe(skel->progs.kpctl_regs, &p, 0);
	if (ret) {
		attach_failed(&p, ret);
		ret = EXIT_FAIL;
		goto detach_anchor;
	}
	ret = EXIT_FAIL;
	if (run_captures(skel, &p, &o, trigger, c))
		goto detach;
	n = o.compare ? 2 : 1;
	if (n > 1)
		mismatches = compare(&p, c, n, bad, sizeof(bad));
	if (env.json)
		print_regs_json(&p, c, n, mismatches, bad);
	else
		print_regs_text(&p, c, n, mismatches, bad);
	ret = mismatches ? EXIT_FAIL : EXIT_OK;
detach:
	detach_probe(&p);
detach_anchor:
	detach_probe(&anchor);
out:
	kpctl_bpf__destroy(skel);
	return ret;
}
