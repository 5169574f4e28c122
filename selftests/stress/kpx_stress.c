// SPDX-License-Identifier: GPL-2.0
/*
 * kpx-stress: attach and detach BPF kprobe links at a set of sites, over and
 * over, while the kpx_targets kthreads (one per CPU, preemptible) and a user
 * worker thread hit them, and check that nothing goes wrong:
 *
 *  - mismatches: a kthread hit whose sequence number (in %rdi) is not larger
 *    than the previous one of the same thread at the same site: a hit run
 *    twice, or run with corrupted registers;
 *  - late runs: a link's program ran after its detach returned and an RCU
 *    grace period passed (membarrier(MEMBARRIER_CMD_GLOBAL) waits one);
 *  - worker: a probe attached for the whole run at --worker-site counts
 *    exactly the getpgid() calls of the worker thread;
 *  - coverage: every site was hit, and the mechanism of each site is
 *    sampled from the debugfs kprobes list while attached.
 *
 * Exit status 0 when all checks hold, 1 otherwise, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "kpx.h"
#include "kpx_stress.skel.h"

#define MAX_SITES	8
#define MAX_SLOTS	8192

/* Counted per site: ftrace, callopt, jmpopt, int3 (libkpx's names) and other. */
enum { M_OTHER = KPX_MECH_INT3 + 1, M_NR };

struct site {
	const char *spec;
	char func[128];
	unsigned long offset;
	unsigned long long hits;
	unsigned int seen[M_NR];
};

static struct site sites[MAX_SITES];
static int nsites;
static atomic_bool worker_run;
static atomic_int worker_tid;
static unsigned long long worker_calls;

static int parse_site(const char *spec, struct site *s)
{
	const char *plus = strchr(spec, '+');
	size_t n = plus ? (size_t)(plus - spec) : strlen(spec);
	char *end;

	if (!n || n >= sizeof(s->func))
		return -EINVAL;
	memcpy(s->func, spec, n);
	s->func[n] = '\0';
	s->spec = spec;
	s->offset = 0;
	if (plus) {
		s->offset = strtoul(plus + 1, &end, 0);
		if (!plus[1] || *end)
			return -EINVAL;
	}
	return 0;
}

/* The mechanism of the kprobe at @addr, from the debugfs kprobes list. */
static int mechanism_at(unsigned long long addr)
{
	static struct kpx_kprobes list;
	const struct kpx_kprobe *e;
	enum kpx_mech m;

	if (kpx_kprobes_read(&list))
		return M_OTHER;
	e = kpx_kprobes_find(&list, addr, 0);
	if (!e)
		return M_OTHER;
	m = kpx_mech_from_name(kpx_debugfs_mech_name(e->flags));
	return m <= KPX_MECH_INT3 ? (int)m : M_OTHER;
}

static unsigned long long link_addr(struct bpf_link *link)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);

	if (bpf_link_get_info_by_fd(bpf_link__fd(link), &info, &len))
		return 0;
	return info.perf_event.kprobe.addr;
}

static unsigned long long slot_hits(struct kpx_stress_bpf *skel, __u32 slot)
{
	return __atomic_load_n(&skel->bss->hits[slot], __ATOMIC_RELAXED);
}

static void slot_clear(struct kpx_stress_bpf *skel, __u32 slot)
{
	__atomic_store_n(&skel->bss->hits[slot], 0, __ATOMIC_RELAXED);
}

