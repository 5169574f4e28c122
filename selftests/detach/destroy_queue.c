// SPDX-License-Identifier: GPL-2.0
/*
 * kpx-destroy-queue: close many perf kprobe events in a row while RCU grace
 * periods are held off, and count the closes that did not wait for one.
 *
 *   kpx-destroy-queue [-j] [-n EVENTS] [-f FUNC] [--hold-ms MS]
 *
 * Closing a perf kprobe event leaves the disarm, the grace period and the
 * free to a worker (0012, "tracing/kprobes, bpf: Detach BPF kprobe links
 * without waiting for grace periods"), which holds a bounded number of
 * events: a close that finds the queue full destroys its event
 * synchronously, and so waits for grace periods, as stock's close does.
 *
 * This tool opens EVENTS kprobe PMU events on FUNC (no BPF program), asks
 * kpx_hog (selftests/modules, loaded with cpu=1) to spin with preemption
 * disabled for MS ms, so that no RCU grace period ends meanwhile and the
 * worker frees nothing, and closes the events one by one on CPU 0. A close
 * that returns while the hold lasts did not wait for a grace period: its
 * event went to the queue. Their number (done_in_hold) is how many the
 * queue took, at most its bound; without a bound it is EVENTS. With the
 * stock close (kprobes/fast_detach off) it is 0. The first close that
 * returned after the hold (first_late) waited for it to end when it found
 * the queue full (first_late_ms is then most of the hold); when the hold
 * ended before the queue was full, it did not.
 *
 * Then waits until no kprobe on FUNC is left in debugfs's kprobes/list
 * (at most 30 s). Exit 0 when none is left, 1 when some are, 2 on an
 * error. The kernel log shows any warning the closes caused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <fcntl.h>
#include "kpx.h"

#define HOG_PARAMS "/sys/module/kpx_hog/parameters/"
#define KPROBES_LIST "/sys/kernel/debug/kprobes/list"

static struct {
	int events, hold_ms;
	const char *func;
	bool json;
} opt = { .events = 400, .hold_ms = 3000, .func = "__x64_sys_getpgid" };

static void usage(FILE *f)
{
	fprintf(f,
"Usage: kpx-destroy-queue [-j] [-n EVENTS] [-f FUNC] [--hold-ms MS]\n"
"  -n, --events N      kprobe events to open and close (default 400)\n"
"  -f, --func FUNC     the probed function (default __x64_sys_getpgid)\n"
"      --hold-ms MS    how long kpx_hog (loaded with cpu=1) holds RCU grace\n"
"                      periods off, from before the first close (default\n"
"                      3000, at most 5000)\n"
"  -j, --json          one JSON object on stdout\n");
}

static int read_uint(const char *path, unsigned int *v)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%u", v) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

static int write_uint(const char *path, unsigned int v)
{
	FILE *f = fopen(path, "w");
	int err = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%u\n", v) < 0)
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	return err;
}

/* Start a hold of kpx_hog and wait until its kthread is in it. */
static int hold_rcu(int ms)
{
	unsigned int before, now;
	double t0;
	int err;

	err = read_uint(HOG_PARAMS "holds", &before);
	if (!err)
		err = write_uint(HOG_PARAMS "hold_rcu_ms", ms);
	if (err) {
		fprintf(stderr, "kpx-destroy-queue: kpx_hog: %s (load it with cpu=1)\n",
			strerror(-err));
		return err;
	}
	t0 = kpx_now_ms();
	do {
		if (kpx_now_ms() - t0 > 2000) {
			fprintf(stderr, "kpx-destroy-queue: kpx_hog did not start its hold\n");
			return -ETIMEDOUT;
		}
		usleep(1000);
		err = read_uint(HOG_PARAMS "holds", &now);
		if (err)
			return err;
	} while (now == before);
	return 0;
}

static int kprobe_pmu_type(void)
{
	unsigned int type;
	int err = read_uint("/sys/bus/event_source/devices/kprobe/type", &type);

	return err ? err : (int)type;
}

static int open_event(int type, const char *func)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = type,
		.sample_period = 1,
		.config1 = (unsigned long)func,	/* kprobe_func */
	};

	return syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/* Probes on FUNC (at any offset: the entry may be FUNC+0x4) in kprobes/list, or -errno. */
static int count_probes(const char *func)
{
	char line[512], want[300];
	FILE *f = fopen(KPROBES_LIST, "r");
	int n = 0;

	if (!f)
		return -errno;
	snprintf(want, sizeof(want), " %s+0x", func);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = ' ';
		if (strstr(line, want))
			n++;
	}
	fclose(f);
	return n;
}

