// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl stress: worker threads call getpgid(0) in a loop while the
 * controller attaches and detaches BPF kprobes at a set of sites, M times.
 *
 * Exact accounting per interval i (see usage_stress()): a generation counter
 * gen is 4i+1 while the controller attaches, 4i+2 while everything is
 * attached, 4i+3 while it detaches, 4i+4 once all is detached. A worker reads
 * gen before (g1) and after (g2) each call:
 *   - g1 == g2 == 4i+2: the call ran entirely while every probe was armed,
 *     so each probe must have counted it (lower bound);
 *   - g1 <= 4i+3 and g2 >= 4i+1: the call overlapped the interval, so a
 *     probe may have counted it (upper bound).
 * With c the probe's hits per getpgid(0) call, learned from the controller
 * thread's own K calls per interval (which must give exactly c*K every
 * time), the workers' hits must lie in [c*lower, c*upper].
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/membarrier.h>
#include <bpf/libbpf.h>
#include "common.h"
#include "kpctl.skel.h"

#define MAX_SITES 16

/* Mechanisms counted per site (enum kpx_mech); the text output shows the first four. */
#define NMECH KPX_MECH_NR

struct stress_opts {
	char specs[MAX_SITES][256];
	int nsites;
	long iterations;
	double duration;
	int workers;
	bool yield;
	bool pin;
	long trigger;
	double hold_ms;
};

struct site_stats {
	long c;			/* hits per getpgid(0) call; -1 until learned */
	__u64 hits, ctrl_hits, worker_hits, lower, upper, missed;
	long mech[NMECH];	/* per enum kpx_mech */
	const char *mech_source;	/* of the last observation */
	long violations;
};

struct stress {
	struct stress_opts o;
	struct kpctl_bpf *skel;
	struct probe probes[MAX_SITES];
	struct site_stats st[MAX_SITES];
	_Atomic unsigned long gen;
	_Atomic bool done;
	_Atomic unsigned long long *lower;	/* per interval */
	_Atomic unsigned long long *upper;
	_Atomic unsigned long long calls;
	double *attach_ms, *detach_ms;
	size_t nattach, ndetach;
	long intervals;
	long violations;
	char first_violation[256];
	int ncpus;
};

static void count_call(struct stress *s, unsigned long g1, unsigned long g2)
{
	if (g1 == g2 && (g1 & 3) == 2)
		atomic_fetch_add(&s->lower[g1 >> 2], 1);
	for (unsigned long i = g1 >> 2; i <= g2 >> 2 && i < (unsigned long)s->o.iterations; i++)
		if (g1 <= 4 * i + 3 && g2 >= 4 * i + 1)
			atomic_fetch_add(&s->upper[i], 1);
}

struct worker {
	struct stress *s;
	int cpu;
	pthread_t thread;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct stress *s = w->s;