static void *worker(void *arg)
{
	atomic_store(&worker_tid, (int)syscall(SYS_gettid));
	while (!atomic_load(&worker_run))
		usleep(100);
	while (atomic_load(&worker_run)) {
		syscall(SYS_getpgid, 0);
		worker_calls++;
	}
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: kpx-stress [--cycles N] [--hold-us U] [--worker-site SPEC] SITE...\n"
"  SITE, SPEC: FUNC[+OFF] or MODULE:FUNC[+OFF]. Cycle i attaches a link at\n"
"  SITE[i %% nsites], holds it U microseconds (every 16th cycle 50 ms, so\n"
"  that slower optimizations happen too), detaches it, waits an RCU grace\n"
"  period and checks that its program no longer runs. Prints JSON.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cycles", required_argument, NULL, 'c' },
		{ "hold-us", required_argument, NULL, 'u' },
		{ "worker-site", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	const char *worker_spec = NULL;
	struct site wsite = {};
	long cycles = 1000, hold_us = 2000;
	unsigned long long late = 0, mism, whits, unchecked, total = 0;
	unsigned long long wkmissed = 0, pmissed = 0;
	struct bpf_link *wlink = NULL;
	struct kpx_stress_bpf *skel;
	int c, ret = 1;
	pthread_t wthread;
	double *lat, t0;
	struct kpx_pct pct;
	struct kpx_json w;

	while ((c = getopt_long(argc, argv, "c:u:w:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			cycles = strtol(optarg, NULL, 0);
			break;
		case 'u':
			hold_us = strtol(optarg, NULL, 0);
			break;
		case 'w':
			worker_spec = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	for (; optind < argc && nsites < MAX_SITES; optind++, nsites++) {
		if (parse_site(argv[optind], &sites[nsites])) {
			fprintf(stderr, "kpx-stress: bad site '%s'\n", argv[optind]);
			return 2;
		}
	}
	if (!nsites || cycles <= 0 || hold_us < 0 ||
	    (worker_spec && parse_site(worker_spec, &wsite))) {
		usage(stderr);
		return 2;
	}
	lat = calloc(cycles, sizeof(*lat));
	if (!lat)
		return 1;

	if (pthread_create(&wthread, NULL, worker, NULL))
		return 1;
	while (!atomic_load(&worker_tid))
		usleep(100);

	skel = kpx_stress_bpf__open();
	if (!skel) {
		fprintf(stderr, "kpx-stress: open: %s\n", strerror(errno));
		goto out_worker;
	}
	skel->rodata->worker_tid = worker_spec ? atomic_load(&worker_tid) : 0;
	if (kpx_stress_bpf__load(skel)) {
		fprintf(stderr, "kpx-stress: load: %s\n", strerror(errno));
		goto out;
	}
	if (worker_spec) {
		LIBBPF_OPTS(bpf_kprobe_opts, wo, .offset = wsite.offset,
			    .bpf_cookie = ((__u64)MAX_SITES << 16) | (MAX_SLOTS - 1));

		wlink = bpf_program__attach_kprobe_opts(skel->progs.stress_probe,
							wsite.func, &wo);
		if (!wlink) {
			fprintf(stderr, "kpx-stress: attach %s: %s\n", worker_spec,
				strerror(errno));
			goto out;
		}
	}
	atomic_store(&worker_run, true);

	for (long i = 0; i < cycles; i++) {
		struct site *s = &sites[i % nsites];
		__u32 slot = i % (MAX_SLOTS - 1);
		long hold = (i % 16 == 15) ? 50000 : hold_us;
		LIBBPF_OPTS(bpf_kprobe_opts, o, .offset = s->offset,
			    .bpf_cookie = ((__u64)(i % nsites) << 16) | slot);
		unsigned long long before, after;
		struct bpf_link *link;

		slot_clear(skel, slot);
		link = bpf_program__attach_kprobe_opts(skel->progs.stress_probe,
						       s->func, &o);
		if (!link) {
			fprintf(stderr, "kpx-stress: attach %s: %s\n", s->spec,
				strerror(errno));
			goto out;
		}
		usleep(hold);
		s->seen[mechanism_at(link_addr(link))]++;
		t0 = kpx_now_ms();
		bpf_link__destroy(link);
		lat[i] = kpx_now_ms() - t0;
		/* One RCU grace period after the detach returned. */
		syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
		before = slot_hits(skel, slot);
		if (i % 8 == 0) {
			usleep(2000);
			after = slot_hits(skel, slot);
			if (after != before) {
				fprintf(stderr, "kpx-stress: %s ran %llu times after detach\n",
					s->spec, after - before);
				late++;
			}
		}
		s->hits += before;
		total += before;
	}

	atomic_store(&worker_run, false);
	pthread_join(wthread, NULL);
	/* Why a worker hit could be missing: the kprobe's and the program's misses. */
	if (wlink) {
		struct bpf_link_info li = {};
		struct bpf_prog_info pi = {};
		__u32 len = sizeof(li);

		if (!bpf_link_get_info_by_fd(bpf_link__fd(wlink), &li, &len))
			wkmissed = li.perf_event.kprobe.missed;
		len = sizeof(pi);
		if (!bpf_prog_get_info_by_fd(bpf_program__fd(skel->progs.stress_probe), &pi, &len))
			pmissed = pi.recursion_misses;
	}
	bpf_link__destroy(wlink);
	wlink = NULL;
	mism = skel->bss->mismatches;
	whits = skel->bss->worker_hits;
	unchecked = skel->bss->unchecked;

	pct = kpx_percentiles(lat, cycles);
	ret = (mism || late || unchecked || (worker_spec && whits != worker_calls)) ? 1 : 0;
	jw_init(&w, stdout);
	jw_start_object(&w);
	jw_int_field(&w, "cycles", cycles);
	jw_uint_field(&w, "hits", total);
	jw_uint_field(&w, "mismatches", mism);
	jw_uint_field(&w, "late_runs", late);
	jw_uint_field(&w, "unchecked", unchecked);
	jw_object_field(&w, "worker");
	jw_string_field(&w, "site", worker_spec ? worker_spec : "");
	jw_uint_field(&w, "calls", worker_spec ? worker_calls : 0);
	jw_uint_field(&w, "hits", whits);
	jw_uint_field(&w, "kprobe_missed", wkmissed);
	jw_end_object(&w);
	jw_uint_field(&w, "prog_recursion_misses", pmissed);
	jw_object_field(&w, "detach_ms");
	jw_float_field(&w, "p50", 3, pct.p50);
	jw_float_field(&w, "p99", 3, pct.p99);
	jw_float_field(&w, "max", 3, pct.max);
	jw_end_object(&w);
	jw_array_field(&w, "sites");
	for (int s = 0; s < nsites; s++) {
		jw_start_object(&w);
		jw_string_field(&w, "site", sites[s].spec);
		jw_uint_field(&w, "hits", sites[s].hits);
		jw_object_field(&w, "mechanisms");
		for (int m = 0; m < M_NR; m++)
			if (sites[s].seen[m])
				jw_uint_field(&w, m == M_OTHER ? "other" : kpx_mech_name(m),
					      sites[s].seen[m]);
		jw_end_object(&w);
		jw_end_object(&w);
		if (!sites[s].hits)
			ret = 1;
	}
	jw_end_array(&w);
	jw_end_object(&w);
	goto out;

out_worker:
	atomic_store(&worker_run, false);
	atomic_store(&worker_tid, 1);
	pthread_cancel(wthread);
	free(lat);
	return 1;
out:
	if (atomic_load(&worker_run)) {
		atomic_store(&worker_run, false);
		pthread_join(wthread, NULL);
	}
	bpf_link__destroy(wlink);
	kpx_stress_bpf__destroy(skel);
	free(lat);
	return ret;
}
