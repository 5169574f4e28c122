// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl: attach BPF kprobes the way tools do (bpf_program__attach_kprobe_opts)
 * and show which mechanism the kernel backs each one with.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "kpctl.h"
#include "kpctl.skel.h"

#define KPROBES_LIST "/sys/kernel/debug/kprobes/list"

enum exit_code {
	EXIT_OK = 0,
	EXIT_FAIL = 1,	/* the kernel refused, or a check failed */
	EXIT_USAGE = 2,	/* bad command line */
};

static struct env {
	bool verbose;
	bool json;
} env;

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	stop_requested = 1;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG && !env.verbose)
		return 0;
	if (!env.verbose)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static void errx(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kpctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A probe as the user asked for it: FUNC, FUNC+OFF, FUNC%return, MOD:FUNC[+OFF]. */
struct probe {
	char spec[256];
	char func[224];		/* what libbpf gets: "FUNC" or "MOD:FUNC" */
	unsigned long offset;
	bool retprobe;
	struct bpf_link *link;
	__u64 addr;		/* from bpf_link_info; 0 when unknown */
	__u64 missed;
	__u64 hits;
	char mechanism[16];
	char flags[64];		/* raw debugfs flags, e.g. "[FTRACE]" */
};

static int parse_spec(const char *spec, struct probe *p)
{
	char buf[256], *plus, *pct, *end;

	memset(p, 0, sizeof(*p));
	if (strlen(spec) >= sizeof(buf) || !*spec)
		return -EINVAL;
	snprintf(p->spec, sizeof(p->spec), "%s", spec);
	snprintf(buf, sizeof(buf), "%s", spec);
	pct = strchr(buf, '%');
	if (pct) {
		if (strcmp(pct, "%return"))
			return -EINVAL;
		*pct = '\0';
		p->retprobe = true;
	}
	plus = strchr(buf, '+');
	if (plus) {
		if (p->retprobe || !plus[1])
			return -EINVAL;
		*plus = '\0';
		errno = 0;
		p->offset = strtoul(plus + 1, &end, 0);
		if (errno || *end)
			return -EINVAL;
	}
	if (!*buf || strlen(buf) >= sizeof(p->func) || strspn(buf, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:") != strlen(buf))
		return -EINVAL;
	snprintf(p->func, sizeof(p->func), "%s", buf);
	return 0;
}

/*
 * The mechanism behind the kprobe at @addr, from debugfs. Every kprobe the
 * kernel registered for a perf/BPF link is listed there with its flags.
 */
static void probe_mechanism(struct probe *p)
{
	char line[512], flags[64], type[4];
	unsigned long long a;
	FILE *f;

	snprintf(p->mechanism, sizeof(p->mechanism), "unknown");
	if (!p->addr)
		return;
	f = fopen(KPROBES_LIST, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *fl;

		if (sscanf(line, "%llx %3s", &a, type) != 2 || a != p->addr)
			continue;
		if ((type[0] == 'r') != p->retprobe)
			continue;
		fl = strchr(line, '[');
		snprintf(flags, sizeof(flags), "%s", fl ? fl : "");
		flags[strcspn(flags, "\n")] = '\0';
		snprintf(p->flags, sizeof(p->flags), "%s", flags);
		if (strstr(flags, "[GONE]"))
			snprintf(p->mechanism, sizeof(p->mechanism), "gone");
		else if (strstr(flags, "[DISABLED]"))
			snprintf(p->mechanism, sizeof(p->mechanism), "disabled");
		else if (strstr(flags, "[FTRACE]"))
			snprintf(p->mechanism, sizeof(p->mechanism), "ftrace");
		else if (strstr(flags, "[CALLOPT]"))
			snprintf(p->mechanism, sizeof(p->mechanism), "callopt");
		else if (strstr(flags, "[OPTIMIZED]"))
			snprintf(p->mechanism, sizeof(p->mechanism), "optimized");
		else
			snprintf(p->mechanism, sizeof(p->mechanism), "int3");
		break;
	}
	fclose(f);
}

static void probe_link_info(struct probe *p)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);
	char name[256];

	info.perf_event.kprobe.func_name = (__u64)(unsigned long)name;
	info.perf_event.kprobe.name_len = sizeof(name);
	if (bpf_link_get_info_by_fd(bpf_link__fd(p->link), &info, &len))
		return;
	if (info.type != BPF_LINK_TYPE_PERF_EVENT)
		return;
	p->addr = info.perf_event.kprobe.addr;
	p->missed = info.perf_event.kprobe.missed;
}

static const char *attach_error(int err)
{
	switch (err) {
	case -EPERM:
	case -EACCES:
		return "permission denied: attaching kprobes needs root, or CAP_BPF and CAP_PERFMON";
	case -ENOENT:
		return "no such function in the kernel (or its module is not loaded)";
	case -EILSEQ:
		return "offset is not on an instruction boundary";
	case -EINVAL:
		return "the kernel refused this site (blacklisted, notrace, offset past the "
		       "function's end, or not probeable)";
	case -EBUSY:
		return "the site is busy (another probe type owns it)";
	default:
		return strerror(-err);
	}
}

static int attach_probe(struct kpctl_bpf *skel, struct probe *p, int slot)
{
	LIBBPF_OPTS(bpf_kprobe_opts, opts,
		.offset = p->offset,
		.retprobe = p->retprobe,
		.bpf_cookie = slot);
	struct bpf_program *prog = p->retprobe ? skel->progs.kpctl_kretprobe
					       : skel->progs.kpctl_kprobe;

	p->link = bpf_program__attach_kprobe_opts(prog, p->func, &opts);
	if (!p->link)
		return -errno;
	probe_link_info(p);
	return 0;
}

static bool probes_settled(struct probe *probes, int n)
{
	for (int i = 0; i < n; i++) {
		probe_mechanism(&probes[i]);
		if (!strcmp(probes[i].mechanism, "int3"))
			return false;
	}
	return true;
}

static void read_counts(struct kpctl_bpf *skel, struct probe *probes, int n)
{
	int ncpu = libbpf_num_possible_cpus();
	struct kpctl_count vals[ncpu > 0 ? ncpu : 1];

	for (int i = 0; i < n; i++) {
		__u32 key = i;

		probes[i].hits = 0;
		if (bpf_map__lookup_elem(skel->maps.counts, &key, sizeof(key), vals,
					 sizeof(vals), 0))
			continue;
		for (int c = 0; c < ncpu; c++)
			probes[i].hits += vals[c].hits;
		probe_link_info(&probes[i]);
	}
}

static void print_probes(struct probe *probes, int n, bool with_hits)
{
	printf("%-28s %-18s %-10s %-5s", "PROBE", "ADDRESS", "MECHANISM", "REGS");
	if (with_hits)
		printf(" %10s %7s", "HITS", "MISSED");
	printf("  %s\n", "DEBUGFS");
	for (int i = 0; i < n; i++) {
		printf("%-28s 0x%016llx %-10s %-5s", probes[i].spec,
		       (unsigned long long)probes[i].addr, probes[i].mechanism, "full");
		if (with_hits)
			printf(" %10llu %7llu", (unsigned long long)probes[i].hits,
			       (unsigned long long)probes[i].missed);
		printf("  %s\n", probes[i].flags);
	}
}

static void print_json(struct probe *probes, int n, long triggers, double attach_ms,
		       double detach_ms)
{
	printf("{\"attach_ms\":%.3f,\"detach_ms\":%.3f,\"triggers\":%ld,\"probes\":[",
	       attach_ms, detach_ms, triggers);
	for (int i = 0; i < n; i++) {
		struct probe *p = &probes[i];

		printf("%s{\"spec\":\"%s\",\"func\":\"%s\",\"offset\":%lu,\"retprobe\":%s,"
		       "\"addr\":\"0x%llx\",\"mechanism\":\"%s\",\"regs\":\"full\","
		       "\"hits\":%llu,\"missed\":%llu}",
		       i ? "," : "", p->spec, p->func, p->offset, p->retprobe ? "true" : "false",
		       (unsigned long long)p->addr, p->mechanism,
		       (unsigned long long)p->hits, (unsigned long long)p->missed);
	}
	printf("]}\n");
}

static void usage_attach(FILE *f)
{
	fprintf(f,
"Usage: kpctl [-v] [-j] attach [OPTIONS] SPEC...\n"
"\n"
"Attach the counting BPF program at each SPEC with bpf_program__attach_kprobe_opts,\n"
"print the address and mechanism of each probe, optionally trigger or watch,\n"
"then detach and print how long that took.\n"
"\n"
"SPEC:  FUNC | FUNC+OFF | FUNC%%return | MODULE:FUNC[+OFF]\n"
"\n"
"  -t, --trigger N     call getpgid(2) N times after attaching; count only this\n"
"                      process's hits (exact counts for probes in do_getpgid)\n"
"  -d, --duration S    print hits once a second for S seconds (0: until Ctrl-C)\n"
"  -w, --wait-opt S    wait up to S seconds for int3 probes to be optimized\n"
"\n"
"MECHANISM is ftrace (function entry), callopt (call-optimized), optimized\n"
"(jump-optimized), int3, disabled or gone, as the kernel's kprobes list says.\n"
"  -h, --help          this help\n"
"\n"
"Examples:\n"
"  kpctl attach do_getpgid do_getpgid+0x9 --trigger 1000\n"
"  kpctl -j attach vfs_read%%return --duration 5\n");
}

static int cmd_attach(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "trigger", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "wait-opt", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	long triggers = 0, duration = -1;
	double wait_opt = 0, t0, attach_ms = 0, detach_ms = 0;
	struct kpctl_bpf *skel = NULL;
	struct probe *probes = NULL;
	int n = 0, c, err, ret = EXIT_FAIL;
	char *end;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+t:d:w:h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			triggers = strtol(optarg, &end, 0);
			if (*end || triggers < 0) {
				errx("bad --trigger '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'd':
			duration = strtol(optarg, &end, 0);
			if (*end || duration < 0) {
				errx("bad --duration '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'w':
			wait_opt = strtod(optarg, &end);
			if (*end || wait_opt < 0) {
				errx("bad --wait-opt '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			usage_attach(stdout);
			return EXIT_OK;
		default:
			usage_attach(stderr);
			return EXIT_USAGE;
		}
	}
	n = argc - optind;
	if (n <= 0) {
		errx("attach: no probe given");
		usage_attach(stderr);
		return EXIT_USAGE;
	}
	if (n > KPCTL_MAX_PROBES) {
		errx("attach: at most %d probes", KPCTL_MAX_PROBES);
		return EXIT_USAGE;
	}
	probes = calloc(n, sizeof(*probes));
	if (!probes)
		return EXIT_FAIL;
	for (int i = 0; i < n; i++) {
		if (parse_spec(argv[optind + i], &probes[i])) {
			errx("bad probe '%s' (want FUNC, FUNC+OFF, FUNC%%return or MODULE:FUNC[+OFF])",
			     argv[optind + i]);
			free(probes);
			return EXIT_USAGE;
		}
	}

	skel = kpctl_bpf__open();
	if (!skel) {
		errx("cannot open the BPF object: %s", strerror(errno));
		goto out;
	}
	if (triggers)
		skel->rodata->target_tgid = getpid();
	err = kpctl_bpf__load(skel);
	if (err) {
		errx("cannot load the BPF program: %s%s", strerror(-err),
		     err == -EPERM ? " (needs root, or CAP_BPF and CAP_PERFMON)" : "");
		goto out;
	}

	t0 = now_ms();
	for (int i = 0; i < n; i++) {
		if (stop_requested) {
			errx("interrupted while attaching; detaching what was attached");
			n = i;
			goto detach;
		}
		err = attach_probe(skel, &probes[i], i);
		if (err) {
			errx("cannot attach '%s': %s", probes[i].spec, attach_error(err));
			n = i;
			goto detach;
		}
	}
	attach_ms = now_ms() - t0;

	t0 = now_ms();
	while (!probes_settled(probes, n) && now_ms() - t0 < wait_opt * 1e3 && !stop_requested)
		usleep(20000);

	if (!env.json) {
		printf("kpctl: attached %d probe(s) in %.3f ms\n", n, attach_ms);
		print_probes(probes, n, false);
	}

	for (long i = 0; i < triggers && !stop_requested; i++)
		syscall(SYS_getpgid, 0);

	if (duration >= 0) {
		t0 = now_ms();
		while (!stop_requested && (!duration || now_ms() - t0 < duration * 1e3)) {
			sleep(1);
			read_counts(skel, probes, n);
			if (!env.json) {
				printf("--- %.0f s\n", (now_ms() - t0) / 1e3);
				print_probes(probes, n, true);
				fflush(stdout);
			}
		}
	}
	read_counts(skel, probes, n);
	ret = EXIT_OK;

detach:
	t0 = now_ms();
	for (int i = 0; i < n; i++) {
		bpf_link__destroy(probes[i].link);
		probes[i].link = NULL;
	}
	detach_ms = now_ms() - t0;
	if (ret == EXIT_OK) {
		if (env.json) {
			print_json(probes, n, triggers, attach_ms, detach_ms);
		} else {
			if (triggers)
				printf("kpctl: %ld getpgid() calls\n", triggers);
			print_probes(probes, n, true);
			printf("kpctl: detached %d probe(s) in %.3f ms\n", n, detach_ms);
		}
	}
out:
	kpctl_bpf__destroy(skel);
	free(probes);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: kpctl [-v] [-j] COMMAND [ARGS]\n"
"\n"
"Commands:\n"
"  attach SPEC...   attach counting BPF kprobes, show mechanism and hits\n"
"\n"
"Options:\n"
"  -j, --json       machine-readable output\n"
"  -v, --verbose    libbpf debug output\n"
"  -h, --help       this help; 'kpctl COMMAND --help' for a command\n"
"\n"
"Exit status: 0 success, 1 the kernel refused or a check failed, 2 bad usage.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct sigaction sa = { .sa_handler = on_signal };
	int c;

	while ((c = getopt_long(argc, argv, "+jvh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			env.json = true;
			break;
		case 'v':
			env.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	libbpf_set_print(libbpf_print);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	argc -= optind;
	argv += optind;
	if (!strcmp(argv[0], "attach"))
		return cmd_attach(argc, argv);
	errx("unknown command '%s' (see --help)", argv[0]);
	return EXIT_USAGE;
}
