// SPDX-License-Identifier: GPL-2.0
/*
 * kpx-multi-all: one BPF kprobe_multi link over every traceable core-kernel
 * function, as upstream's kprobe_multi_bench_attach measures it, and the
 * contract checked on the way.
 *
 *   kpx-multi-all [-j] [--trigger MS] [--late MS] [--unpatch-timeout S] [--control]
 *
 * The functions: every name of available_filter_functions(_addrs) that is
 * not a module's, each name once (a static function's name may be listed
 * several times: the kernel resolves a name to its first traceable
 * address), less the names upstream's test leaves out for the same reason
 * (rcu_*, arch_cpu_idle, default_idle: RCU does not watch there, and a
 * program run there splats on a lockdep kernel; bpf_dispatcher_xdp_func;
 * __ftrace_invalid_address__*). The kernel attaches all of them or none.
 *
 *   attach (timed) -> activity for MS ms (must hit) -> detach (timed) ->
 *   dead = 1 at once -> activity in a thread, for --late MS and until
 *   ftrace has unpatched every function again (enabled_functions back to
 *   its count before the attach; stock does that inside the detach, the
 *   fast detach after it, and that time is measured from the detach's
 *   return) -> the runs that saw dead are late runs (none allowed: once
 *   detach returns, the program has stopped and cannot start again).
 *
 * --control sets dead right after the attach instead: the activity while
 * attached must then count late runs, and the tool exits 1.
 *
 * Exit 0 when the link attached, was hit, ran late never and every function
 * was unpatched in time; 1 when a check failed; 2 when it could not run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "kpx.h"
#include "multi_all.skel.h"

static const char *const filter_files[] = {
	"/sys/kernel/tracing/available_filter_functions_addrs",
	"/sys/kernel/tracing/available_filter_functions",
};

static struct {
	double trigger_ms, late_ms, unpatch_s;
	bool json, control;
} opt = { .trigger_ms = 200, .late_ms = 500, .unpatch_s = 1200 };

struct fn {
	char *name;
	unsigned long long addr;	/* 0 without the _addrs file */
};

static struct {
	const char *source;
	long listed, module, dup, skipped, n;
	struct fn *fns;
	long long entry_offset;		/* getpgid's ftrace site - its symbol, -1: unknown */
	double attach_ms, detach_ms, unpatch_ms;
	long enabled_before, enabled_attached, enabled_detached;
	unsigned long long hits, late;
	int attach_err;
} r = { .entry_offset = -1, .enabled_before = -1, .enabled_attached = -1,
	.enabled_detached = -1 };

static void usage(FILE *f)
{
	fprintf(f,
"Usage: kpx-multi-all [-j] [--trigger MS] [--late MS] [--unpatch-timeout S] [--control]\n"
"  -t, --trigger MS         activity while attached (default 200)\n"
"  -L, --late MS            activity after the detach (default 500)\n"
"  -U, --unpatch-timeout S  how long to wait for ftrace to unpatch every\n"
"                           function after the detach (default 1200)\n"
"  -C, --control            negative control: mark the link dead right after\n"
"                           the attach (late runs must be counted; exit 1)\n"
"  -j, --json               one JSON object on stdout\n");
}

/* Upstream's kprobe_multi_bench_attach leaves these out (see above). */
static bool skip_name(const char *name)
{
	return !strncmp(name, "rcu_", 4) || !strcmp(name, "arch_cpu_idle") ||
	       !strcmp(name, "default_idle") || !strcmp(name, "bpf_dispatcher_xdp_func") ||
	       !strncmp(name, "__ftrace_invalid_address__", 26);
}

static int cmp_fn(const void *a, const void *b)
{
	return strcmp(((const struct fn *)a)->name, ((const struct fn *)b)->name);
}

static int read_functions(void)
{
	char line[512], name[256];
	size_t cap = 0;
	FILE *f = NULL;
	bool addrs;
	long k = 0;

	for (size_t i = 0; i < sizeof(filter_files) / sizeof(filter_files[0]) && !f; i++) {
		f = fopen(filter_files[i], "r");
		if (f)
			r.source = filter_files[i];
	}
	if (!f) {
		fprintf(stderr, "kpx-multi-all: cannot read available_filter_functions "
			"under /sys/kernel/tracing (tracefs not mounted?)\n");
		return -ENOENT;
	}
	addrs = strstr(r.source, "_addrs") != NULL;
	while (fgets(line, sizeof(line), f)) {
		struct fn fn = {};

		r.listed++;
		if (strchr(line, '[')) {	/* "name [module]" */
			r.module++;
			continue;
		}
		if (addrs ? sscanf(line, "%llx %255s", &fn.addr, name) != 2
			  : sscanf(line, "%255s", name) != 1)
			continue;
		if (skip_name(name)) {
			r.skipped++;
			continue;
		}
		if ((size_t)r.n == cap) {
			struct fn *tmp;

			cap = cap ? 2 * cap : 65536;
			tmp = realloc(r.fns, cap * sizeof(*tmp));
			if (!tmp) {
				fclose(f);
				return -ENOMEM;
			}
			r.fns = tmp;
		}
		fn.name = strdup(name);
		if (!fn.name) {
			fclose(f);
			return -ENOMEM;
		}
		r.fns[r.n++] = fn;
	}
	fclose(f);
	/* Each name once: the kernel takes the first traceable address of a name. */
	qsort(r.fns, r.n, sizeof(*r.fns), cmp_fn);
	for (long i = 0; i < r.n; i++) {
		if (k && !strcmp(r.fns[k - 1].name, r.fns[i].name)) {
			r.dup++;
			free(r.fns[i].name);
			continue;
		}
		r.fns[k++] = r.fns[i];
	}
	r.n = k;
	return 0;
}

