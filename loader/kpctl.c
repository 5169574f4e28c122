// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl: attach BPF kprobes the way tools do (bpf_program__attach_kprobe_opts)
 * and show which mechanism the kernel backs each one with.
 */
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
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
#include "common.h"
#include "kpctl.skel.h"

struct env env;
volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	stop_requested = 1;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (!env.verbose)
		return 0;
	return vfprintf(stderr, fmt, args);
}

void errx(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "kpctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* An integer sysctl; -1 when it does not exist (or cannot be read). */
int read_sysctl(const char *path)
{
	FILE *f = fopen(path, "r");
	int v;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

int write_sysctl(const char *path, int val)
{
	FILE *f = fopen(path, "w");
	int err = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%d\n", val) < 0)
		err = -EIO;
	if (fclose(f))
		err = -errno;
	return err;
}

long getpgid_self(void)
{
	return syscall(SYS_getpgid, 0);
}

int parse_spec(const char *spec, struct probe *p)
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

/* kpctl's names for enum bpf_kprobe_mechanism (link info). */
static const char *link_mech_name(__u32 m)
{
	switch (m) {
	case BPF_KPROBE_MECH_INT3:
		return "int3";
	case BPF_KPROBE_MECH_FTRACE:
		return "ftrace";
	case BPF_KPROBE_MECH_CALLOPT:
		return "callopt";
	case BPF_KPROBE_MECH_JMPOPT:
		return "optimized";	/* stock jump optimization, as debugfs calls it */
	case BPF_KPROBE_MECH_PENDING:
		return "pending";
	case BPF_KPROBE_MECH_DISABLED:
		return "disabled";
	default:
		return "unknown";
	}
}

/* A kprobe of the debugfs list: its address, kind and flags. */
struct kp_entry {
	unsigned long long addr;
	bool ret;
	char flags[64];
};

static int kp_entry_cmp(const void *a, const void *b)
{
	const struct kp_entry *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (int)x->ret - (int)y->ret;
}

/* The whole kprobes list, sorted; NULL (and errno set) when unreadable. */
static struct kp_entry *read_kprobes_list(size_t *n)
{
	struct kp_entry *v = NULL, *tmp;
	size_t cap = 0;
	char line[512], type[4];
	FILE *f;

	*n = 0;
	f = fopen(KPROBES_LIST, "r");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		struct kp_entry e = {};
		char *fl;

		if (sscanf(line, "%llx %3s", &e.addr, type) != 2)
			continue;
		e.ret = type[0] == 'r';
		fl = strchr(line, '[');
		snprintf(e.flags, sizeof(e.flags), "%s", fl ? fl : "");
		e.flags[strcspn(e.flags, "\n")] = '\0';
		if (*n == cap) {
			cap = cap ? 2 * cap : 256;
			tmp = realloc(v, cap * sizeof(*v));
			if (!tmp)
				break;
			v = tmp;
		}
		v[(*n)++] = e;
	}
	fclose(f);
	if (!v)
		v = calloc(1, sizeof(*v));
	if (v)
		qsort(v, *n, sizeof(*v), kp_entry_cmp);
	return v;
}

static const char *debugfs_mech_name(const char *flags)
{
	if (strstr(flags, "[GONE]"))
		return "gone";
	if (strstr(flags, "[DISABLED]"))
		return "disabled";
	if (strstr(flags, "[FTRACE]"))
		return "ftrace";
	if (strstr(flags, "[CALLOPT]"))
		return "callopt";
	if (strstr(flags, "[OPTIMIZED]"))
		return "optimized";
	return "int3";
}

static void set_mech(struct probe *p, const char *name, const char *source, bool full_regs)
{
	snprintf(p->mechanism, sizeof(p->mechanism), "%s", name);
	p->mech_source = source;
	p->full_regs = full_regs;
}

/*
 * The mechanism behind each probe: from bpf_link_info when the kernel
 * reports it there (a non-zero mechanism), else from debugfs, where every
 * kprobe the kernel registered for a perf/BPF link is listed with its flags
 * (one read of the list for all @n probes). Every x86 kprobe mechanism of
 * 6.12 hands its handlers a full pt_regs, so the debugfs path assumes it.
 * KPCTL_MECH_SOURCE=debugfs ignores the link info (to test the fallback).
 */
void probe_mechanisms(struct probe *probes, int n)
{
	static bool warned;
	const char *force = getenv("KPCTL_MECH_SOURCE");
	bool use_link_info = !force || strcmp(force, "debugfs");
	struct kp_entry *list = NULL;
	bool need_list = false, list_read = false;
	size_t nlist = 0;
	int list_err = 0;

	for (int i = 0; i < n; i++) {
		struct probe *p = &probes[i];

		if (p->link)
			probe_link_info(p);
		p->flags[0] = '\0';
		if (p->kmech && use_link_info) {
			set_mech(p, link_mech_name(p->kmech), "link_info",
				 p->kflags & BPF_KPROBE_INFO_FULL_REGS);
			continue;
		}
		set_mech(p, "unknown", "none", false);
		need_list |= p->addr != 0;
	}
	if (!need_list)
		return;
	list = read_kprobes_list(&nlist);
	list_err = list ? 0 : errno;
	list_read = list != NULL;
	for (int i = 0; i < n && list_read; i++) {
		struct probe *p = &probes[i];
		struct kp_entry key = { .addr = p->addr, .ret = p->retprobe }, *e;

		if ((p->kmech && use_link_info) || !p->addr)
			continue;
		e = bsearch(&key, list, nlist, sizeof(*list), kp_entry_cmp);
		if (!e)
			continue;
		snprintf(p->flags, sizeof(p->flags), "%s", e->flags);
		set_mech(p, debugfs_mech_name(e->flags), "debugfs", true);
	}
	free(list);
	if (!list_read && !warned) {
		warned = true;
		errx("cannot tell the mechanism: the kernel does not report it in the link "
		     "info, and %s is not readable (%s; debugfs not mounted, or no "
		     "CONFIG_DEBUG_FS?)", KPROBES_LIST, strerror(list_err));
	}
}

void probe_mechanism(struct probe *p)
{
	probe_mechanisms(p, 1);
}

/*
 * Whether the mechanism is final. The link info says "pending" while the
 * optimizer still has to install a call or jump, and "int3" only for good;
 * debugfs shows both as int3, so int3 from debugfs is never final.
 */
bool mechanism_settled(const struct probe *p)
{
	if (!strcmp(p->mechanism, "pending"))
		return false;
	return strcmp(p->mechanism, "int3") ||
	       (p->mech_source && !strcmp(p->mech_source, "link_info"));
}

void probe_link_info(struct probe *p)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);
	char name[256];

	info.perf_event.kprobe.func_name = (__u64)(unsigned long)name;
	info.perf_event.kprobe.name_len = sizeof(name);
	if (bpf_link_get_info_by_fd(bpf_link__fd(p->link), &info, &len)) {
		/*
		 * Not a BPF link: libbpf attached with PERF_EVENT_IOC_SET_BPF
		 * (its legacy tracefs mode does). The perf event still tells
		 * where its kprobe is, for the debugfs fallback.
		 */
		__u32 prog_id, fd_type, nlen = sizeof(name);
		__u64 off, addr;

		if (!bpf_task_fd_query(getpid(), bpf_link__fd(p->link), 0, name, &nlen,
				       &prog_id, &fd_type, &off, &addr))
			p->addr = addr;
		return;
	}
	if (info.type != BPF_LINK_TYPE_PERF_EVENT)
		return;
	p->addr = info.perf_event.kprobe.addr;
	p->missed = info.perf_event.kprobe.missed;
	p->kmech = info.perf_event.kprobe.mechanism;
	p->kflags = info.perf_event.kprobe.flags;
}

