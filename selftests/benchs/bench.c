// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpx-bench: the in-VM half of 'make bench' (selftests/benchs/bench, docs/benchmarks.md).
 * Prints raw measurements as one JSON object per command; the host computes
 * the statistics.
 *
 *   kpx-bench hit     per-hit cost of each mechanism (getpgid loop, baseline
 *                     repetitions interleaved)
 *   kpx-bench scale   the same with 1, 2, 4 threads pinned to distinct CPUs
 *   kpx-bench optwait time from attach to optimized (stock jmp vs callopt)
 *   kpx-bench detach  latency of detaching one link, repeated
 *   kpx-bench links   total time to attach and detach N links
 *
 * Knobs: /proc/sys/debug/kprobes-optimization (0: int3),
 * /sys/kernel/debug/kprobes/callopt (0: stock jump optprobes),
 * /sys/kernel/debug/kprobes/fast_detach (0: stock detach; may be absent).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "kpx.h"
#include "bench.skel.h"

#define KNOB_OPT	KPX_KNOB_OPTIMIZATION
#define KNOB_CALLOPT	KPX_KNOB_CALLOPT
#define KNOB_FASTDET	KPX_KNOB_FAST_DETACH

static bool verbose;

static void vnote(const char *fmt, va_list ap)
{
	fprintf(stderr, "kpx-bench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

static void note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnote(fmt, ap);
	va_end(ap);
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vnote(fmt, ap);
	va_end(ap);
	exit(1);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return verbose ? vfprintf(stderr, fmt, args) : 0;
}

static inline long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void getpgid0(void)
{
	syscall(SYS_getpgid, 0);
}

static void sleep_ms(double ms)
{
	struct timespec ts = { (time_t)(ms / 1e3), (long)((ms - (time_t)(ms / 1e3) * 1e3) * 1e6) };

	nanosleep(&ts, NULL);
}

/* ---- knobs ---------------------------------------------------------------- */

static void write_knob(const char *path, int val)
{
	int err;

	if (val < 0 || access(path, F_OK))
		return;		/* absent knob: nothing to set (reported as such) */
	err = kpx_sysctl_write(path, val);
	if (err)
		die("cannot write %d to %s: %s", val, path, strerror(-err));
}

struct knobs {
	int opt, callopt, fastdet;	/* -1: leave as is */
};

static void set_knobs(const struct knobs *k)
{
	write_knob(KNOB_OPT, k->opt);
	write_knob(KNOB_CALLOPT, k->callopt);
	write_knob(KNOB_FASTDET, k->fastdet);
}

static void restore_knobs(void)
{
	struct knobs k = { 1, 1, 1 };

	set_knobs(&k);
}

/* The knobs' values as found (null: absent in this kernel). */
static void print_knobs_json(struct kpx_json *w)
{
	const char *paths[3] = { KNOB_OPT, KNOB_CALLOPT, KNOB_FASTDET };
	const char *names[3] = { "optimization", "callopt", "fast_detach" };

	jw_object_field(w, "knobs_found");
	for (int i = 0; i < 3; i++) {
		int v = kpx_sysctl_read(paths[i]);

		if (v < 0)
			jw_null_field(w, names[i]);
		else
			jw_int_field(w, names[i], v);
	}
	jw_end_object(w);
}

/* ---- the kprobes list ------------------------------------------------------- */

/* Read again at every look: the kernel changes it under us. */
static struct kpx_kprobes kpl;

static void read_kprobes(void)
{
	int err = kpx_kprobes_read(&kpl);

	if (err)
		die("cannot read %s: %s", KPX_KPROBES_LIST, strerror(-err));
}

static int text_byte(unsigned long long addr);

/* Mechanism of the (non-return) kprobe at @addr; "none" when not listed. */
static const char *mechanism_at(unsigned long long addr, bool ret)
{
	const struct kpx_kprobe *e;

	read_kprobes();
	e = kpx_kprobes_find(&kpl, addr, ret);
	return e ? kpx_debugfs_mech_name(e->flags) : "none";
}

static bool listed(unsigned long long addr)
{
	read_kprobes();
	return kpx_kprobes_find(&kpl, addr, -1) != NULL;
}

/*
 * Whether the probe at @addr is installed as @want. The kprobes list flags a
 * probe [OPTIMIZED] as soon as its optimization is queued; the text at the
 * site tells when the optimizer really installed it: a jmp (0xe9) for the
 * jump optimization, a call (0xe8) for callopt, int3 (0xcc) otherwise.
 */
static bool installed(unsigned long long addr, bool ret, const char *want)
{
	const char *m = mechanism_at(addr, ret);
	int b;

	if (strcmp(m, want))
		return false;
	if (ret || !strcmp(want, "ftrace"))
		return true;
	b = text_byte(addr);
	if (b < 0)
		return true;	/* cannot read text: trust the flags */
	if (!strcmp(want, "jmpopt"))
		return b == 0xe9;
	if (!strcmp(want, "callopt"))
		return b == 0xe8;
	if (!strcmp(want, "int3"))
		return b == 0xcc;
	return true;
}

/* Polls every @poll_ms until the probe at @addr is installed as @want; ms
 * since @t0, or -1 after @timeout_ms. */
static double wait_mech(unsigned long long addr, bool ret, const char *want,
			double timeout_ms, double poll_ms, long long t0)
{
	for (;;) {
		if (installed(addr, ret, want))
			return (now_ns() - t0) / 1e6;
		if ((now_ns() - t0) / 1e6 > timeout_ms)
			return -1;
		sleep_ms(poll_ms);
	}
}

/*
 * Whether a probe is still at @addr. The kprobes list does not show an
 * aggregated probe that lost its last user: a jump-optimized one stays in
 * the kernel's table, optimized, until the optimizer unoptimizes it (after
 * its delay) and frees it (after an RCU-tasks wait), and a new probe there
 * would reuse it. So a site still holding a jmp, a call or int3 counts as
 * busy too (the sites measured here start with none of these).
 */
static bool site_busy(unsigned long long addr, bool text)
{
	int b;

	if (listed(addr))
		return true;
	if (!text)
		return false;
	b = text_byte(addr);
	return b == 0xe9 || b == 0xe8 || b == 0xcc;
}

/* Waits until the kernel freed every probe at @addr (@text: also check the
 * text, for sites that are not the fentry call). */
static double wait_gone(unsigned long long addr, bool text, double timeout_ms)
{
	long long t0 = now_ns();

	while (site_busy(addr, text)) {
		if ((now_ns() - t0) / 1e6 > timeout_ms)
			return -1;
		sleep_ms(2);
	}
	return (now_ns() - t0) / 1e6;
}

/* ---- BPF ------------------------------------------------------------------- */

static struct bench_bpf *skel;		/* kprobe + kretprobe */
static struct bench_bpf *fskel;		/* fentry only, when it loads */
static char fentry_error[160];

static void load_skels(const char *func)
{
	int err;

	skel = bench_bpf__open();
	if (!skel)
		die("cannot open the BPF object: %s", strerror(errno));
	bpf_program__set_autoload(skel->progs.bench_fentry, false);
	err = bench_bpf__load(skel);
	if (err)
		die("cannot load the BPF programs: %s", strerror(-err));

	fskel = bench_bpf__open();
	if (!fskel)
		die("cannot open the BPF object: %s", strerror(errno));
	bpf_program__set_autoload(fskel->progs.bench_kprobe, false);
	bpf_program__set_autoload(fskel->progs.bench_kretprobe, false);
	bpf_program__set_autoload(fskel->progs.bench_kprobe_multi, false);
	bpf_program__set_autoload(fskel->progs.bench_read_text, false);
	err = bpf_program__set_attach_target(fskel->progs.bench_fentry, 0, func);
	if (!err)
		err = bench_bpf__load(fskel);
	if (err) {
		snprintf(fentry_error, sizeof(fentry_error), "fentry at %s does not load: %s",
			 func, strerror(-err));
		note("%s", fentry_error);
		bench_bpf__destroy(fskel);
		fskel = NULL;
	}
}

/* The byte of kernel text at @addr, read by bench_read_text; -1 on error. */
static int text_byte(unsigned long long addr)
{
	struct { __u64 addr; __s32 ret; __u32 pad; } args = { .addr = addr };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &args, .ctx_size_in = sizeof(args));

	if (bpf_prog_test_run_opts(bpf_program__fd(skel->progs.bench_read_text), &opts) ||
	    args.ret)
		return -1;
	return skel->bss->text_buf[0];
}