/*
 * Where ftrace's site is in a function: 0, or 4 behind an ENDBR64 (a kernel
 * built with X86_KERNEL_IBT). From getpgid's listed address and its symbol.
 */
static void note_entry_offset(void)
{
	const struct kpx_ksym *s;
	struct fn key = { .name = "__x64_sys_getpgid" }, *fn;
	int cnt;

	fn = bsearch(&key, r.fns, r.n, sizeof(*r.fns), cmp_fn);
	if (!fn || !fn->addr || kpx_kallsyms_load())
		return;
	s = kpx_ksym_find(key.name, &cnt);
	if (s && s->addr && fn->addr >= s->addr)
		r.entry_offset = fn->addr - s->addr;
}

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

static volatile int stop_activity;

/* System calls, a fork and exec, file reads: for @ms ms (@stoppable: or until stop_activity). */
static void activity(double ms, bool stoppable)
{
	double t0 = kpx_now_ms();
	struct stat st;
	int status;
	pid_t pid;

	while (kpx_now_ms() - t0 < ms && !(stoppable && stop_activity)) {
		for (int i = 0; i < 100; i++)
			syscall(SYS_getpgid, 0);
		read_file("/proc/self/status");
		stat("/", &st);
		pid = fork();
		if (!pid) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
		usleep(1000);
	}
}

/* The late activity: --late MS at least, then until the main thread stops it. */
static void *late_activity(void *arg)
{
	activity(opt.late_ms, false);
	while (!stop_activity)
		activity(100, true);
	return NULL;
}

static int read_runs(struct multi_all_bpf *skel, __u32 key, unsigned long long *sum)
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 *v;
	int err;

	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	v = calloc(ncpu, sizeof(*v));
	if (!v)
		return -ENOMEM;
	err = bpf_map__lookup_elem(skel->maps.runs, &key, sizeof(key), v,
				   ncpu * sizeof(*v), 0);
	*sum = 0;
	for (int i = 0; !err && i < ncpu; i++)
		*sum += v[i];
	free(v);
	return err;
}