const char *attach_error(int err)
{
	switch (err) {
	case -EPERM:
	case -EACCES:
		return "permission denied: attaching kprobes needs root, or CAP_BPF and CAP_PERFMON";
	case -ENOENT:
		return "no such function in the kernel (or its module is not loaded)";
	case -EILSEQ:
		return "offset is not on an instruction boundary (or the instruction "
		       "there cannot be probed)";
	case -EINVAL:
		return "the kernel refused this site (blacklisted, notrace, reserved, "
		       "offset past the function's end, or not probeable)";
	case -EBUSY:
		return "the site is busy (another probe type owns it)";
	case -EADDRNOTAVAIL:
		return "the name matches several symbols; the kernel refuses ambiguous names";
	case -EOPNOTSUPP:
		return "the instruction there cannot be emulated by kprobes";
	default:
		return strerror(-err);
	}
}

/*
 * A FUNC+OFF past the function's end is resolved by the kernel into
 * whatever symbol lies there: refuse it here, with the reason.
 */
int check_spec_in_bounds(const struct probe *p)
{
	struct ksym sym;

	if (!p->offset || strchr(p->func, ':') || ksym_lookup(p->func, &sym))
		return 0;
	if (!sym.size || p->offset < sym.size)
		return 0;
	errx("cannot attach '%s': offset 0x%lx is past the end of %s (0x%llx bytes; "
	     "the address is %s+0x%llx)", p->spec, p->offset, p->func, sym.size,
	     sym.next, (unsigned long long)p->offset - sym.size);
	return -ERANGE;
}

