// SPDX-License-Identifier: GPL-2.0
/*
 * kpx-detach-race: detach a BPF kprobe program while it runs on another CPU,
 * close its object, and check what detach promises.
 *
 *   kpx-detach-race [-j] [-p PATH] [-n ROUNDS] [-l LOOPS] [-w WAIT_MS]
 *                   [-f FUNC] [-o OFFSET] [--control] [--count-gp]
 *
 * A worker thread on CPU 1 calls getpgid() in a loop; the program
 * (detach_race.bpf.c) is attached to FUNC+OFFSET and, in the worker's
 * process only, counts each run that starts and ends, and between the two
 * runs a bpf_loop() of LOOPS loads that fault and are fixed up by its
 * exception table. Each round, on CPU 0: load a new object, attach, wait
 * until a run is in progress (LOOPS > 0) or ten runs ended (LOOPS = 0),
 * detach by PATH, read the counts, close the object (and the link), wait
 * WAIT_MS, read the counts again.
 *
 * PATH is how the program is attached and detached:
 *   perf         kprobe PMU + BPF_LINK_CREATE, close(link)   (libbpf default)
 *   link-detach  the same, BPF_LINK_DETACH, then close(link) after the object
 *   legacy       tracefs kprobe event + PERF_EVENT_IOC_SET_BPF; the object is
 *                closed first, then the perf fd, whose detach drops the
 *                program's last reference (a tracefs event's perf close
 *                waits for grace periods of its own, after the detach)
 *   tail         perf, with the counting program reached by a tail call
 *   multi        kprobe_multi link at FUNC, close(link)
 *   multi-offset kprobe_multi link at FUNC+OFFSET (OFFSET > 0)
 *
 * What detach promises (stock's meaning): once it returns, no run of the
 * program is in progress and none starts. A round violates it when a run
 * started before the detach had not ended when the detach returned
 * (in_flight), or when a run started after it (late_starts). --control
 * reads the counts before detaching instead (a negative control: the
 * worker keeps the program running, so every round must count late
 * starts): it reads twice, WAIT_MS apart, before the detach.
 *
 * --count-gp counts the grace-period waits (synchronize_rcu() and the
 * like, gp_count.bpf.c) that the detaching thread makes inside the
 * detaches: a number that does not depend on how busy the host is, where
 * a latency under TCG does.
 *
 * Exit 0 when no round violated the promise, 1 when one did, 2 on an
 * error. A kernel that frees what a running program needs oopses during
 * the run instead (BUG: unable to handle page fault, RIP in the program).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "kpx.h"
#include "detach_race.skel.h"
#include "gp_count.skel.h"

#define TRACEFS "/sys/kernel/tracing"

enum path { P_PERF, P_LINK_DETACH, P_LEGACY, P_TAIL, P_MULTI, P_MULTI_OFFSET, P_NR };

static const char *const path_names[P_NR] = {
	"perf", "link-detach", "legacy", "tail", "multi", "multi-offset",
};

struct run_state {
	__u64 enter, exit, sum;
};

static struct {
	enum path path;
	int rounds, loops, wait_ms;
	const char *func;
	unsigned long offset;
	bool control, json, count_gp;
} opt = {
	.path = P_PERF, .rounds = 100, .loops = 1000, .wait_ms = 20,
	.func = "__x64_sys_getpgid",
};

static atomic_bool stop;

static void usage(FILE *f)
{
	fprintf(f,
"Usage: kpx-detach-race [-j] [-p PATH] [-n ROUNDS] [-l LOOPS] [-w WAIT_MS]\n"
"                       [-f FUNC] [-o OFFSET] [--control]\n"
"  -p, --path PATH     perf, link-detach, legacy, tail, multi, multi-offset\n"
"                      (default perf)\n"
"  -n, --rounds N      rounds (default 100)\n"
"  -l, --loops N       faulting loads per run (default 1000; 0: a counting\n"
"                      program)\n"
"  -w, --wait-ms MS    wait after the close before the second read (20)\n"
"  -f, --func FUNC     the probed function, reached by getpgid()\n"
"                      (default __x64_sys_getpgid)\n"
"  -o, --offset OFF    probe FUNC+OFF (multi-offset needs OFF > 0)\n"
"      --control       read the counts before detaching (negative control)\n"
"      --count-gp      count the grace-period waits inside the detaches\n"
"  -j, --json          one JSON object on stdout\n");
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) ? -1 : 0;
}

static void *worker(void *arg)
{
	if (pin(1))
		fprintf(stderr, "kpx-detach-race: cannot pin the worker to CPU 1\n");
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		syscall(SYS_getpgid, 0);
	return NULL;
}

static int read_state(int fd, struct run_state *s)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(fd, &zero, s) ? -errno : 0;
}

/* A tracefs kprobe event for the legacy path; its id, or -errno. */
static int legacy_event(const char *name, const char *func, unsigned long off, bool add)
{
	char buf[256], path[256];
	int fd, n, err = 0;

	fd = open(TRACEFS "/kprobe_events", O_WRONLY | O_APPEND);
	if (fd < 0)
		return -errno;
	if (add)
		n = snprintf(buf, sizeof(buf), "p:kpx_race/%s %s+%lu\n", name, func, off);
	else
		n = snprintf(buf, sizeof(buf), "-:kpx_race/%s\n", name);
	if (write(fd, buf, n) != n)
		err = -errno;
	close(fd);
	if (err || !add)
		return err;
	snprintf(path, sizeof(path), TRACEFS "/events/kpx_race/%s/id", name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	return atoi(buf);
}

struct round {
	struct detach_race_bpf *skel;
	struct bpf_link *link;
	int state_fd;
	char event[64];
};

static int attach(struct round *r, struct bpf_program *prog)
{
	LIBBPF_OPTS(bpf_kprobe_opts, kopts, .offset = opt.offset);
	LIBBPF_OPTS(bpf_kprobe_multi_opts, mopts);
	LIBBPF_OPTS(bpf_perf_event_opts, popts, .force_ioctl_attach = true);
	struct perf_event_attr attr = {};
	unsigned long off = opt.offset;
	int id, pfd;

	switch (opt.path) {
	case P_PERF:
	case P_LINK_DETACH:
	case P_TAIL:
		r->link = bpf_program__attach_kprobe_opts(prog, opt.func, &kopts);
		break;
	case P_MULTI:
	case P_MULTI_OFFSET:
		mopts.syms = &opt.func;
		mopts.cnt = 1;
		if (opt.path == P_MULTI_OFFSET)
			mopts.offsets = &off;
		r->link = bpf_program__attach_kprobe_multi_opts(prog, NULL, &mopts);
		break;
	case P_LEGACY:
		snprintf(r->event, sizeof(r->event), "r%d", getpid());
		id = legacy_event(r->event, opt.func, opt.offset, true);
		if (id < 0) {
			r->event[0] = 0;
			errno = -id;
			return -1;
		}
		attr.size = sizeof(attr);
		attr.type = PERF_TYPE_TRACEPOINT;
		attr.config = id;
		attr.sample_period = 1;
		attr.wakeup_events = 1;
		pfd = syscall(SYS_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
		if (pfd < 0)
			return -1;
		/* PERF_EVENT_IOC_SET_BPF, then PERF_EVENT_IOC_ENABLE. */
		r->link = bpf_program__attach_perf_event_opts(prog, pfd, &popts);
		if (!r->link)
			close(pfd);
		break;
	default:
		errno = EINVAL;
		return -1;
	}
	return r->link ? 0 : -1;
}

/* The detach of PATH; what remains to close is closed by finish(). */
static int detach(struct round *r)
{
	int err = 0;

	if (opt.path == P_LINK_DETACH) {
		err = bpf_link__detach(r->link);
	} else {
		err = bpf_link__destroy(r->link);
		r->link = NULL;
	}
	return err ? -errno : 0;
}

static int finish(struct round *r)
{
	int err = 0;

	if (r->skel)
		detach_race_bpf__destroy(r->skel);
	r->skel = NULL;
	if (r->link && bpf_link__destroy(r->link))
		err = -errno;
	r->link = NULL;
	if (r->event[0] && legacy_event(r->event, NULL, 0, false) && !err)
		err = -EBUSY;
	r->event[0] = 0;
	return err;
}

static struct bpf_program *setup(struct round *r)
{
	struct detach_race_bpf *skel;
	struct bpf_program *prog, *p;
	int err;

	skel = detach_race_bpf__open();
	if (!skel)
		return NULL;
	r->skel = skel;
	skel->rodata->loops = opt.loops;
	skel->rodata->target_tgid = getpid();
	switch (opt.path) {
	case P_MULTI:
	case P_MULTI_OFFSET:
		prog = skel->progs.race_multi;
		break;
	case P_TAIL:
		prog = skel->progs.race_tail;
		break;
	default:
		prog = skel->progs.race_kprobe;
	}
	bpf_object__for_each_program(p, skel->obj)
		bpf_program__set_autoload(p, p == prog ||
					  (opt.path == P_TAIL && p == skel->progs.race_tail_target));
	err = detach_race_bpf__load(skel);
	if (err) {
		errno = -err;
		return NULL;
	}
	if (opt.path == P_TAIL) {
		__u32 zero = 0;
		int fd = bpf_program__fd(skel->progs.race_tail_target);

		if (bpf_map_update_elem(bpf_map__fd(skel->maps.jmp), &zero, &fd, BPF_ANY))
			return NULL;
	}
	/* Kept past the object's close, to count the runs that go on. */
	r->state_fd = dup(bpf_map__fd(skel->maps.state));
	if (r->state_fd < 0)
		return NULL;
	return prog;
}

/* Until a run is in progress (loops > 0) or ten ended; 0 or -ETIMEDOUT. */
static int wait_running(int fd)
{
	double t0 = kpx_now_ms();
	struct run_state s;

	for (;;) {
		if (read_state(fd, &s))
			return -errno;
		if (opt.loops ? s.enter > s.exit : s.exit >= 10)
			return 0;
		if (kpx_now_ms() - t0 > 10000)
			return -ETIMEDOUT;
		sched_yield();
	}
}

#define GP_NR 8

/* In the order of gp_count.bpf.c's waits[]. */
static const char *const gp_names[GP_NR] = {
	"__wait_rcu_gp", "synchronize_rcu", "synchronize_rcu_expedited",
	"synchronize_srcu", "synchronize_srcu_expedited", "synchronize_rcu_tasks",
	"synchronize_rcu_tasks_trace", "synchronize_rcu_tasks_rude",
};

/*
 * The grace-period counters, for this thread. A wait the kernel does not
 * have (its config) is left out; one it has must attach.
 */
static struct gp_count_bpf *gp_count_open_attach(void)
{
	struct gp_count_bpf *gp;
	struct bpf_program *p;
	int err, n = 0, count;

	gp = gp_count_bpf__open();
	if (!gp) {
		fprintf(stderr, "kpx-detach-race: gp_count: open: %s\n", strerror(errno));
		return NULL;
	}
	gp->rodata->tid = syscall(SYS_gettid);
	bpf_object__for_each_program(p, gp->obj) {
		const char *fn = bpf_program__name(p) + strlen("gp_");

		if (kpx_kallsyms_load() == 0 && !kpx_ksym_find(fn, &count))
			bpf_program__set_autoload(p, false);
		else
			n++;
	}
	err = n ? gp_count_bpf__load(gp) : -ENOENT;
	if (!err)
		err = gp_count_bpf__attach(gp);
	if (err) {
		fprintf(stderr, "kpx-detach-race: gp_count: %s\n", strerror(-err));
		gp_count_bpf__destroy(gp);
		return NULL;
	}
	return gp;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "path", required_argument, NULL, 'p' },
		{ "rounds", required_argument, NULL, 'n' },
		{ "loops", required_argument, NULL, 'l' },
		{ "wait-ms", required_argument, NULL, 'w' },
		{ "func", required_argument, NULL, 'f' },
		{ "offset", required_argument, NULL, 'o' },
		{ "control", no_argument, NULL, 'C' },
		{ "count-gp", no_argument, NULL, 'G' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	unsigned long in_flight = 0, late_starts = 0, late_ends = 0, ran = 0;
	struct run_state before, after;
	struct gp_count_bpf *gp = NULL;
	unsigned long long gp_waits = 0;
	pthread_t wthread;
	struct kpx_json w;
	double *detach_ms;
	struct kpx_pct pct;
	int c, i, err = 0;
	char *end;

	while ((c = getopt_long(argc, argv, "p:n:l:w:f:o:jh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			for (i = 0; i < P_NR && strcmp(optarg, path_names[i]); i++)
				;
			if (i == P_NR) {
				fprintf(stderr, "kpx-detach-race: unknown path '%s'\n", optarg);
				return 2;
			}
			opt.path = i;
			break;
		case 'n':
		case 'l':
		case 'w':
		case 'o':
			errno = 0;
			i = strtol(optarg, &end, 0);
			if (errno || *end || i < 0 || (c == 'n' && i == 0)) {
				fprintf(stderr, "kpx-detach-race: bad number '%s' for -%c\n", optarg, c);
				return 2;
			}
			if (c == 'n')
				opt.rounds = i;
			else if (c == 'l')
				opt.loops = i;
			else if (c == 'w')
				opt.wait_ms = i;
			else
				opt.offset = i;
			break;
		case 'f':
			opt.func = optarg;
			break;
		case 'C':
			opt.control = true;
			break;
		case 'G':
			opt.count_gp = true;
			break;
		case 'j':
			opt.json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if ((opt.path == P_MULTI_OFFSET && !opt.offset) || (opt.path == P_MULTI && opt.offset)) {
		fprintf(stderr, "kpx-detach-race: multi-offset wants -o OFF > 0, multi none\n");
		return 2;
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		fprintf(stderr, "kpx-detach-race: needs two CPUs\n");
		return 2;
	}
	detach_ms = calloc(opt.rounds, sizeof(*detach_ms));
	if (!detach_ms || pin(0)) {
		fprintf(stderr, "kpx-detach-race: setup: %s\n", strerror(errno));
		return 2;
	}
	if (opt.count_gp) {
		gp = gp_count_open_attach();
		if (!gp)
			return 2;
	}
	if (pthread_create(&wthread, NULL, worker, NULL)) {
		fprintf(stderr, "kpx-detach-race: no worker thread\n");
		return 2;
	}

	for (i = 0; i < opt.rounds && !err; i++) {
		struct round r = { .state_fd = -1 };
		struct bpf_program *prog;
		double t0;

		prog = setup(&r);
		if (!prog) {
			fprintf(stderr, "kpx-detach-race: round %d: load: %s\n", i, strerror(errno));
			err = 2;
		} else if (attach(&r, prog)) {
			fprintf(stderr, "kpx-detach-race: round %d: attach %s+%lu (%s): %s\n", i,
				opt.func, opt.offset, path_names[opt.path], strerror(errno));
			err = 2;
		} else if ((err = wait_running(r.state_fd))) {
			fprintf(stderr, "kpx-detach-race: round %d: the program did not run: %s\n",
				i, strerror(-err));
			err = 2;
		}
		if (err) {
			if (r.skel)
				finish(&r);
			if (r.state_fd >= 0)
				close(r.state_fd);
			break;
		}

		/*
		 * The control makes the same two reads, WAIT_MS apart, with the
		 * program still attached: they must see it run.
		 */
		if (opt.control) {
			if (read_state(r.state_fd, &before))
				err = 2;
			sleep_ms(opt.wait_ms);
			if (!err && read_state(r.state_fd, &after))
				err = 2;
		}
		/* The program fd goes first: the detach drops the last reference. */
		if (opt.path == P_LEGACY) {
			detach_race_bpf__destroy(r.skel);
			r.skel = NULL;
		}
		if (gp)
			__atomic_store_n(&gp->bss->armed, 1, __ATOMIC_SEQ_CST);
		t0 = kpx_now_ms();
		if (!err && detach(&r)) {
			fprintf(stderr, "kpx-detach-race: round %d: detach: %s\n", i, strerror(errno));
			err = 2;
		}
		detach_ms[i] = kpx_now_ms() - t0;
		if (gp)
			__atomic_store_n(&gp->bss->armed, 0, __ATOMIC_SEQ_CST);
		if (!err && !opt.control && read_state(r.state_fd, &before))
			err = 2;
		if (finish(&r) && !err) {
			fprintf(stderr, "kpx-detach-race: round %d: close: %s\n", i, strerror(errno));
			err = 2;
		}
		if (!opt.control) {
			sleep_ms(opt.wait_ms);
			if (!err && read_state(r.state_fd, &after))
				err = 2;
		}
		close(r.state_fd);
		if (err)
			break;
		ran += before.enter > 0;
		in_flight += before.enter != before.exit;
		late_starts += after.enter != before.enter;
		late_ends += after.exit != before.exit;
	}
	atomic_store(&stop, true);
	pthread_join(wthread, NULL);

	pct = kpx_percentiles(detach_ms, i);
	if (opt.json) {
		jw_init(&w, stdout);
		jw_start_object(&w);
		jw_string_field(&w, "path", path_names[opt.path]);
		jw_string_field(&w, "func", opt.func);
		jw_uint_field(&w, "offset", opt.offset);
		jw_int_field(&w, "loops", opt.loops);
		jw_int_field(&w, "wait_ms", opt.wait_ms);
		jw_bool_field(&w, "control", opt.control);
		jw_int_field(&w, "rounds", opt.rounds);
		jw_int_field(&w, "rounds_done", i);
		jw_uint_field(&w, "rounds_ran", ran);
		jw_uint_field(&w, "in_flight", in_flight);
		jw_uint_field(&w, "late_starts", late_starts);
		jw_uint_field(&w, "late_ends", late_ends);
		jw_object_field(&w, "detach_ms");
		jw_float_field(&w, "p50", 3, pct.p50);
		jw_float_field(&w, "p99", 3, pct.p99);
		jw_float_field(&w, "max", 3, pct.max);
		jw_end_object(&w);
		if (gp) {
			jw_object_field(&w, "gp_waits");
			for (c = 0; c < GP_NR; c++) {
				jw_uint_field(&w, gp_names[c], gp->bss->waits[c]);
				gp_waits += gp->bss->waits[c];
			}
			jw_end_object(&w);
			jw_uint_field(&w, "gp_waits_total", gp_waits);
		}
		jw_bool_field(&w, "error", err != 0);
		jw_end_object(&w);
	} else {
		printf("%s %s+%lu: %d rounds of %d loops, %lu ran before detach; in flight at "
		       "detach %lu, late starts %lu, late ends %lu; detach p50 %.3f ms p99 %.3f ms "
		       "max %.3f ms%s\n",
		       path_names[opt.path], opt.func, opt.offset, i, opt.loops, ran, in_flight,
		       late_starts, late_ends, pct.p50, pct.p99, pct.max,
		       opt.control ? " (control)" : "");
		if (gp) {
			for (c = 0; c < GP_NR; c++)
				gp_waits += gp->bss->waits[c];
			printf("grace-period waits inside the detaches: %llu\n", gp_waits);
		}
	}
	gp_count_bpf__destroy(gp);
	free(detach_ms);
	if (err)
		return 2;
	return in_flight || late_starts || late_ends ? 1 : 0;
}