static unsigned long long hits_of(struct bench_bpf *s)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 v[ncpu > 0 ? ncpu : 1];
	__u32 key = 0;
	unsigned long long sum = 0;

	if (!s || bpf_map__lookup_elem(s->maps.hits, &key, sizeof(key), v, sizeof(v), 0))
		return 0;
	for (int i = 0; i < ncpu; i++)
		sum += v[i];
	return sum;
}

enum kind { K_NONE, K_KPROBE, K_KRETPROBE, K_FENTRY, K_MULTI };

struct link {
	struct bpf_link *link;
	unsigned long long addr;
	bool ret;
	const char *multi_func;	/* K_MULTI: the one function of the link */
};

static void multi_addr(struct link *l, unsigned long long *addr);

static int attach(enum kind kind, const char *func, unsigned long off, struct link *l)
{
	LIBBPF_OPTS(bpf_kprobe_opts, opts, .offset = off, .retprobe = kind == K_KRETPROBE);
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);

	memset(l, 0, sizeof(*l));
	switch (kind) {
	case K_NONE:
		return 0;
	case K_FENTRY:
		if (!fskel)
			return -ENOTSUP;
		l->link = bpf_program__attach_trace(fskel->progs.bench_fentry);
		return l->link ? 0 : -errno;
	case K_MULTI: {
		/* An offset makes the link's one address a kprobe of the link. */
		LIBBPF_OPTS(bpf_kprobe_multi_opts, mopts, .syms = &func, .cnt = 1,
			    .offsets = off ? &off : NULL);

		l->link = bpf_program__attach_kprobe_multi_opts(skel->progs.bench_kprobe_multi,
								NULL, &mopts);
		if (!l->link)
			return -errno;
		if (off)
			multi_addr(l, &l->addr);
		else
			l->multi_func = func;
		return 0;
	}
	default:
		l->link = bpf_program__attach_kprobe_opts(kind == K_KRETPROBE ?
							  skel->progs.bench_kretprobe :
							  skel->progs.bench_kprobe, func, &opts);
		if (!l->link)
			return -errno;
		l->ret = kind == K_KRETPROBE;
		if (!bpf_link_get_info_by_fd(bpf_link__fd(l->link), &info, &len) &&
		    info.type == BPF_LINK_TYPE_PERF_EVENT)
			l->addr = info.perf_event.kprobe.addr;
		return 0;
	}
}

static void detach(struct link *l)
{
	if (l->link)
		bpf_link__destroy(l->link);
	l->link = NULL;
}

/* K_MULTI: the address and class the kernel reports for the link's one address. */
static int multi_info(struct link *l, unsigned long long *addr, __u32 *probe_flags)
{
	__u32 cnt = 1;
	__u64 a = 0;
	int err;

	err = kpx_multi_link_info(bpf_link__fd(l->link), &cnt, &a, NULL, probe_flags, NULL);
	*addr = a;
	return err;
}

/*
 * K_MULTI: the class from the link's info, then the debugfs line at its
 * address (an address at an offset is a kprobe, listed there; the entry is
 * not, and its class ftrace names it): kpx_mech_resolve(). "unreported"
 * when the kernel reports no class, "unknown" when the two disagree.
 */