/* PROBE_ATTACH_MODE_LEGACY with 'attach --legacy': a tracefs kprobe event. */
enum probe_attach_mode attach_mode = PROBE_ATTACH_MODE_DEFAULT;

int attach_probe(struct bpf_program *prog, struct probe *p, int slot)
{
	LIBBPF_OPTS(bpf_kprobe_opts, opts,
		.offset = p->offset,
		.retprobe = p->retprobe,
		.bpf_cookie = slot,
		.attach_mode = attach_mode);

	p->link = bpf_program__attach_kprobe_opts(prog, p->func, &opts);
	if (!p->link)
		return -errno;
	probe_link_info(p);
	return 0;
}

void detach_probe(struct probe *p)
{
	bpf_link__destroy(p->link);
	p->link = NULL;
}

/* Waits up to @secs for the mechanism @want (NULL: a settled one). */
int wait_mechanism(struct probe *p, const char *want, double secs)
{
	double t0 = now_ms();

	for (;;) {
		probe_mechanism(p);
		if (want ? !strcmp(p->mechanism, want) : mechanism_settled(p))
			return 0;
		if (now_ms() - t0 >= secs * 1e3 || stop_requested)
			return -ETIMEDOUT;
		usleep(20000);
	}
}

bool probes_settled(struct probe *probes, int n)
{
	probe_mechanisms(probes, n);
	for (int i = 0; i < n; i++)
		if (!mechanism_settled(&probes[i]))
			return false;
	return true;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct pct percentiles(double *v, size_t n)
{
	struct pct p = {};

	if (!n)
		return p;
	for (size_t i = 0; i < n; i++)
		p.total += v[i];
	qsort(v, n, sizeof(*v), cmp_double);
	p.p50 = v[(n - 1) / 2];
	p.p99 = v[(size_t)ceil(0.99 * n) - 1];
	p.max = v[n - 1];
	return p;
}

void read_counts(struct kpctl_bpf *skel, struct probe *probes, int n)
{
	for (int i = 0; i < n; i++) {
		probes[i].hits = __atomic_load_n(&skel->bss->counts[i].hits, __ATOMIC_RELAXED);
		probes[i].ctrl_hits = __atomic_load_n(&skel->bss->counts[i].ctrl_hits,
						      __ATOMIC_RELAXED);
		if (probes[i].link)
			probe_link_info(&probes[i]);
	}
}

void reset_counts(struct kpctl_bpf *skel, int n)
{
	for (int i = 0; i < n; i++) {
		__atomic_store_n(&skel->bss->counts[i].hits, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&skel->bss->counts[i].ctrl_hits, 0, __ATOMIC_RELAXED);
	}
}

/*
 * Opens the skeleton, once the kernel's BTF is known to be there (or the
 * file --btf/KPCTL_BTF names, which libbpf then uses for CO-RE instead).
 */
struct kpctl_bpf *open_skel(void)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts);
	struct kpctl_bpf *skel;

	if (require_btf(&opts.btf_custom_path))
		return NULL;
	skel = kpctl_bpf__open_opts(&opts);
	if (!skel)
		errx("cannot open the BPF object: %s", strerror(errno));
	return skel;
}

/* Loads only the programs named (NULL-terminated), with a clear error. */
int load_skel(struct kpctl_bpf *skel, ...)
{
	struct bpf_program *prog;
	const char *name;
	va_list ap;
	int err;

	bpf_object__for_each_program(prog, skel->obj) {
		bool keep = false;

		va_start(ap, skel);
		while ((name = va_arg(ap, const char *)))
			keep |= !strcmp(name, bpf_program__name(prog));
		va_end(ap);
		bpf_program__set_autoload(prog, keep);
	}
	err = kpctl_bpf__load(skel);
	if (err)
		errx("cannot load the BPF program: %s%s", strerror(-err),
		     err == -EPERM ? " (needs root, or CAP_BPF and CAP_PERFMON)" : "");
	return err;
}

