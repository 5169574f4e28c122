// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl links: one BPF kprobe link (bpf_program__attach_kprobe_opts, the
 * link's index as BPF cookie) on each of N distinct kernel functions, at
 * their entry. Times every attach and every detach, counts the mechanisms
 * the kernel chose, and checks that no program runs late:
 *
 *   attach all -> activity (--trigger) -> hold -> detach all, one by one ->
 *   membarrier(MEMBARRIER_CMD_GLOBAL), i.e. an RCU grace period ->
 *   links_dead = 1 -> activity (--late) -> grace period -> read links_late.
 *
 * The program counts hits per cookie; once links_dead is set it counts a
 * late run instead (see kpctl.bpf.c). Hits that still grow after the
 * first grace period are late runs too (a run that missed the flag).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "common.h"
#include "kpctl.skel.h"

#define FAST_DETACH	KPX_KNOB_FAST_DETACH
#define MAX_ERRNOS	16
#define MAX_EXAMPLES	8

static const char *const filter_files[] = {
	"/sys/kernel/tracing/available_filter_functions_addrs",
	"/sys/kernel/debug/tracing/available_filter_functions_addrs",
	"/sys/kernel/tracing/available_filter_functions",
	"/sys/kernel/debug/tracing/available_filter_functions",
};

#define NMECH KPX_MECH_NR	/* counted per enum kpx_mech */

struct links_opts {
	long n;
	bool kretprobe;
	bool multi;
	long rounds;
	double trigger_ms;
	double hold_ms;
	double late_ms;
	bool control;
};

struct cand {
	char name[128];
	unsigned long long addr;	/* ftrace site; 0 when unknown */
	bool drop;
};

struct span {
	unsigned long long start, end;
};

struct links_run {
	struct links_opts o;
	struct kpctl_bpf *skel;
	/* candidates */
	struct cand *cands;
	size_t ncands, nlisted, nmodule, ndup, nblack;
	const char *source;
	bool blacklist_read;
	/* links: probes[0..attached) with cookie = index */
	struct probe *probes;
	int attached;
	/* --multi: the one link, and its attach/detach times per round */
	struct bpf_link *mlink;
	int nrounds;
	long failures;
	struct { int err; long count; } errs[MAX_ERRNOS];
	int nerrs;
	struct { char func[128]; int err; } examples[MAX_EXAMPLES];
	int nexamples;
	double *attach_ms, *detach_ms;
	double *seq_ms;		/* --multi: attach then detach times, in round order */
	double settle_total, settle_max;	/* --multi: untimed waits between rounds */
	long enabled_base;	/* enabled_functions before the first attach, or -1 */
	double attach_total, detach_total, gp_ms;
	long mech[NMECH];
	long src_link_info, src_debugfs, src_none;
	int listed_after_detach;
	/* hits and late runs */
	__u64 hits, hits_after_gp, hits_final;
	long functions_hit;
	__u64 late_flagged;
	long long late_runs;	/* -1: not checked */
	__u64 late_cookie;
	bool interrupted;
};

static void usage_links(FILE *f)
{
	fprintf(f,
"Usage: kpctl links [OPTIONS]\n"
"\n"
"Attach one BPF kprobe link (bpf_program__attach_kprobe_opts, BPF cookie = its\n"
"index) at the entry of each of N distinct kernel functions, time every attach\n"
"and every detach (total, p50/p99/max per link), count the mechanisms the\n"
"kernel chose, and check that no program runs after all links are destroyed\n"
"and an RCU grace period has passed (membarrier(MEMBARRIER_CMD_GLOBAL)).\n"
"\n"
"Candidates: the core-kernel functions of available_filter_functions (tracefs),\n"
"less the kprobes blacklist, names that occur more than once, and module\n"
"functions; the getpgid function first, then spread evenly over the list.\n"
"A function the kernel refuses is counted as a failure and the next one tried,\n"
"until N are attached or the candidates run out.\n"
"\n"
"  -n, --count N       functions (default 100, at most %d)\n"
"  -r, --kretprobe     attach return probes instead\n"
"  -m, --multi         one kprobe_multi link over the N functions instead\n"
"                      (bpf_program__attach_kprobe_multi_opts, cookie = the\n"
"                      function's index): the attach and the detach are those\n"
"                      of the one link, and the kernel attaches all N or none\n"
"  -R, --rounds R      with --multi: attach and detach the link R times\n"
"                      (default 1); the activity and the mechanisms are those\n"
"                      of the last round, the times are per round\n"
"  -t, --trigger MS    while attached, run activity (getpgid, fork/exec of\n"
"                      /bin/true, file reads) for MS ms (default 200)\n"
"  -H, --hold MS       then keep the links attached MS ms longer (default 0)\n"
"  -L, --late MS       after detaching and a grace period, run the activity for\n"
"                      MS ms; a program run then is a late run (default 500)\n"
"  -C, --control       negative control: set the dead flag right after\n"
"                      attaching, so that the activity while attached must be\n"
"                      reported as late runs (and exit 1)\n"
"  -h, --help          this help\n"
"\n"
"Exit 1 on a late run, when nothing could be attached, or on Ctrl-C (which\n"
"detaches everything attached so far, also in the middle of attaching).\n"
"\n"
"Examples:\n"
"  kpctl links -n 200\n"
"  kpctl links -n 5 --control    # must report late runs\n"
"  kpctl -j links -n 500 --kretprobe --hold 1000\n"
"  kpctl links --multi -n 1000 --rounds 20\n",
		KPCTL_MAX_PROBES);
}