static const char *multi_mech(struct link *l)
{
	unsigned long long addr;
	const char *name;
	__u32 probe_flags;

	if (multi_info(l, &addr, &probe_flags))
		return "error";
	if (!probe_flags)
		return "unreported";
	read_kprobes();
	name = kpx_mech_resolve(probe_flags, kpx_kprobes_find(&kpl, addr, 0), true, NULL);
	return name ? name : "unknown";
}

/* K_MULTI at an offset: the kprobe's address, for teardown_cfg() to wait on. */
static void multi_addr(struct link *l, unsigned long long *addr)
{
	__u32 probe_flags;

	if (multi_info(l, addr, &probe_flags))
		*addr = 0;
}

/*
 * K_MULTI: whether ftrace still calls an ops at @func (enabled_functions).
 * A kprobe_multi link's fprobe may stay registered, doing nothing, for a
 * while after the detach; the next configuration must not pay for it.
 */
static bool func_enabled(const char *f)
{
	FILE *fp = fopen("/sys/kernel/tracing/enabled_functions", "r");
	size_t n = strlen(f);
	char line[512];
	bool found = false;

	if (!fp)
		return false;
	while (!found && fgets(line, sizeof(line), fp))
		found = !strncmp(line, f, n) && line[n] == ' ';
	fclose(fp);
	return found;
}

static const char *mech_of(enum kind kind, struct link *l)
{
	if (kind == K_NONE)
		return "none";
	if (kind == K_FENTRY)
		return "fentry";
	if (kind == K_MULTI)
		return l->link ? multi_mech(l) : "none";
	return mechanism_at(l->addr, l->ret);
}

/* ---- load threads -------------------------------------------------------------- */

static atomic_bool load_stop;
static atomic_ullong load_calls;
static pthread_t load_threads[64];
static int nload;

static void *load_main(void *arg)
{
	unsigned long long n = 0;

	while (!atomic_load_explicit(&load_stop, memory_order_relaxed)) {
		getpgid0();
		n++;
	}
	atomic_fetch_add(&load_calls, n);
	return NULL;
}

/* @n threads calling getpgid(0) in a loop, not pinned: they preempt each
 * other (and the measuring thread) inside the kernel. */
static void start_load(int n)
{
	atomic_store(&load_stop, false);
	atomic_store(&load_calls, 0);
	nload = n < 64 ? n : 64;
	for (int i = 0; i < nload; i++)
		if (pthread_create(&load_threads[i], NULL, load_main, NULL))
			die("pthread_create: %s", strerror(errno));
}

static unsigned long long stop_load(void)
{
	atomic_store(&load_stop, true);
	for (int i = 0; i < nload; i++)
		pthread_join(load_threads[i], NULL);
	nload = 0;
	return atomic_load(&load_calls);
}

static void pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("cannot pin to CPU %d: %s", cpu, strerror(errno));
}

/* ---- configurations ---------------------------------------------------------- */

enum site { S_ENTRY, S_SINGLE, S_MULTI, S_NONE };
static const char *const site_names[] = { "entry", "single", "multi", "-" };

struct cfg {
	const char *id;
	const char *label;
	enum kind kind;
	enum site site;
	struct knobs knobs;
	const char *want;	/* mechanism expected */
};

static const struct cfg cfgs[] = {
	{ "none", "no probe", K_NONE, S_NONE, { 1, 1, -1 }, "none" },
	{ "int3-single", "int3", K_KPROBE, S_SINGLE, { 0, 1, -1 }, "int3" },
	{ "int3-multi", "int3", K_KPROBE, S_MULTI, { 0, 1, -1 }, "int3" },
	{ "jmp-single", "stock jmp optprobe", K_KPROBE, S_SINGLE, { 1, 0, -1 }, "jmpopt" },
	{ "jmp-multi", "stock jmp optprobe", K_KPROBE, S_MULTI, { 1, 0, -1 }, "jmpopt" },
	{ "callopt-single", "callopt", K_KPROBE, S_SINGLE, { 1, 1, -1 }, "callopt" },
	{ "callopt-multi", "callopt", K_KPROBE, S_MULTI, { 1, 1, -1 }, "callopt" },
	{ "ftrace-entry", "stock kprobe-on-ftrace", K_KPROBE, S_ENTRY, { 1, 0, -1 }, "ftrace" },
	{ "ours-entry", "our entry path", K_KPROBE, S_ENTRY, { 1, 1, -1 }, "ftrace" },
	{ "kretprobe-entry", "kretprobe", K_KRETPROBE, S_ENTRY, { 1, 1, -1 }, "ftrace" },
	{ "fentry-entry", "BPF fentry", K_FENTRY, S_ENTRY, { 1, 1, -1 }, "fentry" },
	{ "multi-entry", "kprobe_multi link (fprobe)", K_MULTI, S_ENTRY, { 1, 1, -1 }, "ftrace" },
	{ "multi-single", "kprobe_multi link, offset", K_MULTI, S_SINGLE, { 1, 1, -1 }, "callopt" },
	{ "multi-multi", "kprobe_multi link, offset", K_MULTI, S_MULTI, { 1, 1, -1 }, "callopt" },
};
#define NCFGS (sizeof(cfgs) / sizeof(cfgs[0]))

static const char *func = "__x64_sys_getpgid";
static unsigned long site_off[3];	/* entry, single, multi */
/* The multi-instruction site may be in another function (--multi-func). */
static const char *multi_func;

static const char *site_func(enum site s)
{
	return s == S_MULTI && multi_func ? multi_func : func;
}

static const struct cfg *find_cfg(const char *id)
{
	for (size_t i = 0; i < NCFGS; i++)
		if (!strcmp(cfgs[i].id, id))
			return &cfgs[i];
	die("unknown configuration '%s'", id);
	return NULL;
}

/* Parses "a,b,c" into @out (at most @max); returns the count. */
static int split_list(char *s, char **out, int max)
{
	int n = 0;

	for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
		out[n++] = tok;
	return n;
}