/* "full", "partial", or "?" when the mechanism itself is unknown. */
const char *regs_word(const struct probe *p)
{
	if (!p->mech_source || !strcmp(p->mech_source, "none"))
		return "?";
	return p->full_regs ? "full" : "partial";
}

const char *full_regs_json(const struct probe *p)
{
	if (!p->mech_source || !strcmp(p->mech_source, "none"))
		return "null";
	return p->full_regs ? "true" : "false";
}

static void print_probes(struct probe *probes, int n, bool with_hits, bool with_cost)
{
	printf("%-28s %-18s %-10s %-9s %-5s", "PROBE", "ADDRESS", "MECHANISM", "SOURCE", "REGS");
	if (with_hits)
		printf(" %10s %7s", "HITS", "MISSED");
	if (with_cost)
		printf(" %8s", "NS/HIT~");
	printf("  %s\n", "DEBUGFS");
	for (int i = 0; i < n; i++) {
		printf("%-28s 0x%016llx %-10s %-9s %-5s", probes[i].spec,
		       (unsigned long long)probes[i].addr, probes[i].mechanism,
		       probes[i].mech_source, regs_word(&probes[i]));
		if (with_hits)
			printf(" %10llu %7llu", (unsigned long long)probes[i].hits,
			       (unsigned long long)probes[i].missed);
		if (with_cost && isnan(probes[i].cost_ns))
			printf(" %8s", "n/a");
		else if (with_cost)
			printf(" %8.0f", probes[i].cost_ns);
		printf("  %s\n", probes[i].flags);
	}
}

struct attach_result {
	long triggers;
	double attach_ms;
	double detach_ms;
	long cost_calls;
	double base_ns;		/* ns per getpgid() call without probes */
};

static void print_json(struct probe *probes, int n, const struct attach_result *r)
{
	printf("{\"attach_ms\":%.3f,\"detach_ms\":%.3f,\"triggers\":%ld",
	       r->attach_ms, r->detach_ms, r->triggers);
	if (r->cost_calls)
		printf(",\"cost\":{\"calls\":%ld,\"baseline_ns_per_call\":%.1f,"
		       "\"estimate\":true}", r->cost_calls, r->base_ns);
	printf(",\"probes\":[");
	for (int i = 0; i < n; i++) {
		struct probe *p = &probes[i];

		printf("%s{\"spec\":", i ? "," : "");
		json_string(stdout, p->spec);
		printf(",\"func\":");
		json_string(stdout, p->func);
		printf(",\"offset\":%lu,\"retprobe\":%s,\"addr\":\"0x%llx\","
		       "\"mechanism\":\"%s\",\"mechanism_at_attach\":\"%s\","
		       "\"mechanism_source\":\"%s\","
		       "\"link_info\":{\"mechanism\":%u,\"flags\":%u},"
		       "\"full_regs\":%s,\"regs\":\"%s\",\"hits\":%llu,\"missed\":%llu",
		       p->offset, p->retprobe ? "true" : "false",
		       (unsigned long long)p->addr, p->mechanism, p->mech_at_attach,
		       p->mech_source,
		       p->kmech, p->kflags, full_regs_json(p), regs_word(p),
		       (unsigned long long)p->hits, (unsigned long long)p->missed);
		if (r->cost_calls && isnan(p->cost_ns))
			printf(",\"cost_ns_per_hit\":null");
		else if (r->cost_calls)
			printf(",\"cost_ns_per_hit\":%.1f", p->cost_ns);
		printf("}");
	}
	printf("]}\n");
}

/*
 * The cheapest of a few rounds of @calls getpgid() calls, in ns per call:
 * the minimum filters out interrupts and preemption. The counters of the
 * @n probes are read around the cheapest round, so that @hits gets that
 * round's hits per probe.
 */