	if (w->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(w->cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	while (!atomic_load(&s->done)) {
		unsigned long g1 = atomic_load(&s->gen), g2;

		getpgid_self();
		g2 = atomic_load(&s->gen);
		count_call(s, g1, g2);
		atomic_fetch_add(&s->calls, 1);
		if (s->o.yield)
			sched_yield();
	}
	return NULL;
}

static void violation(struct stress *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void violation(struct stress *s, const char *fmt, ...)
{
	va_list ap;

	if (!s->violations++) {
		va_start(ap, fmt);
		vsnprintf(s->first_violation, sizeof(s->first_violation), fmt, ap);
		va_end(ap);
	}
}

/* The checks of one interval, once everything is detached again. */
static void check_interval(struct stress *s, long i)
{
	__u64 lower = atomic_load(&s->lower[i]), upper = atomic_load(&s->upper[i]);
	long k = s->o.trigger;

	read_counts(s->skel, s->probes, s->o.nsites);
	for (int j = 0; j < s->o.nsites; j++) {
		struct probe *p = &s->probes[j];
		struct site_stats *st = &s->st[j];
		__u64 w = p->hits - p->ctrl_hits;

		st->hits += p->hits;
		st->ctrl_hits += p->ctrl_hits;
		st->worker_hits += w;
		if (st->c < 0 && p->ctrl_hits % k == 0)
			st->c = p->ctrl_hits / k;
		if ((long)p->ctrl_hits != st->c * k) {
			st->violations++;
			violation(s, "interval %ld: %s counted %llu of the controller's %ld calls "
				  "(want %ld)", i, p->spec, (unsigned long long)p->ctrl_hits, k,
				  st->c * k);
			continue;
		}
		st->lower += st->c * lower;
		st->upper += st->c * upper;
		if (w < st->c * lower || w > st->c * upper) {
			st->violations++;
			violation(s, "interval %ld: %s counted %llu worker hits, want %llu..%llu",
				  i, p->spec, (unsigned long long)w,
				  (unsigned long long)(st->c * lower),
				  (unsigned long long)(st->c * upper));
		}
	}
	reset_counts(s->skel, s->o.nsites);
}

static int attach_sites(struct stress *s)
{
	for (int j = 0; j < s->o.nsites; j++) {
		double t0 = kpx_now_ms();
		int err = attach_probe(s->skel->progs.kpctl_kprobe, &s->probes[j], j);

		if (err) {
			attach_failed(&s->probes[j], err);
			return err;
		}
		s->attach_ms[s->nattach++] = kpx_now_ms() - t0;
	}
	return 0;
}

static void detach_sites(struct stress *s)
{
	for (int j = 0; j < s->o.nsites; j++) {
		double t0;

		if (!s->probes[j].link)
			continue;
		probe_link_info(&s->probes[j]);
		s->st[j].missed += s->probes[j].missed;
		t0 = kpx_now_ms();
		detach_probe(&s->probes[j]);
		s->detach_ms[s->ndetach++] = kpx_now_ms() - t0;
	}
}

static void note_mechanisms(struct stress *s)
{
	probe_mechanisms(s->probes, s->o.nsites);
	for (int j = 0; j < s->o.nsites; j++) {
		s->st[j].mech[kpx_mech_from_name(s->probes[j].mechanism)]++;
		s->st[j].mech_source = s->probes[j].mech_source;
	}
}

static int run_interval(struct stress *s, long i)
{
	int err;

	atomic_store(&s->gen, 4 * i + 1);
	err = attach_sites(s);
	if (!err) {
		atomic_store(&s->gen, 4 * i + 2);
		for (long k = 0; k < s->o.trigger; k++)
			getpgid_self();
		if (s->o.hold_ms > 0)
			usleep(s->o.hold_ms * 1e3);
		note_mechanisms(s);
		atomic_store(&s->gen, 4 * i + 3);
	}
	detach_sites(s);
	/*
	 * A program may still be running, started before the detach, until
	 * an RCU grace period after it returned (the kernel does not wait for
	 * it in the detach path); membarrier(MEMBARRIER_CMD_GLOBAL) waits
	 * one, so the counts are final when they are read.
	 */
	syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
	atomic_store(&s->gen, 4 * i + 4);
	if (!err)
		check_interval(s, i);
	return err;
}

static void print_stress_json(struct stress *s, struct kpx_pct a, struct kpx_pct d, double secs)
{
	struct kpx_json *w = json_begin();

	jw_int_field(w, "iterations", s->intervals);
	jw_int_field(w, "workers", s->o.workers);
	jw_int_field(w, "trigger", s->o.trigger);
	jw_float_field(w, "seconds", 3, secs);
	jw_uint_field(w, "worker_calls", atomic_load(&s->calls));
	/* Attaches and detaches alternate: no phase has a wall time of its own. */
	json_latency(w, "attach_ms", a.total, a);
	json_latency(w, "detach_ms", d.total, d);
	jw_array_field(w, "sites");
	for (int j = 0; j < s->o.nsites; j++) {
		struct site_stats *st = &s->st[j];

		jw_start_object(w);
		jw_string_field(w, "spec", s->probes[j].spec);
		jw_hex_field(w, "addr", s->probes[j].addr);
		jw_int_field(w, "hits_per_call", st->c);
		jw_uint_field(w, "hits", st->hits);
		jw_uint_field(w, "ctrl_hits", st->ctrl_hits);
		jw_uint_field(w, "worker_hits", st->worker_hits);
		jw_uint_field(w, "worker_lower", st->lower);
		jw_uint_field(w, "worker_upper", st->upper);
		jw_uint_field(w, "missed", st->missed);
		jw_int_field(w, "violations", st->violations);
		jw_object_field(w, "mechanisms");
		for (int m = 0; m < NMECH; m++)
			if (st->mech[m])
				jw_int_field(w, kpx_mech_name(m), st->mech[m]);
		jw_end_object(w);
		jw_string_field(w, "mechanism_source", st->mech_source ? st->mech_source : "none");
		jw_end_object(w);
	}
	jw_end_array(w);
	jw_int_field(w, "violations", s->violations);
	jw_string_field(w, "first_violation", s->first_violation);
	json_end();
}

static void print_stress_text(struct stress *s, struct kpx_pct a, struct kpx_pct d, double secs)
{
	printf("kpctl: %ld interval(s) in %.1f s, %d worker(s), %llu worker calls, "
	       "%ld controller calls per interval\n", s->intervals, secs, s->o.workers,
	       (unsigned long long)atomic_load(&s->calls), s->o.trigger);
	printf("attach ms: p50 %.3f  p99 %.3f  max %.3f  (%zu)\n", a.p50, a.p99, a.max,
	       s->nattach);
	printf("detach ms: p50 %.3f  p99 %.3f  max %.3f  (%zu)\n", d.p50, d.p99, d.max,
	       s->ndetach);
	printf("%-28s %5s %10s %10s %21s %7s %6s  %s\n", "SITE", "HIT/C", "HITS", "WORKER",
	       "WORKER BOUNDS", "MISSED", "ERRORS", "MECHANISMS (f/c/j/i/other)");
	for (int j = 0; j < s->o.nsites; j++) {
		struct site_stats *st = &s->st[j];
		char bounds[32];
		long other = 0;

		snprintf(bounds, sizeof(bounds), "%llu..%llu", (unsigned long long)st->lower,
			 (unsigned long long)st->upper);
		for (int m = 4; m < NMECH; m++)
			other += st->mech[m];
		printf("%-28s %5ld %10llu %10llu %21s %7llu %6ld  %ld/%ld/%ld/%ld/%ld\n",
		       s->probes[j].spec, st->c, (unsigned long long)st->hits,
		       (unsigned long long)st->worker_hits, bounds,
		       (unsigned long long)st->missed, st->violations, st->mech[0],
		       st->mech[1], st->mech[2], st->mech[3], other);
	}
	if (s->violations)
		printf("kpctl: %ld accounting violation(s); first: %s\n", s->violations,
		       s->first_violation);
	else
		printf("kpctl: hit accounting exact in every interval\n");
}

static void usage_stress(FILE *f)
{
	fprintf(f,
"Usage: kpctl stress [OPTIONS]\n"
"\n"
"Worker threads call getpgid(0) in a loop while the controller thread\n"
"attaches BPF kprobes at all sites, calls getpgid(0) K times itself, and\n"
"detaches them again, for M intervals. Reports attach and detach latency\n"
"(p50/p99/max per link), hits, kprobe misses, and the mechanisms seen.\n"
"\n"
"Hit accounting (exit 1 on any violation):\n"
"  - the controller's K calls per interval run entirely while every probe is\n"
"    armed: a probe must count exactly c*K of them, c (its hits per getpgid(0)\n"
"    call, usually 1, 0 for sites getpgid(0) does not reach) being the same\n"
"    in every interval; a lost or doubled hit breaks this;\n"
"  - workers read a generation counter before and after each call; calls that\n"
"    ran entirely while all probes were armed must all be counted, and no\n"
"    call that did not overlap the interval may be: the workers' hits must\n"
"    lie in [c*lower, c*upper].\n"
"\n"
"  -s, --site SPEC       a site (repeatable, or comma-separated; at most %d);\n"
"                        default: the getpgid function's entry, its first\n"
"                        boundary after the fentry call and its first\n"
"                        instruction of >= 5 bytes that is no branch\n"
"  -n, --iterations M    intervals (default 100)\n"
"  -d, --duration S      stop after S seconds even if M is not reached\n"
"  -W, --workers N       worker threads (default: online CPUs)\n"
"  -y, --yield           workers call sched_yield() after each getpgid\n"
"  -p, --pin             pin worker w to CPU w %% CPUs, the controller to CPU 0\n"
"  -k, --trigger K       controller calls per interval (>= 1, default 100)\n"
"  -H, --hold MS         keep the probes attached MS ms longer per interval\n"
"  -h, --help            this help\n"
"\n"
"Examples:\n"
"  kpctl stress --iterations 200 --workers 4 --yield\n"
"  kpctl -j stress -s __x64_sys_getpgid+0x20 -n 50 --pin --hold 5\n",
		MAX_SITES);
}

static int add_sites(struct stress_opts *o, const char *arg)
{
	char buf[1024], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (o->nsites == MAX_SITES) {
			errx("stress: at most %d sites", MAX_SITES);
			return -1;
		}
		snprintf(o->specs[o->nsites++], sizeof(o->specs[0]), "%s", tok);
	}
	return 0;
}

static int parse_stress_opts(int argc, char **argv, struct stress_opts *o)
{
	static const struct option opts[] = {
		{ "site", required_argument, NULL, 's' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "workers", required_argument, NULL, 'W' },
		{ "yield", no_argument, NULL, 'y' },
		{ "pin", no_argument, NULL, 'p' },
		{ "trigger", required_argument, NULL, 'k' },
		{ "hold", required_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	char *end;
	double v;
	int c;

	o->iterations = 100;
	o->workers = sysconf(_SC_NPROCESSORS_ONLN);
	o->trigger = 100;
	optind = 0;
	while ((c = cmd_getopt(argc, argv, "s:n:d:W:ypk:H:h", opts)) != -1) {
		switch (c) {
		case 's':
			if (add_sites(o, optarg))
				return EXIT_USAGE;
			break;
		case 'n':
		case 'd':
		case 'W':
		case 'k':
		case 'H':
			v = strtod(optarg, &end);
			if (*end || !(v >= 0) || (c == 'n' && v < 1) ||
			    (c == 'k' && v < 1) || (c != 'd' && c != 'H' && v != floor(v)) ||
			    v > 1e9) {
				errx("bad value '%s' for -%c (see 'kpctl stress --help')", optarg, c);
				return EXIT_USAGE;
			}
			if (c == 'n')
				o->iterations = v;
			else if (c == 'd')
				o->duration = v;
			else if (c == 'W')
				o->workers = v;
			else if (c == 'k')
				o->trigger = v;
			else
				o->hold_ms = v;
			break;
		case 'y':
			o->yield = true;
			break;
		case 'p':
			o->pin = true;
			break;
		case 'h':
			return show_help(usage_stress);
		default:
			return EXIT_USAGE;	/* said by cmd_getopt() */
		}
	}
	if (optind != argc) {
		errx("stress: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	return -1;
}

/*
 * The sites: the --site SPECs, checked before anything is loaded (a bad
 * one is bad usage, exit 2; one past its function's end is refused, exit
 * 1); without --site (@loaded: once the programs are), the default sites
 * of the getpgid function, read from the running kernel's text.
 */
static int setup_sites(struct stress *s, bool loaded)
{
	if (!s->o.nsites && !loaded)
		return -1;
	if (loaded)
		s->o.nsites = default_getpgid_sites(s->skel, s->o.specs, MAX_SITES);
	if (s->o.nsites <= 0) {
		errx("stress: cannot find default sites in %s; give --site", getpgid_func());
		return EXIT_FAIL;
	}
	for (int j = 0; j < s->o.nsites; j++) {
		if (parse_spec(s->o.specs[j], &s->probes[j]) || s->probes[j].retprobe) {
			errx("bad site '%s' (want FUNC, FUNC+OFF or MODULE:FUNC[+OFF])",
			     s->o.specs[j]);
			return EXIT_USAGE;
		}
		s->st[j].c = -1;
	}
	return check_probes(s->probes, s->o.nsites);
}

static int alloc_stress(struct stress *s)
{
	size_t m = s->o.iterations;

	s->lower = calloc(m, sizeof(*s->lower));
	s->upper = calloc(m, sizeof(*s->upper));
	s->attach_ms = calloc(m * s->o.nsites, sizeof(double));
	s->detach_ms = calloc(m * s->o.nsites, sizeof(double));
	return s->lower && s->upper && s->attach_ms && s->detach_ms ? 0 : -ENOMEM;
}

static void free_stress(struct stress *s)
{
	free(s->lower);
	free(s->upper);
	free(s->attach_ms);
	free(s->detach_ms);
	kpctl_bpf__destroy(s->skel);
}

static int load_stress_skel(struct stress *s)
{
	s->skel = open_skel();
	if (!s->skel)
		return -1;
	s->skel->rodata->target_tgid = getpid();
	s->skel->rodata->ctrl_tid = syscall(SYS_gettid);
	return load_skel(s->skel, "kpctl_kprobe", "kpctl_read_text", NULL);
}

static void pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static int run_stress(struct stress *s, struct worker *w)
{
	double t0 = kpx_now_ms();
	int err = 0, started = 0;

	for (int k = 0; k < s->o.workers; k++) {
		w[k].s = s;
		w[k].cpu = s->o.pin ? k % s->ncpus : -1;
		if (pthread_create(&w[k].thread, NULL, worker_main, &w[k]))
			break;
		started++;
	}
	for (long i = 0; i < s->o.iterations && !stop_requested; i++) {
		if (s->o.duration > 0 && kpx_now_ms() - t0 > s->o.duration * 1e3)
			break;
		err = run_interval(s, i);
		if (err)
			break;
		s->intervals++;
	}
	atomic_store(&s->done, true);
	for (int k = 0; k < started; k++)
		pthread_join(w[k].thread, NULL);
	if (stop_requested)
		errx("interrupted after %ld interval(s); everything is detached", s->intervals);
	return err;
}

int cmd_stress(int argc, char **argv)
{
	struct stress *s = calloc(1, sizeof(*s));
	struct worker *w = NULL;
	struct kpx_pct a, d;
	int ret;
	double t0;

	if (!s)
		return EXIT_FAIL;
	ret = parse_stress_opts(argc, argv, &s->o);
	if (ret >= 0)
		goto out;
	ret = setup_sites(s, false);
	if (ret >= 0)
		goto out;
	ret = EXIT_FAIL;
	s->ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (s->o.pin)
		pin_self(0);
	if (require_privileges() || require_kprobes() || load_stress_skel(s))
		goto out;
	/* Without --site: the default sites, now that they can be read. */
	ret = s->o.nsites ? -1 : setup_sites(s, true);
	if (ret >= 0)
		goto out;
	ret = EXIT_FAIL;
	w = calloc(s->o.workers ? s->o.workers : 1, sizeof(*w));
	if (!w || alloc_stress(s)) {
		errx("out of memory");
		goto out;
	}
	t0 = kpx_now_ms();
	if (run_stress(s, w) || stop_requested)
		goto out;
	a = kpx_percentiles(s->attach_ms, s->nattach);
	d = kpx_percentiles(s->detach_ms, s->ndetach);
	if (env.json)
		print_stress_json(s, a, d, (kpx_now_ms() - t0) / 1e3);
	else
		print_stress_text(s, a, d, (kpx_now_ms() - t0) / 1e3);
	ret = s->violations ? EXIT_FAIL : EXIT_OK;
out:
	free(w);
	free_stress(s);
	free(s);
	return ret;
}