/*
 * Attaches @c (knobs first, they act at prepare time) and waits up to
 * @timeout_ms for its mechanism. Returns 0, or -errno; *wait_ms gets the
 * wait (-1: the mechanism never showed), @mech what the kernel chose.
 */
static int setup_cfg(const struct cfg *c, struct link *l, double timeout_ms,
		     double *wait_ms, char *mech)
{
	long long t0;
	int err;

	set_knobs(&c->knobs);
	t0 = now_ns();
	err = attach(c->kind, site_func(c->site), c->site == S_NONE ? 0 : site_off[c->site], l);
	if (err) {
		snprintf(mech, 12, "error");
		return err;
	}
	/* A kprobe_multi link's offset site is a kprobe too (l->addr set). */
	if (c->kind == K_KPROBE || c->kind == K_KRETPROBE || (c->kind == K_MULTI && l->addr))
		*wait_ms = wait_mech(l->addr, l->ret, c->want, timeout_ms, 1, t0);
	else
		*wait_ms = 0;
	snprintf(mech, 12, "%s", mech_of(c->kind, l));
	return 0;
}

/*
 * Detaches and waits until the kernel freed the probe (up to 60 s): a new
 * probe at the same address would otherwise reuse the old, still optimized
 * one (reuse_unused_kprobe()) and measure nothing. Returns the ms waited,
 * -1 on timeout.
 */
static double teardown_cfg(const struct cfg *c, struct link *l)
{
	unsigned long long addr = l->addr;
	double ms = 0;

	const char *mf = l->multi_func;

	detach(l);
	if (addr)
		ms = wait_gone(addr, c->site != S_ENTRY, 60000);
	if (mf) {
		long long t0 = now_ns();

		while (func_enabled(mf) && now_ns() - t0 < 60000000000LL)
			sleep_ms(5);
		ms = func_enabled(mf) ? -1 : (now_ns() - t0) / 1e6;
	}
	if (ms < 0)
		note("%s: the probe at 0x%llx was not freed within 60 s", c->id, addr);
	restore_knobs();
	return ms;
}

/* ---- hit: per-hit cost ------------------------------------------------------------ */

struct rep {
	double ns_per_call;
	double hits_per_call;
};

static struct rep time_rep(long calls, struct bench_bpf *s)
{
	unsigned long long h0 = hits_of(s), h1;
	long long t0 = now_ns(), t1;
	struct rep r;

	for (long i = 0; i < calls; i++)
		getpgid0();
	t1 = now_ns();
	h1 = hits_of(s);
	r.ns_per_call = (double)(t1 - t0) / calls;
	r.hits_per_call = (double)(h1 - h0) / calls;
	return r;
}

static void print_reps(struct kpx_json *w, const char *key, struct rep *r, int n, bool hits)
{
	jw_array_field(w, key);
	for (int i = 0; i < n; i++)
		jw_float(w, 3, r[i].ns_per_call);
	jw_end_array(w);
	if (hits) {
		jw_array_field(w, "hits_per_call");
		for (int i = 0; i < n; i++)
			jw_float(w, 4, r[i].hits_per_call);
		jw_end_array(w);
	}
}

/* @name: [@v[0], ... @v[@n - 1]], milliseconds to the microsecond. */
static void print_ms_array(struct kpx_json *w, const char *name, const double *v, long n)
{
	jw_array_field(w, name);
	for (long i = 0; i < n; i++)
		jw_float(w, 3, v[i]);
	jw_end_array(w);
}