static double time_getpgid(struct kpctl_bpf *skel, struct probe *probes, int n,
			   long calls, __u64 *hits)
{
	double best = INFINITY;

	for (int round = 0; round < 5 && !stop_requested; round++) {
		__u64 before[n > 0 ? n : 1];
		double t0, t;

		read_counts(skel, probes, n);
		for (int i = 0; i < n; i++)
			before[i] = probes[i].hits;
		t0 = now_ms();
		for (long c = 0; c < calls; c++)
			getpgid_self();
		t = (now_ms() - t0) * 1e6 / calls;
		read_counts(skel, probes, n);
		if (t >= best)
			continue;
		best = t;
		for (int i = 0; i < n; i++)
			hits[i] = probes[i].hits - before[i];
	}
	return best;
}

/*
 * After probe @i was attached (and had the chance to be optimized): the
 * extra time per getpgid() call over the measurement before it, divided by
 * the hits of probe @i per call. An estimate: probes are assumed to add
 * their costs, and only probes that getpgid() reaches get a number.
 */
static double probe_cost(struct kpctl_bpf *skel, struct probe *probes, int i,
			 long calls, double *prev_ns)
{
	__u64 hits[i + 1];
	double t = time_getpgid(skel, probes, i + 1, calls, hits);
	double cost = NAN;

	if (hits[i])
		cost = (t - *prev_ns) * calls / hits[i];
	*prev_ns = t;
	return cost;
}

static void usage_attach(FILE *f)
{
	fprintf(f,
"Usage: kpctl [-v] [-j] attach [OPTIONS] SPEC...\n"
"\n"
"Attach the counting BPF program at each SPEC with bpf_program__attach_kprobe_opts,\n"
"print the address and mechanism of each probe, optionally trigger or watch,\n"
"then detach and print how long that took. Ctrl-C at any point (also while\n"
"attaching many probes) detaches everything that was attached.\n"
"\n"
"SPEC:  FUNC | FUNC+OFF | FUNC%%return | MODULE:FUNC[+OFF]\n"
"\n"
"  -t, --trigger N     call getpgid(2) N times after attaching; count only this\n"
"                      process's hits (exact counts for probes in do_getpgid)\n"
"  -d, --duration S    print hits once a second for S seconds (0: until Ctrl-C)\n"
"  -w, --wait-opt S    wait up to S seconds for int3 probes to be optimized\n"
"  -l, --legacy        attach as tools do on kernels without the kprobe PMU:\n"
"                      libbpf's legacy mode, a kprobe event in tracefs\n"
"                      (kprobe_events) and a perf event on it; one SPEC\n"
"  -c, --cost N        estimate each probe's cost per hit: time N getpgid(2)\n"
"                      calls (best of 5 rounds) before attaching and again after\n"
"                      attaching each probe (and waiting --wait-opt for it); the\n"
"                      extra time per call divided by that probe's hits per call.\n"
"                      An estimate (counting program included; n/a for probes\n"
"                      getpgid does not reach); counts only this process's hits\n"
"\n"
"MECHANISM is ftrace (function entry), callopt (call-optimized), optimized\n"
"(jump-optimized), pending (int3 until the optimizer is done), int3, disabled\n"
"or gone. SOURCE is link_info when the kernel reports it in bpf_link_info,\n"
"else debugfs (its kprobes list, which shows pending as int3); REGS is full\n"
"when handlers get a complete pt_regs (link info; assumed from debugfs).\n"
"  -h, --help          this help\n"
"\n"
"Examples:\n"
"  kpctl attach do_getpgid do_getpgid+0x9 --trigger 1000\n"
"  kpctl attach --wait-opt 2 --cost 20000 __x64_sys_getpgid+0x18\n"
"  kpctl attach --legacy --trigger 100 __x64_sys_getpgid\n"
"  kpctl -j attach vfs_read%%return --duration 5\n");
}

struct attach_opts {
	long triggers;
	long duration;
	double wait_opt;
	long cost_calls;
};