static void report(bool ok, const char *why)
{
	struct kpx_json w;

	if (!opt.json) {
		printf("kpx-multi-all: %ld functions (%ld listed, %ld of modules, %ld duplicate "
		       "names, %ld left out by name), ftrace site at +%lld\n",
		       r.n, r.listed, r.module, r.dup, r.skipped, r.entry_offset);
		printf("kpx-multi-all: attach %.1f ms, detach %.1f ms, unpatched %.1f ms after "
		       "the detach; %llu runs, %llu late\n",
		       r.attach_ms, r.detach_ms, r.unpatch_ms, r.hits, r.late);
		printf("kpx-multi-all: %s%s%s\n", ok ? "ok" : "FAILED", why ? ": " : "",
		       why ? why : "");
		return;
	}
	jw_init(&w, stdout);
	jw_start_object(&w);
	jw_string_field(&w, "source", r.source);
	jw_int_field(&w, "listed", r.listed);
	jw_int_field(&w, "module", r.module);
	jw_int_field(&w, "duplicate_names", r.dup);
	jw_int_field(&w, "left_out", r.skipped);
	jw_int_field(&w, "functions", r.n);
	jw_int_field(&w, "entry_offset", r.entry_offset);
	jw_bool_field(&w, "control", opt.control);
	jw_int_field(&w, "attach_err", r.attach_err);
	jw_float_field(&w, "attach_ms", 1, r.attach_ms);
	jw_float_field(&w, "detach_ms", 1, r.detach_ms);
	jw_float_field(&w, "unpatch_ms", 1, r.unpatch_ms);
	jw_int_field(&w, "enabled_before", r.enabled_before);
	jw_int_field(&w, "enabled_attached", r.enabled_attached);
	jw_int_field(&w, "enabled_detached", r.enabled_detached);
	jw_uint_field(&w, "runs", r.hits);
	jw_uint_field(&w, "late_runs", r.late);
	jw_bool_field(&w, "ok", ok);
	if (why)
		jw_string_field(&w, "failed", why);
	else
		jw_null_field(&w, "failed");
	jw_end_object(&w);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "trigger", required_argument, NULL, 't' },
		{ "late", required_argument, NULL, 'L' },
		{ "unpatch-timeout", required_argument, NULL, 'U' },
		{ "control", no_argument, NULL, 'C' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *why = NULL;
	struct multi_all_bpf *skel = NULL;
	struct bpf_link *link = NULL;
	const char **syms = NULL;
	char whybuf[160], unpatchbuf[160] = "";
	pthread_t th;
	double t, v;
	char *end;
	int c, ret = 2;

	while ((c = getopt_long(argc, argv, "t:L:U:Cjh", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
		case 'L':
		case 'U':
			v = strtod(optarg, &end);
			if (*end || !(v >= 0) || v > 1e7) {
				fprintf(stderr, "kpx-multi-all: bad value '%s' for -%c\n", optarg, c);
				return 2;
			}
			if (c == 't')
				opt.trigger_ms = v;
			else if (c == 'L')
				opt.late_ms = v;
			else
				opt.unpatch_s = v;
			break;
		case 'C':
			opt.control = true;
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
		fprintf(stderr, "kpx-multi-all: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (read_functions())
		return 2;
	if (!r.n) {
		fprintf(stderr, "kpx-multi-all: no traceable core-kernel function listed\n");
		return 2;
	}
	note_entry_offset();
	syms = calloc(r.n, sizeof(*syms));
	if (!syms)
		return 2;
	for (long i = 0; i < r.n; i++)
		syms[i] = r.fns[i].name;

	skel = multi_all_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "kpx-multi-all: cannot load the BPF program: %s\n",
			strerror(errno));
		goto out;
	}
	r.enabled_before = kpx_enabled_functions();

	LIBBPF_OPTS(bpf_kprobe_multi_opts, mopts, .syms = syms, .cnt = r.n);
	t = kpx_now_ms();
	link = bpf_program__attach_kprobe_multi_opts(skel->progs.multi_all, NULL, &mopts);
	r.attach_err = link ? 0 : -errno;
	r.attach_ms = kpx_now_ms() - t;
	if (!link) {
		snprintf(whybuf, sizeof(whybuf), "the kernel refused the link over %ld functions: %s",
			 r.n, strerror(-r.attach_err));
		why = whybuf;
		ret = 1;
		goto report;
	}
	r.enabled_attached = kpx_enabled_functions();
	if (opt.control)
		__atomic_store_n(&skel->bss->dead, 1, __ATOMIC_SEQ_CST);
	activity(opt.trigger_ms, false);

	t = kpx_now_ms();
	bpf_link__destroy(link);
	r.detach_ms = kpx_now_ms() - t;
	t = kpx_now_ms();
	link = NULL;
	/* From here on no run may start: any that does sees dead. */
	__atomic_store_n(&skel->bss->dead, 1, __ATOMIC_SEQ_CST);
	r.enabled_detached = kpx_enabled_functions();
	if (pthread_create(&th, NULL, late_activity, NULL)) {
		why = "cannot start the late activity";
		goto report;
	}
	/* The unpatching, timed from the detach's return. */
	while (r.enabled_before >= 0 && kpx_enabled_functions() > r.enabled_before) {
		if (kpx_now_ms() - t > opt.unpatch_s * 1000) {
			snprintf(unpatchbuf, sizeof(unpatchbuf), "%ld functions still patched "
				 "%.0f s after the detach", kpx_enabled_functions(), opt.unpatch_s);
			break;
		}
		usleep(20000);
	}
	r.unpatch_ms = kpx_now_ms() - t;
	stop_activity = 1;
	pthread_join(th, NULL);

	if (read_runs(skel, 0, &r.hits) || read_runs(skel, 1, &r.late)) {
		why = "cannot read the run counters";
		goto report;
	}
	ret = 1;
	if (!r.hits && !opt.control)
		why = "the link was never hit";
	else if (r.late && !opt.control) {
		snprintf(whybuf, sizeof(whybuf), "%llu runs after the detach returned", r.late);
		why = whybuf;
	} else if (!r.late && opt.control)
		why = "control: no late run counted with dead set while attached";
	else if (opt.control)
		why = "control: late runs counted, as they must be";
	else if (unpatchbuf[0])
		why = unpatchbuf;
	if (!why)
		ret = 0;
report:
	report(ret == 0, why);
out:
	bpf_link__destroy(link);
	multi_all_bpf__destroy(skel);
	free(syms);
	for (long i = 0; i < r.n; i++)
		free(r.fns[i].name);
	free(r.fns);
	return ret;
}