static int parse_links_opts(int argc, char **argv, struct links_opts *o)
{
	static const struct option opts[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "kretprobe", no_argument, NULL, 'r' },
		{ "multi", no_argument, NULL, 'm' },
		{ "rounds", required_argument, NULL, 'R' },
		{ "trigger", required_argument, NULL, 't' },
		{ "hold", required_argument, NULL, 'H' },
		{ "late", required_argument, NULL, 'L' },
		{ "control", no_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	char *end;
	double v;
	int c;

	o->n = 100;
	o->rounds = 1;
	o->trigger_ms = 200;
	o->late_ms = 500;
	optind = 0;
	while ((c = cmd_getopt(argc, argv, "n:rmR:t:H:L:Ch", opts)) != -1) {
		switch (c) {
		case 'n':
		case 'R':
		case 't':
		case 'H':
		case 'L':
			v = strtod(optarg, &end);
			if (*end || !(v >= 0) || v > 1e9 ||
			    (c == 'n' && (v < 1 || v > KPCTL_MAX_PROBES || v != (long)v)) ||
			    (c == 'R' && (v < 1 || v > 10000 || v != (long)v))) {
				errx("bad value '%s' for -%c (see 'kpctl links --help')", optarg, c);
				return EXIT_USAGE;
			}
			if (c == 'n')
				o->n = v;
			else if (c == 'R')
				o->rounds = v;
			else if (c == 't')
				o->trigger_ms = v;
			else if (c == 'H')
				o->hold_ms = v;
			else
				o->late_ms = v;
			break;
		case 'r':
			o->kretprobe = true;
			break;
		case 'm':
			o->multi = true;
			break;
		case 'C':
			o->control = true;
			break;
		case 'h':
			return show_help(usage_links);
		default:
			return EXIT_USAGE;	/* said by cmd_getopt() */
		}
	}
	if (optind != argc) {
		errx("links: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (o->rounds != 1 && !o->multi) {
		errx("links: --rounds needs --multi");
		return EXIT_USAGE;
	}
	return -1;
}

/* --- candidates ------------------------------------------------------------ */

static int cmp_cand_name(const void *a, const void *b)
{
	const struct cand *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int read_filter_functions(struct links_run *r)
{
	char line[512];
	size_t cap = 0;
	FILE *f = NULL;
	int err = ENOENT;

	for (size_t i = 0; i < sizeof(filter_files) / sizeof(filter_files[0]) && !f; i++) {
		f = fopen(filter_files[i], "r");
		if (f)
			r->source = filter_files[i];
		else if (errno == EACCES || errno == EPERM)
			err = errno;
	}
	/* tracefs is root's: with CAP_BPF and CAP_PERFMON only, kpctl cannot run. */
	if (!f && err != ENOENT) {
		errx_unavailable("links: cannot read available_filter_functions: %s (tracefs "
				 "is root's: run kpctl links as root)", strerror(err));
		return -err;
	}
	if (!f) {
		errx("links: cannot read available_filter_functions under /sys/kernel/tracing "
		     "or /sys/kernel/debug/tracing (tracefs not mounted, or no "
		     "CONFIG_FUNCTION_TRACER/CONFIG_DYNAMIC_FTRACE?)");
		return -ENOENT;
	}
	bool with_addrs = strstr(r->source, "_addrs") != NULL;

	while (fgets(line, sizeof(line), f)) {
		struct cand c = {};
		int got;

		r->nlisted++;
		if (strchr(line, '[')) {	/* "name [module]" */
			r->nmodule++;
			continue;
		}
		if (with_addrs)
			got = sscanf(line, "%llx %127s", &c.addr, c.name) == 2;
		else
			got = sscanf(line, "%127s", c.name) == 1;
		if (!got || strlen(c.name) >= sizeof(c.name) - 1)
			continue;
		if (r->ncands == cap) {
			struct cand *tmp;

			cap = cap ? 2 * cap : 4096;
			tmp = realloc(r->cands, cap * sizeof(*tmp));
			if (!tmp) {
				fclose(f);
				return -ENOMEM;
			}
			r->cands = tmp;
		}
		r->cands[r->ncands++] = c;
	}
	fclose(f);
	return 0;
}

/* Names that occur more than once: the kernel refuses them (EADDRNOTAVAIL). */
static int drop_duplicates(struct links_run *r)
{
	struct cand **v = calloc(r->ncands ? r->ncands : 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < r->ncands; i++)
		v[i] = &r->cands[i];
	qsort(v, r->ncands, sizeof(*v), cmp_cand_name);
	for (size_t i = 0; i + 1 < r->ncands; i++) {
		if (strcmp(v[i]->name, v[i + 1]->name))
			continue;
		v[i]->drop = v[i + 1]->drop = true;
	}
	for (size_t i = 0; i < r->ncands; i++)
		r->ndup += v[i]->drop;
	free(v);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether @addr lies in one of the @n sorted, disjoint spans. */
static bool in_spans(const struct span *v, size_t n, unsigned long long addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (v[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].start <= addr;
}

/*
 * The kprobes blacklist: "0xSTART-0xEND SYMBOL" lines. A candidate is
 * dropped when its name is listed or its ftrace site lies in a range.
 */
static void drop_blacklisted(struct links_run *r)
{
	struct span *spans = NULL;
	char **names = NULL;
	size_t n = 0, cap = 0, k = 0;
	char line[512], name[256];
	FILE *f = fopen(KPROBES_BLACKLIST, "r");

	if (!f)
		return;
	r->blacklist_read = true;
	while (fgets(line, sizeof(line), f)) {
		struct span s;

		if (sscanf(line, "0x%llx-0x%llx %255s", &s.start, &s.end, name) != 3)
			continue;
		if (n == cap) {
			void *a, *b;

			cap = cap ? 2 * cap : 1024;
			a = realloc(spans, cap * sizeof(*spans));
			if (a)
				spans = a;
			b = realloc(names, cap * sizeof(*names));
			if (b)
				names = b;
			if (!a || !b)
				break;
		}
		names[n] = strdup(name);
		if (!names[n])
			break;
		spans[n++] = s;
	}
	fclose(f);
	/* Sorted, overlapping ranges merged; names sorted. */
	if (n) {
		qsort(spans, n, sizeof(*spans), cmp_span);
		for (size_t i = 1; i < n; i++) {
			if (spans[i].start <= spans[k].end) {
				if (spans[i].end > spans[k].end)
					spans[k].end = spans[i].end;
			} else {
				spans[++k] = spans[i];
			}
		}
		k++;
		qsort(names, n, sizeof(*names), cmp_str);
	}
	for (size_t i = 0; i < r->ncands; i++) {
		struct cand *c = &r->cands[i];
		char *key = c->name;

		if (c->drop)
			continue;
		if ((n && bsearch(&key, names, n, sizeof(*names), cmp_str)) ||
		    (c->addr && in_spans(spans, k, c->addr))) {
			c->drop = true;
			r->nblack++;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(spans);
}

static void compact_candidates(struct links_run *r)
{
	size_t k = 0;

	for (size_t i = 0; i < r->ncands; i++)
		if (!r->cands[i].drop)
			r->cands[k++] = r->cands[i];
	r->ncands = k;
}

static int get_candidates(struct links_run *r)
{
	int err = read_filter_functions(r);

	if (err)
		return err;
	err = drop_duplicates(r);
	if (err)
		return err;
	drop_blacklisted(r);
	compact_candidates(r);
	if (!r->ncands) {
		errx("links: no candidate functions in %s", r->source);
		return -ENOENT;
	}
	/* The getpgid function first: the activity surely hits it. */
	const char *first = getpgid_func();

	for (size_t i = 0; i < r->ncands; i++) {
		if (strcmp(r->cands[i].name, first))
			continue;
		struct cand t = r->cands[0];

		r->cands[0] = r->cands[i];
		r->cands[i] = t;
		break;
	}
	return 0;
}

/* --- activity -------------------------------------------------------------- */

static void read_file(const char *path)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

static void spawn_true(void)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return;
	if (!pid) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

/* System calls, process creation, file reads, sleeps: for @ms ms. */
static void activity(double ms)
{
	double t0 = kpx_now_ms();
	struct stat st;
	int fds[2];

	while (!stop_requested && kpx_now_ms() - t0 < ms) {
		for (int i = 0; i < 200; i++)
			getpgid_self();
		read_file("/proc/self/status");
		read_file("/proc/meminfo");
		read_file("/etc/passwd");
		stat("/", &st);
		if (!pipe(fds)) {
			char b = 0;

			if (write(fds[1], &b, 1) == 1 && read(fds[0], &b, 1) < 0)
				b = 1;
			close(fds[0]);
			close(fds[1]);
		}
		spawn_true();
		usleep(1000);
	}
}

/* An RCU grace period: membarrier(MEMBARRIER_CMD_GLOBAL) is synchronize_rcu(). */
static int grace_period(void)
{
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) < 0)
		return -errno;
	return 0;
}

/* --- attach and detach ----------------------------------------------------- */

static void note_failure(struct links_run *r, const char *func, int err)
{
	int i;

	r->failures++;
	for (i = 0; i < r->nerrs && r->errs[i].err != err; i++)
		;
	if (i == r->nerrs && r->nerrs < MAX_ERRNOS)
		r->errs[r->nerrs++].err = err;
	if (i < r->nerrs)
		r->errs[i].count++;
	if (r->nexamples < MAX_EXAMPLES) {
		snprintf(r->examples[r->nexamples].func, sizeof(r->examples[0].func), "%s", func);
		r->examples[r->nexamples++].err = err;
	}
}

/* Errors that are about kpctl or the machine, not about the function. */
static bool fatal_error(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOMEM || err == -EPERM ||
	       err == -EACCES || err == -ENOSPC;
}

/*
 * The order candidates are tried in: 0, s, 2s, ... (mod m), s coprime to m,
 * which visits every candidate once and spreads the first N evenly.
 */
static size_t cand_stride(const struct links_run *r)
{
	size_t m = r->ncands, stride = m / r->o.n;

	if (stride < 1)
		stride = 1;
	while (kpx_gcd(stride, m) != 1)
		stride++;
	return stride;
}

static int attach_links(struct links_run *r)
{
	struct bpf_program *prog = r->skel->progs.kpctl_links;
	size_t m = r->ncands, stride = cand_stride(r);
	double t0 = kpx_now_ms();

	for (size_t k = 0; k < m && r->attached < r->o.n; k++) {
		struct cand *c = &r->cands[(k * stride) % m];
		struct probe *p = &r->probes[r->attached];
		LIBBPF_OPTS(bpf_kprobe_opts, opts,
			.retprobe = r->o.kretprobe,
			.bpf_cookie = r->attached);
		double t;
		int err;

		if (stop_requested) {
			r->interrupted = true;
			errx("interrupted while attaching; detaching the %d attached link(s)",
			     r->attached);
			break;
		}
		memset(p, 0, sizeof(*p));
		snprintf(p->func, sizeof(p->func), "%s", c->name);
		snprintf(p->spec, sizeof(p->spec), "%s%s", c->name,
			 r->o.kretprobe ? "%return" : "");
		p->retprobe = r->o.kretprobe;
		t = kpx_now_ms();
		p->link = bpf_program__attach_kprobe_opts(prog, c->name, &opts);
		err = p->link ? 0 : -errno;
		t = kpx_now_ms() - t;
		if (err) {
			note_failure(r, c->name, err);
			if (err == -EPERM || err == -EACCES) {
				errx_unavailable("links: cannot attach '%s': %s", c->name,
						 attach_error(err));
				break;
			}
			if (fatal_error(err)) {
				errx("links: cannot attach '%s': %s; stopping at %d link(s)",
				     c->name, attach_error(err), r->attached);
				break;
			}
			continue;
		}
		r->attach_ms[r->attached++] = t;
		if (!env.json && isatty(STDERR_FILENO) && r->attached % 50 == 0)
			fprintf(stderr, "\rkpctl: %d/%ld attached", r->attached, r->o.n);
	}
	r->attach_total = kpx_now_ms() - t0;
	if (!env.json && isatty(STDERR_FILENO) && r->attached >= 50)
		fprintf(stderr, "\n");
	return 0;
}

/*
 * --multi --rounds: ftrace's count of patched functions
 * (kpx_enabled_functions()). With the fast detach, a closed
 * link's fprobe stays registered, doing nothing, until the kernel's worker
 * gets to it; a new link over the same functions meanwhile finds their call
 * sites already patched (ftrace's list function) and patches nothing. So a
 * round waits, untimed, until the count is back to what it was before the
 * first attach: each attach then pays what an attach on a quiet kernel pays.
 */
#define SETTLE_TIMEOUT_MS 20000.0

static int settle_enabled(struct links_run *r, long base)
{
	double t0 = kpx_now_ms(), t;
	long n;

	for (;;) {
		n = kpx_enabled_functions();
		t = kpx_now_ms() - t0;
		if (n < 0 || n <= base)
			break;
		if (t > SETTLE_TIMEOUT_MS || stop_requested) {
			errx("links: %ld function(s) still patched %.0f ms after round %d's "
			     "detach (%ld before the first attach)", n, t, r->nrounds, base);
			return -ETIMEDOUT;
		}
		usleep(5000);
	}
	r->settle_total += t;
	if (t > r->settle_max)
		r->settle_max = t;
	return 0;
}

/*
 * --multi: the first N candidates in the same order as for single links,
 * in one kprobe_multi link. The kernel attaches all or none of them, so a
 * refused function fails the round (and the command).
 */
static int attach_multi(struct links_run *r)
{
	struct bpf_program *prog = r->skel->progs.kpctl_links_multi;
	size_t m = r->ncands, stride = cand_stride(r), k;
	const char **syms;
	__u64 *cookies;
	int n = 0, err = 0;

	syms = calloc(r->o.n, sizeof(*syms));
	cookies = calloc(r->o.n, sizeof(*cookies));
	if (!syms || !cookies) {
		errx("out of memory");
		err = -ENOMEM;
		goto out;
	}
	for (k = 0; k < m && n < r->o.n; k++, n++) {
		struct cand *c = &r->cands[(k * stride) % m];
		struct probe *p = &r->probes[n];

		memset(p, 0, sizeof(*p));
		snprintf(p->func, sizeof(p->func), "%s", c->name);
		snprintf(p->spec, sizeof(p->spec), "%s%s", c->name,
			 r->o.kretprobe ? "%return" : "");
		p->retprobe = r->o.kretprobe;
		syms[n] = p->func;
		cookies[n] = n;
	}

	r->enabled_base = kpx_enabled_functions();
	while (r->nrounds < r->o.rounds) {
		LIBBPF_OPTS(bpf_kprobe_multi_opts, opts,
			.syms = syms,
			.cookies = cookies,
			.cnt = n,
			.retprobe = r->o.kretprobe);
		double t;

		if (stop_requested) {
			r->interrupted = true;
			errx("interrupted while attaching");
			break;
		}
		t = kpx_now_ms();
		r->mlink = bpf_program__attach_kprobe_multi_opts(prog, NULL, &opts);
		err = r->mlink ? 0 : -errno;
		t = kpx_now_ms() - t;
		if (err) {
			r->mlink = NULL;
			note_failure(r, syms[0], err);
			if (err == -EPERM || err == -EACCES)
				errx_unavailable("links: cannot attach one kprobe_multi link over "
						 "%d function(s): %s", n, attach_error(err));
			else
				errx("links: cannot attach one kprobe_multi link over %d "
				     "function(s): %s", n, attach_error(err));
			break;
		}
		r->attach_ms[r->nrounds++] = t;
		if (r->nrounds == r->o.rounds)
			break;
		t = kpx_now_ms();
		bpf_link__destroy(r->mlink);
		r->mlink = NULL;
		r->detach_ms[r->nrounds - 1] = kpx_now_ms() - t;
		if (r->enabled_base >= 0) {
			err = settle_enabled(r, r->enabled_base);
			if (err)
				break;
		}
	}
	if (r->mlink)
		r->attached = n;
out:
	free(syms);
	free(cookies);
	return err;
}

static void count_mechanism(struct links_run *r, const char *mech, const char *source)
{
	r->mech[mech && mech[0] ? kpx_mech_from_name(mech) : KPX_MECH_UNKNOWN]++;
	if (!strcmp(source, "link_info"))
		r->src_link_info++;
	else if (!strcmp(source, "debugfs"))
		r->src_debugfs++;
	else
		r->src_none++;
}

/*
 * --multi: the mechanism of each address: its class from
 * bpf_link_info.kprobe_multi.probe_flags, resolved as attach --multi does
 * (the debugfs list read once when a class needs it; a class of 0 is not
 * resolved with debugfs: such a kernel runs every address on its fprobe).
 */
static void note_mechanisms_multi(struct links_run *r)
{
	__u32 *pflags, cnt = r->attached;
	struct kpx_kprobes list = {};
	bool need_list = false, list_read = false;
	__u64 *addrs;
	int err;

	pflags = calloc(r->attached, sizeof(*pflags));
	addrs = calloc(r->attached, sizeof(*addrs));
	if (!pflags || !addrs) {
		errx("out of memory");
		goto out;
	}
	err = kpx_multi_link_info(bpf_link__fd(r->mlink), &cnt, addrs, NULL, pflags, NULL);
	if (err) {
		warnx("links: cannot read the link's info: %s", strerror(-err));
		r->src_none += r->attached;
		r->mech[KPX_MECH_UNKNOWN] += r->attached;
		goto out;
	}
	for (int i = 0; i < r->attached; i++)
		need_list |= class_needs_list(pflags[i]);
	if (need_list)
		list_read = !kpx_kprobes_read(&list);
	/* In the order of the kernel's sorted addresses; only counted here. */
	for (int i = 0; i < r->attached; i++) {
		const struct kpx_kprobe *e = NULL;
		const char *m, *src;

		if (list_read && pflags[i])
			e = kpx_kprobes_find(&list, addrs[i], r->o.kretprobe);
		m = kpx_mech_resolve(pflags[i], e, list_read, &src);
		count_mechanism(r, m, src);
	}
out:
	kpx_kprobes_free(&list);
	free(pflags);
	free(addrs);
}

static void note_mechanisms(struct links_run *r)
{
	probe_mechanisms(r->probes, r->attached);
	for (int i = 0; i < r->attached; i++)
		count_mechanism(r, r->probes[i].mechanism, r->probes[i].mech_source);
}

static void detach_links(struct links_run *r)
{
	double t0 = kpx_now_ms();

	if (r->o.multi) {
		if (r->mlink) {
			bpf_link__destroy(r->mlink);
			r->mlink = NULL;
			r->detach_ms[r->nrounds - 1] = kpx_now_ms() - t0;
		}
		r->detach_total = kpx_now_ms() - t0;
		return;
	}

	for (int i = 0; i < r->attached; i++) {
		double t = kpx_now_ms();

		bpf_link__destroy(r->probes[i].link);
		r->probes[i].link = NULL;
		r->detach_ms[i] = kpx_now_ms() - t;
	}
	r->detach_total = kpx_now_ms() - t0;
}

static int count_listed_kprobes(void)
{
	struct kpx_kprobes l = {};
	int n = kpx_kprobes_read(&l) ? -1 : (int)l.n;

	kpx_kprobes_free(&l);
	return n;
}

/* Hits per cookie: the total, and how many cookies were hit. */
static __u64 read_hits(struct links_run *r, long *functions_hit)
{
	__u64 total = 0;

	if (functions_hit)
		*functions_hit = 0;
	for (int i = 0; i < r->attached; i++) {
		__u64 h = __atomic_load_n(&r->skel->bss->counts[i].hits, __ATOMIC_RELAXED);

		r->probes[i].hits = h;
		total += h;
		if (functions_hit && h)
			(*functions_hit)++;
	}
	return total;
}

/* After every link is gone: a grace period, then nothing may run. */
static int late_check(struct links_run *r)
{
	double t0 = kpx_now_ms();
	int err = grace_period();

	r->gp_ms = kpx_now_ms() - t0;
	r->late_runs = -1;
	if (err) {
		errx("links: cannot wait for an RCU grace period: membarrier(MEMBARRIER_CMD_GLOBAL): "
		     "%s (CONFIG_MEMBARRIER off, or nohz_full); no late-run check",
		     strerror(-err));
		return err;
	}
	r->hits_after_gp = read_hits(r, &r->functions_hit);
	r->hits = r->hits_after_gp;
	__atomic_store_n(&r->skel->bss->links_dead, 1, __ATOMIC_SEQ_CST);
	activity(r->o.late_ms);
	err = grace_period();
	if (err)
		return err;
	r->late_flagged = __atomic_load_n(&r->skel->bss->links_late, __ATOMIC_SEQ_CST);
	r->late_cookie = __atomic_load_n(&r->skel->bss->links_late_cookie, __ATOMIC_SEQ_CST);
	r->hits_final = read_hits(r, NULL);
	r->late_runs = r->late_flagged + (r->hits_final - r->hits_after_gp);
	return 0;
}

/* --- output ---------------------------------------------------------------- */

static const char *err_name(int err)
{
	const char *s = strerrorname_np(-err);

	return s ? s : "E?";
}

static void print_links_json(struct links_run *r, struct kpx_pct a, struct kpx_pct d)
{
	int fast = kpx_sysctl_read(FAST_DETACH);
	struct kpx_json *w = json_begin();

	jw_int_field(w, "n", r->o.n);
	jw_bool_field(w, "kretprobe", r->o.kretprobe);
	jw_bool_field(w, "multi", r->o.multi);
	jw_int_field(w, "rounds", r->o.multi ? r->nrounds : 1);
	jw_bool_field(w, "control", r->o.control);
	jw_string_field(w, "source", r->source);
	jw_uint_field(w, "listed", r->nlisted);
	jw_uint_field(w, "module_functions", r->nmodule);
	jw_uint_field(w, "duplicates", r->ndup);
	jw_uint_field(w, "blacklisted", r->nblack);
	jw_bool_field(w, "blacklist_read", r->blacklist_read);
	jw_uint_field(w, "candidates", r->ncands);
	jw_int_field(w, "attached", r->attached);
	jw_int_field(w, "attach_failures", r->failures);
	jw_object_field(w, "failure_reasons");
	for (int i = 0; i < r->nerrs; i++)
		jw_int_field(w, err_name(r->errs[i].err), r->errs[i].count);
	jw_end_object(w);
	jw_array_field(w, "failed");
	for (int i = 0; i < r->nexamples; i++) {
		jw_start_object(w);
		jw_string_field(w, "func", r->examples[i].func);
		jw_string_field(w, "error", err_name(r->examples[i].err));
		jw_end_object(w);
	}
	jw_end_array(w);
	json_latency(w, "attach_ms", r->attach_total, a);
	json_latency(w, "detach_ms", r->detach_total, d);
	if (r->o.multi && r->seq_ms) {	/* each round, in order */
		jw_array_field(w, "attach_ms_rounds");
		for (int i = 0; i < r->nrounds; i++)
			jw_float(w, 3, r->seq_ms[i]);
		jw_end_array(w);
		jw_array_field(w, "detach_ms_rounds");
		for (int i = 0; i < r->nrounds; i++)
			jw_float(w, 3, r->seq_ms[r->nrounds + i]);
		jw_end_array(w);
	} else if (r->o.multi) {
		jw_null_field(w, "attach_ms_rounds");
		jw_null_field(w, "detach_ms_rounds");
	}
	if (r->o.multi && r->enabled_base >= 0) {
		jw_object_field(w, "settle_ms");
		jw_float_field(w, "total", 3, r->settle_total);
		jw_float_field(w, "max", 3, r->settle_max);
		jw_end_object(w);
	} else if (r->o.multi) {
		jw_null_field(w, "settle_ms");
	}
	jw_float_field(w, "grace_period_ms", 3, r->gp_ms);
	jw_object_field(w, "mechanisms");
	for (int m = 0; m < NMECH; m++)
		if (r->mech[m])
			jw_int_field(w, kpx_mech_name(m), r->mech[m]);
	jw_end_object(w);
	jw_object_field(w, "mechanism_sources");
	jw_int_field(w, "link_info", r->src_link_info);
	jw_int_field(w, "debugfs", r->src_debugfs);
	jw_int_field(w, "none", r->src_none);
	jw_end_object(w);
	jw_uint_field(w, "hits", r->hits);
	jw_int_field(w, "functions_hit", r->functions_hit);
	jw_array_field(w, "functions_hit_sample");
	for (int i = 0, k = 0; i < r->attached && k < 10; i++) {
		if (!r->probes[i].hits)
			continue;
		jw_string(w, r->probes[i].func);
		k++;
	}
	jw_end_array(w);
	if (r->late_runs < 0)
		jw_null_field(w, "late_runs");
	else
		jw_int_field(w, "late_runs", r->late_runs);
	jw_object_field(w, "late_check");
	jw_float_field(w, "activity_ms", 0, r->o.late_ms);
	jw_uint_field(w, "flagged", r->late_flagged);
	jw_uint_field(w, "hits_after_gp", r->hits_final - r->hits_after_gp);
	jw_int_field(w, "last_late_cookie", (long long)r->late_cookie - 1);
	jw_end_object(w);
	jw_int_field(w, "kprobes_listed_after_detach", r->listed_after_detach);
	if (fast < 0)
		jw_null_field(w, "fast_detach");
	else
		jw_int_field(w, "fast_detach", fast);
	json_end();
}

static void print_links_text(struct links_run *r, struct kpx_pct a, struct kpx_pct d)
{
	int fast = kpx_sysctl_read(FAST_DETACH);

	printf("kpctl: %zu candidate function(s) from %s (%zu listed: %zu in modules, "
	       "%zu duplicate names, %zu blacklisted%s)\n", r->ncands, r->source, r->nlisted,
	       r->nmodule, r->ndup, r->nblack, r->blacklist_read ? "" : ", blacklist unreadable");
	if (r->o.multi)
		printf("kpctl: one %s link over %d of %ld function(s), %d round(s), "
		       "%ld failure(s)", r->o.kretprobe ? "kretprobe.multi" : "kprobe.multi",
		       r->attached, r->o.n, r->nrounds, r->failures);
	else
		printf("kpctl: attached %d of %ld %s link(s), %ld failure(s)", r->attached,
		       r->o.n, r->o.kretprobe ? "kretprobe" : "kprobe", r->failures);
	for (int i = 0; i < r->nerrs; i++)
		printf("%s%s x%ld", i ? ", " : ": ", err_name(r->errs[i].err), r->errs[i].count);
	printf("\n");
	for (int i = 0; i < r->nexamples && i < 3; i++)
		printf("  e.g. %s: %s\n", r->examples[i].func, attach_error(r->examples[i].err));
	printf("attach ms: total %.3f  per %s p50 %.3f  p99 %.3f  max %.3f\n",
	       r->attach_total, r->o.multi ? "round" : "link", a.p50, a.p99, a.max);
	printf("detach ms: total %.3f  per %s p50 %.3f  p99 %.3f  max %.3f  (fast detach: %s)\n",
	       r->detach_total, r->o.multi ? "round" : "link", d.p50, d.p99, d.max,
	       fast < 0 ? "no knob" : fast ? "on" : "off");
	printf("mechanisms:");
	for (int m = 0; m < NMECH; m++)
		if (r->mech[m])
			printf(" %s %ld", kpx_mech_name(m), r->mech[m]);
	if (r->o.multi)
		printf("  (from link_info %ld, unknown %ld)\n", r->src_link_info, r->src_none);
	else
		printf("  (from link_info %ld, debugfs %ld, unknown %ld)\n",
		       r->src_link_info, r->src_debugfs, r->src_none);
	printf("kpctl: %ld function(s) hit while attached, %llu hit(s)\n", r->functions_hit,
	       (unsigned long long)r->hits);
	if (r->late_runs < 0)
		printf("kpctl: late runs not checked\n");
	else
		printf("kpctl: %lld late run(s) in %.0f ms of activity after detach and a grace "
		       "period of %.3f ms\n", r->late_runs, r->o.late_ms, r->gp_ms);
}

/* --- the command ----------------------------------------------------------- */

static void free_links(struct links_run *r)
{
	for (int i = 0; i < r->attached; i++)
		bpf_link__destroy(r->probes[i].link);
	bpf_link__destroy(r->mlink);
	free(r->cands);
	free(r->probes);
	free(r->attach_ms);
	free(r->detach_ms);
	free(r->seq_ms);
	kpctl_bpf__destroy(r->skel);
}

static int load_links_skel(struct links_run *r)
{
	r->skel = open_skel();
	if (!r->skel)
		return -1;
	return load_skel(r->skel, r->o.multi ? "kpctl_links_multi" : "kpctl_links", NULL);
}

int cmd_links(int argc, char **argv)
{
	struct links_run *r = calloc(1, sizeof(*r));
	struct kpx_pct a, d;
	int ret;

	if (!r)
		return EXIT_FAIL;
	ret = parse_links_opts(argc, argv, &r->o);
	if (ret >= 0)
		goto out;
	ret = EXIT_FAIL;
	/* Root first: without it, tracefs (the candidates) reads as missing. */
	if (require_privileges() || require_kprobes() || get_candidates(r) ||
	    load_links_skel(r))
		goto out;
	r->probes = calloc(r->o.n, sizeof(*r->probes));
	r->attach_ms = calloc(r->o.multi ? r->o.rounds : r->o.n, sizeof(double));
	r->detach_ms = calloc(r->o.multi ? r->o.rounds : r->o.n, sizeof(double));
	if (!r->probes || !r->attach_ms || !r->detach_ms) {
		errx("out of memory");
		goto out;
	}
	if (r->o.multi)
		attach_multi(r);
	else
		attach_links(r);
	if (!r->interrupted && !stop_requested && r->attached) {
		if (r->o.control)
			__atomic_store_n(&r->skel->bss->links_dead, 1, __ATOMIC_SEQ_CST);
		activity(r->o.trigger_ms);
		if (r->o.hold_ms > 0 && !stop_requested)
			usleep(r->o.hold_ms * 1e3);
		if (r->o.multi)
			note_mechanisms_multi(r);
		else
			note_mechanisms(r);
	}
	detach_links(r);
	r->listed_after_detach = count_listed_kprobes();
	if (r->interrupted || stop_requested) {
		if (!r->interrupted)
			errx("interrupted; all %d link(s) are detached", r->attached);
		goto out;
	}
	if (!r->attached) {
		errx("links: nothing could be attached (%ld failure(s)%s%s)", r->failures,
		     r->nexamples ? ", first: " : "",
		     r->nexamples ? attach_error(r->examples[0].err) : "");
		goto out;
	}
	if (late_check(r) == 0 && !stop_requested)
		ret = r->late_runs ? EXIT_FAIL : EXIT_OK;
	if (r->o.multi) {	/* the rounds' sums, without the activity */
		r->attach_total = r->detach_total = 0;
		for (int i = 0; i < r->nrounds; i++) {
			r->attach_total += r->attach_ms[i];
			r->detach_total += r->detach_ms[i];
		}
		/* kpx_percentiles() sorts: keep the order for the JSON. */
		r->seq_ms = calloc(2 * (size_t)r->nrounds + 1, sizeof(double));
		if (r->seq_ms) {
			memcpy(r->seq_ms, r->attach_ms, r->nrounds * sizeof(double));
			memcpy(r->seq_ms + r->nrounds, r->detach_ms,
			       r->nrounds * sizeof(double));
		}
	}
	a = kpx_percentiles(r->attach_ms, r->o.multi ? r->nrounds : r->attached);
	d = kpx_percentiles(r->detach_ms, r->o.multi ? r->nrounds : r->attached);
	if (env.json)
		print_links_json(r, a, d);
	else
		print_links_text(r, a, d);
	if (r->late_runs > 0 && r->o.control)
		errx("%lld late run(s), as the negative control wants: the dead flag was "
		     "set while attached", r->late_runs);
	else if (r->late_runs > 0)
		errx("%lld late run(s): a program ran after its link was destroyed and a "
		     "grace period had passed (last cookie %lld)", r->late_runs,
		     (long long)r->late_cookie - 1);
	if (stop_requested)
		errx("interrupted during the late-run check");
out:
	free_links(r);
	free(r);
	return ret;
}