static int parse_attach_opts(int argc, char **argv, struct attach_opts *o)
{
	static const struct option opts[] = {
		{ "trigger", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "wait-opt", required_argument, NULL, 'w' },
		{ "cost", required_argument, NULL, 'c' },
		{ "legacy", no_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	char *end;
	int c;

	o->duration = -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+t:d:w:c:lh", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			attach_mode = PROBE_ATTACH_MODE_LEGACY;
			break;
		case 't':
			o->triggers = strtol(optarg, &end, 0);
			if (*end || o->triggers < 0)
				goto bad;
			break;
		case 'd':
			o->duration = strtol(optarg, &end, 0);
			if (*end || o->duration < 0)
				goto bad;
			break;
		case 'w':
			o->wait_opt = strtod(optarg, &end);
			if (*end || !(o->wait_opt >= 0))
				goto bad;
			break;
		case 'c':
			o->cost_calls = strtol(optarg, &end, 0);
			if (*end || o->cost_calls <= 0)
				goto bad;
			break;
		case 'h':
			usage_attach(stdout);
			return EXIT_OK;
		default:
			usage_attach(stderr);
			return EXIT_USAGE;
		}
	}
	return -1;
bad:
	errx("bad value '%s' for -%c (see 'kpctl attach --help')", optarg, c);
	return EXIT_USAGE;
}

static struct probe *parse_specs(int n, char **specs)
{
	struct probe *probes = calloc(n, sizeof(*probes));

	if (!probes) {
		errx("out of memory");
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		if (parse_spec(specs[i], &probes[i])) {
			errx("bad probe '%s' (want FUNC, FUNC+OFF, FUNC%%return or MODULE:FUNC[+OFF])",
			     specs[i]);
			free(probes);
			return NULL;
		}
		probes[i].cost_ns = NAN;
	}
	return probes;
}

/* Attaches all probes; returns how many are attached (all of them on success). */
static int attach_all(struct kpctl_bpf *skel, struct probe *probes, int n,
		      const struct attach_opts *o, struct attach_result *r)
{
	double prev_ns = r->base_ns;

	for (int i = 0; i < n; i++) {
		struct bpf_program *prog = probes[i].retprobe ? skel->progs.kpctl_kretprobe
							      : skel->progs.kpctl_kprobe;
		double t0;
		int err;

		if (stop_requested) {
			errx("interrupted while attaching; detaching the %d attached probe(s)", i);
			return i;
		}
		if (check_spec_in_bounds(&probes[i]))
			return i;
		t0 = now_ms();
		err = attach_probe(prog, &probes[i], i);
		r->attach_ms += now_ms() - t0;
		if (err) {
			errx("cannot attach '%s': %s", probes[i].spec, attach_error(err));
			return i;
		}
		probe_mechanism(&probes[i]);
		snprintf(probes[i].mech_at_attach, sizeof(probes[i].mech_at_attach), "%s",
			 probes[i].mechanism);
		if (!o->cost_calls)
			continue;
		wait_mechanism(&probes[i], NULL, o->wait_opt);
		probes[i].cost_ns = probe_cost(skel, probes, i, o->cost_calls, &prev_ns);
	}
	return n;
}

static void watch(struct kpctl_bpf *skel, struct probe *probes, int n,
		  const struct attach_opts *o)
{
	double t0 = now_ms();

	while (!stop_requested && (!o->duration || now_ms() - t0 < o->duration * 1e3)) {
		sleep(1);
		read_counts(skel, probes, n);
		if (!env.json) {
			printf("--- %.0f s\n", (now_ms() - t0) / 1e3);
			print_probes(probes, n, true, false);
			fflush(stdout);
		}
	}
}

static void report_attach(struct probe *probes, int n, const struct attach_result *r)
{
	if (env.json) {
		print_json(probes, n, r);
		return;
	}
	if (r->triggers)
		printf("kpctl: %ld getpgid() calls\n", r->triggers);
	print_probes(probes, n, true, r->cost_calls);
	if (r->cost_calls)
		printf("kpctl: NS/HIT~ is an estimate: extra ns per getpgid() call after "
		       "attaching the probe (baseline %.0f ns/call, best of 5 x %ld calls), "
		       "divided by its hits per call\n", r->base_ns, r->cost_calls);
	printf("kpctl: detached %d probe(s) in %.3f ms\n", n, r->detach_ms);
}