/* kpx_hog's "holding", read through an open fd: 1 while the hold lasts. */
static int holding(int fd)
{
	char c;

	return pread(fd, &c, 1, 0) == 1 && c == '1';
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "events", required_argument, NULL, 'n' },
		{ "func", required_argument, NULL, 'f' },
		{ "hold-ms", required_argument, NULL, 'H' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	int c, i, type, v, base, left = -1, ret = 2, hold_fd = -1;
	double t0, t, close_ms = 0, max_close_ms = 0, drain_ms = 0;
	int done_in_hold = 0, first_late = -1;
	double first_late_ms = 0;
	struct kpx_json w;
	cpu_set_t set;
	int *fds = NULL;
	char *end;

	while ((c = getopt_long(argc, argv, "n:f:jh", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
		case 'H':
			errno = 0;
			v = strtol(optarg, &end, 0);
			if (errno || *end || v <= 0 || (c == 'H' && v > 5000)) {
				fprintf(stderr, "kpx-destroy-queue: bad number '%s' for %s\n", optarg,
					c == 'n' ? "-n" : "--hold-ms (1-5000)");
				return 2;
			}
			if (c == 'n')
				opt.events = v;
			else
				opt.hold_ms = v;
			break;
		case 'f':
			opt.func = optarg;
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

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	fds = calloc(opt.events, sizeof(*fds));
	type = kprobe_pmu_type();
	if (!fds || type < 0 || sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "kpx-destroy-queue: setup: %s\n",
			type < 0 ? "no kprobe PMU" : strerror(errno));
		goto out;
	}
	hold_fd = open(HOG_PARAMS "holding", O_RDONLY | O_CLOEXEC);
	base = count_probes(opt.func);
	if (hold_fd < 0 || base < 0) {
		fprintf(stderr, "kpx-destroy-queue: %s: %s\n",
			hold_fd < 0 ? HOG_PARAMS "holding (load kpx_hog cpu=1)" : KPROBES_LIST,
			strerror(hold_fd < 0 ? errno : -base));
		goto out;
	}
	for (i = 0; i < opt.events; i++) {
		fds[i] = open_event(type, opt.func);
		if (fds[i] < 0) {
			fprintf(stderr, "kpx-destroy-queue: perf_event_open %s (event %d): %s\n",
				opt.func, i, strerror(errno));
			while (i--)
				close(fds[i]);
			goto out;
		}
	}
	v = count_probes(opt.func);
	if (v != base + opt.events) {
		fprintf(stderr, "kpx-destroy-queue: %d probes on %s after opening %d events, %d before\n",
			v, opt.func, opt.events, base);
		system("head -5 " KPROBES_LIST " >&2");
		goto close_all;
	}
	/* Let events closed before this (by anyone) leave the queue. */
	usleep(300 * 1000);
	if (hold_rcu(opt.hold_ms))
		goto close_all;

	t0 = kpx_now_ms();
	for (i = 0; i < opt.events; i++) {
		t = kpx_now_ms();
		close(fds[i]);
		t = kpx_now_ms() - t;
		if (t > max_close_ms)
			max_close_ms = t;
		if (holding(hold_fd)) {
			done_in_hold++;
		} else if (first_late < 0) {
			first_late = i;
			first_late_ms = t;
		}
	}
	close_ms = kpx_now_ms() - t0;

	/* Until the hold is over and the worker unregistered everything. */
	t0 = kpx_now_ms();
	while ((left = count_probes(opt.func) - base) > 0 || holding(hold_fd)) {
		if (kpx_now_ms() - t0 > 30000)
			break;
		usleep(10 * 1000);
	}
	drain_ms = kpx_now_ms() - t0;
	ret = left == 0 ? 0 : 1;

	if (opt.json) {
		jw_init(&w, stdout);
		jw_start_object(&w);
		jw_string_field(&w, "func", opt.func);
		jw_int_field(&w, "events", opt.events);
		jw_int_field(&w, "hold_ms", opt.hold_ms);
		jw_int_field(&w, "done_in_hold", done_in_hold);
		jw_int_field(&w, "first_late", first_late);
		jw_float_field(&w, "first_late_ms", 3, first_late_ms);
		jw_float_field(&w, "close_ms", 3, close_ms);
		jw_float_field(&w, "max_close_ms", 3, max_close_ms);
		jw_float_field(&w, "drain_ms", 3, drain_ms);
		jw_int_field(&w, "left", left);
		jw_end_object(&w);
	} else {
		printf("%d events on %s, grace periods held off for %d ms: %d closes returned "
		       "during the hold (the first after it: close %d, %.1f ms); closes took %.1f ms, the "
		       "longest %.1f ms; %d probes left after %.1f ms\n",
		       opt.events, opt.func, opt.hold_ms, done_in_hold, first_late, first_late_ms,
		       close_ms,
		       max_close_ms, left, drain_ms);
	}
	goto out;

close_all:
	for (i = 0; i < opt.events; i++)
		close(fds[i]);
out:
	if (hold_fd >= 0)
		close(hold_fd);
	free(fds);
	return ret;
}