static const struct option common_longopts[] = {
	{ "func", required_argument, NULL, 'f' },
	{ "entry", required_argument, NULL, 'E' },
	{ "single", required_argument, NULL, 'S' },
	{ "multi", required_argument, NULL, 'M' },
	{ "multi-func", required_argument, NULL, 'F' },
	{ "calls", required_argument, NULL, 'k' },
	{ "reps", required_argument, NULL, 'r' },
	{ "warmup", required_argument, NULL, 'w' },
	{ "only", required_argument, NULL, 'o' },
	{ "threads", required_argument, NULL, 't' },
	{ "load", required_argument, NULL, 'L' },
	{ "cycles", required_argument, NULL, 'c' },
	{ "sites", required_argument, NULL, 's' },
	{ "n", required_argument, NULL, 'n' },
	{ "mode", required_argument, NULL, 'm' },
	{ "timeout", required_argument, NULL, 'T' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{},
};

struct opts {
	long calls, reps, warmup, cycles, n;
	char *only, *threads, *sites, *mode;
	int load;
	double timeout_ms;
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: kpx-bench COMMAND [OPTIONS]   (in the VM, as root; see docs/benchmarks.md)\n"
"  hit      [--calls K] [--reps R] [--warmup W] [--only CFG,...]\n"
"  scale    [--calls K] [--reps R] [--threads 1,2,4] [--only CFG,...]\n"
"  optwait  [--reps R] [--load L] [--only CFG,...] [--timeout MS]\n"
"  detach   [--cycles C] [--load L] [--only CFG,...]\n"
"  links    --sites FILE -n N --mode stock|ours [--load L] [--timeout MS]\n"
"Sites: --func FUNC --entry OFF --single OFF --multi OFF [--multi-func FUNC]\n"
"       (build/sites.env; the multi-instruction site in FUNC unless --multi-func).\n"
"Configurations (CFG):");
	for (size_t i = 0; i < NCFGS; i++)
		fprintf(f, " %s", cfgs[i].id);
	fprintf(f, "\nOutput: one JSON object on stdout (raw repetitions, ns of CLOCK_MONOTONIC).\n");
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "n:vh", common_longopts, NULL)) != -1) {
		switch (c) {
		case 'f': func = optarg; break;
		case 'E': site_off[S_ENTRY] = strtoul(optarg, &end, 0); break;
		case 'S': site_off[S_SINGLE] = strtoul(optarg, &end, 0); break;
		case 'M': site_off[S_MULTI] = strtoul(optarg, &end, 0); break;
		case 'F': multi_func = optarg; break;
		case 'k': o->calls = strtol(optarg, &end, 0); break;
		case 'r': o->reps = strtol(optarg, &end, 0); break;
		case 'w': o->warmup = strtol(optarg, &end, 0); break;
		case 'c': o->cycles = strtol(optarg, &end, 0); break;
		case 'n': o->n = strtol(optarg, &end, 0); break;
		case 'L': o->load = strtol(optarg, &end, 0); break;
		case 'T': o->timeout_ms = strtod(optarg, &end); break;
		case 'o': o->only = optarg; break;
		case 't': o->threads = optarg; break;
		case 's': o->sites = optarg; break;
		case 'm': o->mode = optarg; break;
		case 'v': verbose = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	/* The entry probe is FUNC+0: the kernel moves it to the fentry site. */
	site_off[S_ENTRY] = 0;
}

static int select_cfgs(char *only, const struct cfg **out, const char *defaults)
{
	char buf[512], *ids[NCFGS];
	int n;

	snprintf(buf, sizeof(buf), "%s", only ? only : defaults);
	n = split_list(buf, ids, NCFGS);
	for (int i = 0; i < n; i++)
		out[i] = find_cfg(ids[i]);
	return n;
}

/* Opens the configuration's object: what it is, before what it measured. */
static void print_cfg_head(struct kpx_json *w, const struct cfg *c)
{
	jw_start_object(w);
	jw_string_field(w, "id", c->id);
	jw_string_field(w, "label", c->label);
	jw_string_field(w, "site", site_names[c->site]);
	jw_string_field(w, "want", c->want);
	jw_name(w, "spec");
	jw_stringf(w, "%s+0x%lx%s", site_func(c->site), c->site == S_NONE ? 0 : site_off[c->site],
		   c->kind == K_KRETPROBE ? "%return" : "");
	jw_object_field(w, "knobs");
	jw_int_field(w, "optimization", c->knobs.opt);
	jw_int_field(w, "callopt", c->knobs.callopt);
	jw_end_object(w);
}

static int cmd_hit(struct opts *o)
{
	const struct cfg *sel[NCFGS];
	int n = select_cfgs(o->only, sel, "int3-single,int3-multi,jmp-single,jmp-multi,"
			    "callopt-single,callopt-multi,ftrace-entry,ours-entry,"
			    "kretprobe-entry,fentry-entry");
	int nb = 0, maxb = 2 * o->reps + n + 1;
	struct rep base[maxb], r[o->reps > 0 ? o->reps : 1];
	struct kpx_json w;

	pin_self(0);
	restore_knobs();
	/* Warm-up: caches, TCG's translated blocks, the page tables. */
	for (int i = 0; i < 2; i++)
		time_rep(o->calls, NULL);
	for (int i = 0; i < o->reps; i++)
		base[nb++] = time_rep(o->calls, NULL);

	jw_init(&w, stdout);
	jw_start_object(&w);
	jw_string_field(&w, "command", "hit");
	jw_int_field(&w, "calls", o->calls);
	jw_int_field(&w, "reps", o->reps);
	jw_int_field(&w, "warmup", o->warmup);
	jw_string_field(&w, "func", func);
	print_knobs_json(&w);
	jw_array_field(&w, "configs");
	for (int i = 0; i < n; i++) {
		const struct cfg *c = sel[i];
		struct bench_bpf *s = c->kind == K_FENTRY ? fskel : skel;
		char mech[12], mech_after[12] = "";
		double wait_ms = 0, freed_ms;
		struct link l;
		int err = setup_cfg(c, &l, o->timeout_ms, &wait_ms, mech);

		print_cfg_head(&w, c);
		if (err) {
			jw_string_field(&w, "error", c->kind == K_FENTRY && fentry_error[0] ?
					fentry_error : strerror(-err));
			jw_end_object(&w);
			restore_knobs();
			continue;
		}
		for (long w = 0; w < o->warmup; w++)
			getpgid0();
		for (int k = 0; k < o->reps; k++)
			r[k] = time_rep(o->calls, s);
		snprintf(mech_after, sizeof(mech_after), "%s", mech_of(c->kind, &l));
		freed_ms = teardown_cfg(c, &l);
		/* A baseline repetition after each configuration: drift. */
		time_rep(o->calls / 4, NULL);
		base[nb++] = time_rep(o->calls, NULL);

		jw_string_field(&w, "mechanism", mech);
		jw_string_field(&w, "mechanism_after", mech_after);
		jw_float_field(&w, "wait_ms", 3, wait_ms);
		jw_float_field(&w, "freed_after_detach_ms", 3, freed_ms);
		print_reps(&w, "ns_per_call", r, o->reps, true);
		jw_end_object(&w);
		fflush(stdout);
	}
	for (int i = 0; i < o->reps; i++)
		base[nb++] = time_rep(o->calls, NULL);
	jw_end_array(&w);
	print_reps(&w, "baseline_ns_per_call", base, nb, false);
	jw_end_object(&w);
	return 0;
}

/* ---- scale: the same probe hit from several CPUs ------------------------------------ */

#define SCALE_PRE 200	/* calls per thread before the start barrier */

struct scale_thread {
	pthread_t th;
	int cpu;
	long calls;
	pthread_barrier_t *bar;
	long long t0, t1;
};

static void *scale_main(void *arg)
{
	struct scale_thread *t = arg;

	pin_self(t->cpu);
	for (int i = 0; i < SCALE_PRE; i++)
		getpgid0();
	pthread_barrier_wait(t->bar);
	t->t0 = now_ns();
	for (long i = 0; i < t->calls; i++)
		getpgid0();
	t->t1 = now_ns();
	return NULL;
}

/* Elapsed ns from the first thread's start to the last one's end. */
static long long scale_rep(int nthreads, long calls)
{
	struct scale_thread t[nthreads];
	pthread_barrier_t bar;
	long long lo = 0, hi = 0;

	pthread_barrier_init(&bar, NULL, nthreads);
	for (int i = 0; i < nthreads; i++) {
		t[i] = (struct scale_thread){ .cpu = i, .calls = calls, .bar = &bar };
		if (pthread_create(&t[i].th, NULL, scale_main, &t[i]))
			die("pthread_create: %s", strerror(errno));
	}
	for (int i = 0; i < nthreads; i++) {
		pthread_join(t[i].th, NULL);
		if (!i || t[i].t0 < lo)
			lo = t[i].t0;
		if (!i || t[i].t1 > hi)
			hi = t[i].t1;
	}
	pthread_barrier_destroy(&bar);
	return hi - lo;
}

static int cmd_scale(struct opts *o)
{
	const struct cfg *sel[NCFGS];
	int n = select_cfgs(o->only, sel, "none,int3-single,jmp-single,callopt-single,"
			    "ftrace-entry,fentry-entry");
	char buf[64], *tok[8];
	int nt, ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct kpx_json w;

	snprintf(buf, sizeof(buf), "%s", o->threads ? o->threads : "1,2,4");
	nt = split_list(buf, tok, 8);
	restore_knobs();
	for (int i = 0; i < 2; i++)
		scale_rep(1, o->calls);
	jw_init(&w, stdout);
	jw_start_object(&w);
	jw_string_field(&w, "command", "scale");
	jw_int_field(&w, "calls_per_thread", o->calls);
	jw_int_field(&w, "reps", o->reps);
	jw_int_field(&w, "cpus", ncpu);
	jw_string_field(&w, "func", func);
	print_knobs_json(&w);
	jw_array_field(&w, "configs");
	for (int i = 0; i < n; i++) {
		const struct cfg *c = sel[i];
		struct bench_bpf *s = c->kind == K_FENTRY ? fskel : skel;
		char mech[12];
		double wait_ms;
		struct link l;
		int err = setup_cfg(c, &l, o->timeout_ms, &wait_ms, mech);

		print_cfg_head(&w, c);
		if (err) {
			jw_string_field(&w, "error", strerror(-err));
			jw_end_object(&w);
			restore_knobs();
			continue;
		}
		jw_string_field(&w, "mechanism", mech);
		jw_array_field(&w, "runs");
		for (int j = 0; j < nt; j++) {
			int threads = atoi(tok[j]);
			unsigned long long h0, h1;
			double hpc;

			jw_start_object(&w);
			jw_int_field(&w, "threads", threads);
			if (threads < 1 || threads > ncpu) {
				jw_name(&w, "error");
				jw_stringf(&w, "only %d CPUs", ncpu);
				jw_end_object(&w);
				continue;
			}
			scale_rep(threads, o->calls / 4);	/* warm-up */
			jw_array_field(&w, "elapsed_ns");
			h0 = hits_of(s);
			for (int k = 0; k < o->reps; k++)
				jw_int(&w, scale_rep(threads, o->calls));
			h1 = hits_of(s);
			jw_end_array(&w);
			/* Each thread also makes SCALE_PRE untimed calls. */
			hpc = c->kind == K_NONE ? 0.0 :
			      (double)(h1 - h0) / (o->reps * threads * (o->calls + SCALE_PRE));
			jw_float_field(&w, "hits_per_call", 4, hpc);
			jw_end_object(&w);
		}
		jw_end_array(&w);
		jw_string_field(&w, "mechanism_after", mech_of(c->kind, &l));
		jw_end_object(&w);
		teardown_cfg(c, &l);
		fflush(stdout);
	}
	jw_end_array(&w);
	jw_end_object(&w);
	return 0;
}

/* ---- optwait: time from attach to optimized --------------------------------------- */

static int cmd_optwait(struct opts *o)
{
	const struct cfg *sel[NCFGS];
	int n = select_cfgs(o->only, sel, "jmp-single,callopt-single,jmp-multi,callopt-multi");
	struct kpx_json w;

	restore_knobs();
	jw_init(&w, stdout);
	jw_start_object(&w);
	jw_string_field(&w, "command", "optwait");
	jw_int_field(&w, "reps", o->reps);
	jw_int_field(&w, "load_threads", o->load);
	jw_int_field(&w, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
	jw_int_field(&w, "poll_ms", 1);
	jw_float_field(&w, "timeout_ms", 0, o->timeout_ms);
	jw_string_field(&w, "func", func);
	print_knobs_json(&w);
	jw_array_field(&w, "configs");
	if (o->load)
		start_load(o->load);
	for (int i = 0; i < n; i++) {
		const struct cfg *c = sel[i];
		double opt_ms[o->reps], attach_ms[o->reps], freed_ms[o->reps];
		char mech[12] = "";

		print_cfg_head(&w, c);
		for (int k = 0; k < o->reps; k++) {
			struct link l;
			long long t0;
			int err;

			set_knobs(&c->knobs);
			t0 = now_ns();
			err = attach(c->kind, site_func(c->site), site_off[c->site], &l);
			attach_ms[k] = (now_ns() - t0) / 1e6;
			if (err)
				die("cannot attach %s: %s", c->id, strerror(-err));
			opt_ms[k] = wait_mech(l.addr, false, c->want, o->timeout_ms, 1, t0);
			snprintf(mech, sizeof(mech), "%s", mech_of(c->kind, &l));
			freed_ms[k] = teardown_cfg(c, &l);
			sleep_ms(20);
		}
		jw_string_field(&w, "mechanism", mech);
		print_ms_array(&w, "attach_ms", attach_ms, o->reps);
		print_ms_array(&w, "optimized_ms", opt_ms, o->reps);
		print_ms_array(&w, "freed_after_detach_ms", freed_ms, o->reps);
		jw_end_object(&w);
		fflush(stdout);
	}
	jw_end_array(&w);
	jw_uint_field(&w, "load_calls", o->load ? stop_load() : 0ULL);
	jw_end_object(&w);
	return 0;
}

/* ---- detach: one link, attach/detach cycles ----------------------------------------- */

static const struct cfg detach_cfgs[] = {
	{ "stock-single", "stock (jmp optprobe, stock detach)", K_KPROBE, S_SINGLE,
	  { 1, 0, 0 }, "jmpopt" },
	{ "ours-single", "ours (callopt, fast detach)", K_KPROBE, S_SINGLE,
	  { 1, 1, 1 }, "callopt" },
	{ "stock-entry", "stock (kprobe-on-ftrace, stock detach)", K_KPROBE, S_ENTRY,
	  { 1, 0, 0 }, "ftrace" },
	{ "ours-entry", "ours (entry, fast detach)", K_KPROBE, S_ENTRY,
	  { 1, 1, 1 }, "ftrace" },
};

static int cmd_detach(struct opts *o)
{
	char buf[256], *ids[8];
	struct kpx_json w;
	int n;

	snprintf(buf, sizeof(buf), "%s", o->only ? o->only :
		 "stock-single,ours-single,stock-entry,ours-entry");
	n = split_list(buf, ids, 8);
	restore_knobs();
	jw_init(&w, stdout);
	jw_start_object(&w);
	jw_string_field(&w, "command", "detach");
	jw_int_field(&w, "cycles", o->cycles);
	jw_int_field(&w, "load_threads", o->load);
	jw_int_field(&w, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
	jw_string_field(&w, "func", func);
	print_knobs_json(&w);
	jw_array_field(&w, "configs");
	if (o->load)
		start_load(o->load);
	for (int i = 0; i < n; i++) {
		const struct cfg *c = NULL;
		double *det = calloc(o->cycles, sizeof(double));
		double *gone = calloc(o->cycles, sizeof(double));
		long not_opt = 0;
		char mech[12] = "";

		for (size_t j = 0; j < sizeof(detach_cfgs) / sizeof(detach_cfgs[0]); j++)
			if (!strcmp(detach_cfgs[j].id, ids[i]))
				c = &detach_cfgs[j];
		if (!c)
			die("unknown detach configuration '%s'", ids[i]);
		for (long k = 0; k < o->cycles; k++) {
			struct link l;
			unsigned long long addr;
			long long t0;
			int err;

			set_knobs(&c->knobs);
			t0 = now_ns();
			err = attach(c->kind, site_func(c->site), site_off[c->site], &l);
			if (err)
				die("cannot attach %s: %s", c->id, strerror(-err));
			if (wait_mech(l.addr, false, c->want, o->timeout_ms, 1, t0) < 0)
				not_opt++;
			snprintf(mech, sizeof(mech), "%s", mech_of(c->kind, &l));
			for (int h = 0; h < 10; h++)
				getpgid0();
			addr = l.addr;
			t0 = now_ns();
			detach(&l);
			det[k] = (now_ns() - t0) / 1e6;
			/* Not timed: until the kernel has freed the probe. */
			gone[k] = wait_gone(addr, c->site != S_ENTRY, 60000);
		}
		restore_knobs();
		jw_start_object(&w);
		jw_string_field(&w, "id", c->id);
		jw_string_field(&w, "label", c->label);
		jw_string_field(&w, "site", site_names[c->site]);
		jw_name(&w, "spec");
		jw_stringf(&w, "%s+0x%lx", site_func(c->site), site_off[c->site]);
		jw_object_field(&w, "knobs");
		jw_int_field(&w, "optimization", c->knobs.opt);
		jw_int_field(&w, "callopt", c->knobs.callopt);
		jw_int_field(&w, "fast_detach", c->knobs.fastdet);
		jw_end_object(&w);
		jw_string_field(&w, "mechanism", mech);
		jw_int_field(&w, "not_optimized_at_detach", not_opt);
		print_ms_array(&w, "detach_ms", det, o->cycles);
		print_ms_array(&w, "freed_after_ms", gone, o->cycles);
		jw_end_object(&w);
		fflush(stdout);
		free(det);
		free(gone);
	}
	jw_end_array(&w);
	jw_uint_field(&w, "load_calls", o->load ? stop_load() : 0ULL);
	jw_end_object(&w);
	return 0;
}

/* ---- links: N links at N distinct functions ---------------------------------------- */

struct lsite {
	char func[128];
	unsigned long off;
	struct link l;
	char mech[12];
};

/*
 * Polls @done(@arg) every 10 ms until it holds: the ms since @t0, or -1
 * when it still does not after @timeout_ms.
 */
static double poll_until(bool (*done)(void *arg), void *arg, long long t0, double timeout_ms)
{
	for (;;) {
		if (done(arg))
			return (now_ns() - t0) / 1e6;
		if ((now_ns() - t0) / 1e6 > timeout_ms)
			return -1;
		sleep_ms(10);
	}
}

/*
 * Whether the optimizer finished: every probe queued for optimization
 * (flagged [OPTIMIZED] from the moment it is queued) has its jmp or call in
 * the text. Probes that cannot be optimized stay int3.
 */
static bool all_optimized(void *arg)
{
	read_kprobes();
	for (size_t i = 0; i < kpl.n; i++) {
		const char *m = kpx_debugfs_mech_name(kpl.v[i].flags);
		int b;

		if (strcmp(m, "jmpopt") && strcmp(m, "callopt"))
			continue;
		b = text_byte(kpl.v[i].addr);
		if (b != 0xe9 && b != 0xe8)
			return false;
	}
	return true;
}

struct lsites_freed {
	const struct lsite *s;
	int n;
	int next;	/* the sites before it are free */
};

/* Whether every site is free again (see site_busy()). */
static bool all_freed(void *arg)
{
	struct lsites_freed *f = arg;

	while (f->next < f->n && (!f->s[f->next].l.addr || !site_busy(f->s[f->next].l.addr, true)))
		f->next++;
	return f->next == f->n;
}

static int cmd_links(struct opts *o)
{
	struct knobs stock = { 1, 0, 0 }, ours = { 1, 1, 1 };
	bool is_stock = o->mode && !strcmp(o->mode, "stock");
	struct lsite *s;
	char line[256];
	int ncand = 0, cap = 0, nok = 0, nfail = 0;
	double attach_ms = 0, attach_wall_ms, opt_ms, detach_ms, freed_ms;
	int counts[6] = {};
	static const char *const mnames[] = { "ftrace", "callopt", "jmpopt", "int3", "none", "other" };
	struct lsites_freed freed;
	struct kpx_json w;
	long long t0, t1;
	FILE *f;

	if (!o->sites || o->n <= 0 || !o->mode ||
	    (strcmp(o->mode, "stock") && strcmp(o->mode, "ours")))
		die("links needs --sites FILE, -n N and --mode stock|ours");
	f = fopen(o->sites, "r");
	if (!f)
		die("cannot read %s: %s", o->sites, strerror(errno));
	s = NULL;
	while (fgets(line, sizeof(line), f)) {
		char *plus;

		line[strcspn(line, "\n")] = '\0';
		if (!*line || *line == '#')
			continue;
		if (ncand == cap) {
			cap = cap ? cap * 2 : 1024;
			s = realloc(s, cap * sizeof(*s));
			if (!s)
				die("out of memory");
		}
		memset(&s[ncand], 0, sizeof(s[ncand]));
		plus = strchr(line, '+');
		if (plus) {
			*plus = '\0';
			s[ncand].off = strtoul(plus + 1, NULL, 0);
		}
		snprintf(s[ncand].func, sizeof(s[ncand].func), "%.127s", line);
		ncand++;
	}
	fclose(f);

	set_knobs(is_stock ? &stock : &ours);
	if (o->load)
		start_load(o->load);
	/* Attach: only successful attaches are timed and counted. */
	t0 = now_ns();
	for (int i = 0; i < ncand && nok < o->n; i++) {
		long long a = now_ns();
		int err = attach(K_KPROBE, s[i].func, s[i].off, &s[i].l);

		if (err) {
			nfail++;
			if (verbose)
				note("%s+0x%lx: %s", s[i].func, s[i].off, strerror(-err));
			continue;
		}
		attach_ms += (now_ns() - a) / 1e6;
		nok++;
	}
	t1 = now_ns();
	attach_wall_ms = (t1 - t0) / 1e6;
	if (nok < o->n)
		note("only %d of %ld links attached (%d candidates refused)", nok, o->n, nfail);
	opt_ms = poll_until(all_optimized, NULL, t0, o->timeout_ms);
	{
		read_kprobes();
		for (int i = 0; i < ncand; i++) {
			const struct kpx_kprobe *e;

			if (!s[i].l.link)
				continue;
			e = kpx_kprobes_find(&kpl, s[i].l.addr, -1);
			snprintf(s[i].mech, sizeof(s[i].mech), "%s",
				 e ? kpx_debugfs_mech_name(e->flags) : "none");
			for (int m = 0; m < 6; m++)
				if (m == 5 || !strcmp(s[i].mech, mnames[m])) {
					counts[m]++;
					break;
				}
		}
	}
	for (int i = 0; i < 10; i++)
		getpgid0();
	t0 = now_ns();
	for (int i = 0; i < ncand; i++)
		if (s[i].l.link)
			detach(&s[i].l);
	detach_ms = (now_ns() - t0) / 1e6;
	freed = (struct lsites_freed){ .s = s, .n = ncand };
	freed_ms = poll_until(all_freed, &freed, t0, o->timeout_ms);
	restore_knobs();
	jw_init(&w, stdout);
	jw_start_object(&w);
	jw_string_field(&w, "command", "links");
	jw_string_field(&w, "mode", o->mode);
	jw_int_field(&w, "n", o->n);
	jw_int_field(&w, "attached", nok);
	jw_int_field(&w, "refused", nfail);
	jw_int_field(&w, "load_threads", o->load);
	jw_int_field(&w, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
	jw_object_field(&w, "knobs");
	jw_int_field(&w, "optimization", 1);
	jw_int_field(&w, "callopt", is_stock ? 0 : 1);
	jw_int_field(&w, "fast_detach", is_stock ? 0 : 1);
	jw_end_object(&w);
	print_knobs_json(&w);
	jw_float_field(&w, "attach_ms", 3, attach_ms);
	jw_float_field(&w, "attach_wall_ms", 3, attach_wall_ms);
	jw_float_field(&w, "all_optimized_ms", 3, opt_ms);
	jw_float_field(&w, "detach_ms", 3, detach_ms);
	jw_float_field(&w, "all_freed_ms", 3, freed_ms);
	jw_object_field(&w, "mechanisms");
	for (int m = 0; m < 6; m++)
		jw_int_field(&w, mnames[m], counts[m]);
	jw_end_object(&w);
	jw_uint_field(&w, "load_calls", o->load ? stop_load() : 0ULL);
	jw_end_object(&w);
	free(s);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = { .calls = 20000, .reps = 5, .warmup = 2000, .cycles = 200,
			  .timeout_ms = 10000 };
	struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
	struct rlimit nofile = { 65536, 65536 };
	const char *cmd;
	int ret;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	cmd = argv[1];
	parse_opts(argc - 1, argv + 1, &o);
	setrlimit(RLIMIT_MEMLOCK, &rl);
	setrlimit(RLIMIT_NOFILE, &nofile);
	libbpf_set_print(libbpf_print);
	load_skels(func);
	if (!strcmp(cmd, "hit"))
		ret = cmd_hit(&o);
	else if (!strcmp(cmd, "scale"))
		ret = cmd_scale(&o);
	else if (!strcmp(cmd, "optwait"))
		ret = cmd_optwait(&o);
	else if (!strcmp(cmd, "detach"))
		ret = cmd_detach(&o);
	else if (!strcmp(cmd, "links"))
		ret = cmd_links(&o);
	else {
		usage(stderr);
		return 2;
	}
	restore_knobs();
	bench_bpf__destroy(skel);
	bench_bpf__destroy(fskel);
	return ret;
}