int cmd_attach(int argc, char **argv)
{
	struct attach_opts o = {};
	struct attach_result r = {};
	struct kpctl_bpf *skel = NULL;
	struct probe *probes;
	int n, attached, ret = EXIT_FAIL;
	double t0;

	ret = parse_attach_opts(argc, argv, &o);
	if (ret >= 0)
		return ret;
	ret = EXIT_FAIL;
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
	/* kpctl tells its probes apart by BPF cookie, which needs BPF links. */
	if (attach_mode == PROBE_ATTACH_MODE_LEGACY && n > 1) {
		errx("attach --legacy: one probe at a time (libbpf attaches legacy "
		     "probes with an ioctl, which carries no BPF cookie)");
		return EXIT_USAGE;
	}
	probes = parse_specs(n, argv + optind);
	if (!probes)
		return EXIT_USAGE;
	if (require_kprobes())
		goto out;

	skel = open_skel();
	if (!skel)
		goto out;
	if (o.triggers || o.cost_calls)
		skel->rodata->target_tgid = getpid();
	if (load_skel(skel, "kpctl_kprobe", "kpctl_kretprobe", NULL))
		goto out;

	r.triggers = o.triggers;
	r.cost_calls = o.cost_calls;
	if (o.cost_calls)
		r.base_ns = time_getpgid(skel, probes, 0, o.cost_calls, NULL);
	attached = attach_all(skel, probes, n, &o, &r);
	if (attached < n) {
		n = attached;
		goto detach;
	}

	t0 = now_ms();
	while (!probes_settled(probes, n) && now_ms() - t0 < o.wait_opt * 1e3 && !stop_requested)
		usleep(20000);
	if (o.cost_calls)
		reset_counts(skel, n);

	if (!env.json) {
		printf("kpctl: attached %d probe(s) in %.3f ms\n", n, r.attach_ms);
		print_probes(probes, n, false, false);
	}
	for (long i = 0; i < o.triggers && !stop_requested; i++)
		getpgid_self();
	if (o.duration >= 0)
		watch(skel, probes, n, &o);
	read_counts(skel, probes, n);
	probe_mechanisms(probes, n);
	ret = EXIT_OK;

detach:
	t0 = now_ms();
	for (int i = 0; i < n; i++)
		detach_probe(&probes[i]);
	r.detach_ms = now_ms() - t0;
	if (ret == EXIT_OK)
		report_attach(probes, n, &r);
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
"  attach SPEC...   attach counting BPF kprobes, show mechanism, hits, cost\n"
"  explain FUNC     which mechanism a probe at each offset of FUNC gets, and why\n"
"  regs SPEC        capture the pt_regs a handler sees at SPEC (--compare: with\n"
"                   the current mechanism and with int3, and check they agree)\n"
"  stress           attach/detach probes in a loop while threads hit them;\n"
"                   latency percentiles and exact hit accounting\n"
"  links            attach one BPF kprobe link to each of N kernel functions,\n"
"                   time attach and detach per link, check that no program\n"
"                   runs after detach and a grace period\n"
"\n"
"Options:\n"
"  -j, --json       machine-readable output (every command)\n"
"  -v, --verbose    libbpf debug output\n"
"  --btf FILE       kernel BTF for CO-RE (default: /sys/kernel/btf/vmlinux;\n"
"                   also $KPCTL_BTF); kpctl refuses to run without it\n"
"  -h, --help       this help; 'kpctl COMMAND --help' for a command\n"
"\n"
"Exit status: 0 success, 1 the kernel refused or a check failed, 2 bad usage.\n"
"\n"
"Examples:\n"
"  kpctl attach __x64_sys_getpgid+0x18 --trigger 1000\n"
"  kpctl explain __x64_sys_getpgid\n"
"  kpctl regs --compare __x64_sys_getpgid+0x18\n"
"  kpctl -j stress --iterations 100 --workers 2\n"
"  kpctl -j links -n 200\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "btf", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct sigaction sa = { .sa_handler = on_signal };
	struct rlimit rl;
	int c;

	while ((c = getopt_long(argc, argv, "+jvh", opts, NULL)) != -1) {
		switch (c) {
		case 'B':
			env.btf_path = optarg;
			break;
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
	/* Two fds per kprobe link (perf event and link): allow thousands. */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	argc -= optind;
	argv += optind;
	if (!strcmp(argv[0], "attach"))
		return cmd_attach(argc, argv);
	if (!strcmp(argv[0], "explain"))
		return cmd_explain(argc, argv);
	if (!strcmp(argv[0], "regs"))
		return cmd_regs(argc, argv);
	if (!strcmp(argv[0], "stress"))
		return cmd_stress(argc, argv);
	if (!strcmp(argv[0], "links"))
		return cmd_links(argc, argv);
	errx("unknown command '%s' (see --help)", argv[0]);
	return EXIT_USAGE;
}
