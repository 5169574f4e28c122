// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl attach: attach the counting BPF program at each SPEC
 * (bpf_program__attach_kprobe_opts), show the mechanism the kernel chose,
 * hits and an estimated cost per hit, then detach.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "common.h"
#include "kpctl.skel.h"

static void print_probes(struct probe *probes, int n, bool with_hits, bool with_cost)
{
	printf("%-28s %-18s %-10s %-9s %-9s", "PROBE", "ADDRESS", "MECHANISM", "SOURCE", "CLASS");
	if (with_hits)
		printf(" %10s %7s", "HITS", "MISSED");
	if (with_cost)
		printf(" %8s", "NS/HIT~");
	printf("  %s\n", "DEBUGFS");
	for (int i = 0; i < n; i++) {
		const char *cls = probe_class(&probes[i]);

		printf("%-28s 0x%016llx %-10s %-9s %-9s", probes[i].spec,
		       (unsigned long long)probes[i].addr,
		       probes[i].mechanism[0] ? probes[i].mechanism : "-",
		       probes[i].mech_source, cls ? cls : "-");
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
	bool multi;		/* one kprobe_multi link (--multi) */
};

static void print_json(struct probe *probes, int n, const struct attach_result *r)
{
	struct kpx_json *w = json_begin();

	jw_string_field(w, "link", r->multi ? "kprobe_multi" : "perf_event");
	jw_object_field(w, "attach_ms");
	jw_float_field(w, "total", 3, r->attach_ms);
	jw_int_field(w, "n", r->multi ? 1 : n);
	jw_end_object(w);
	jw_object_field(w, "detach_ms");
	jw_float_field(w, "total", 3, r->detach_ms);
	jw_int_field(w, "n", r->multi ? 1 : n);
	jw_end_object(w);
	jw_int_field(w, "triggers", r->triggers);
	if (r->cost_calls) {
		jw_object_field(w, "cost");
		jw_int_field(w, "calls", r->cost_calls);
		jw_float_field(w, "baseline_ns_per_call", 1, r->base_ns);
		jw_bool_field(w, "estimate", true);
		jw_end_object(w);
	}
	jw_array_field(w, "probes");
	for (int i = 0; i < n; i++) {
		struct probe *p = &probes[i];

		jw_start_object(w);
		jw_string_field(w, "spec", p->spec);
		jw_bool_field(w, "multi", p->multi);
		jw_string_field(w, "func", p->func);
		jw_uint_field(w, "offset", p->offset);
		jw_bool_field(w, "retprobe", p->retprobe);
		jw_hex_field(w, "addr", p->addr);
		json_mech_field(w, "mechanism", p->mechanism);
		json_mech_field(w, "mechanism_at_attach", p->mech_at_attach);
		json_probe_class(w, p);
		jw_string_field(w, "mechanism_source", p->mech_source);
		jw_uint_field(w, "hits", p->hits);
		jw_uint_field(w, "missed", p->missed);
		if (r->cost_calls)
			jw_float_field(w, "cost_ns_per_hit", 1, p->cost_ns);
		jw_end_object(w);
	}
	jw_end_array(w);
	json_end();
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
		t0 = kpx_now_ms();
		for (long c = 0; c < calls; c++)
			getpgid_self();
		t = (kpx_now_ms() - t0) * 1e6 / calls;
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
"Usage: kpctl attach [OPTIONS] SPEC...\n"
"\n"
"Attach the counting BPF program at each SPEC with bpf_program__attach_kprobe_opts,\n"
"print the address and mechanism of each probe, optionally trigger or watch,\n"
"then detach and print how long that took. Ctrl-C at any point (also while\n"
"attaching many probes) detaches everything that was attached.\n"
"\n"
"SPEC:  FUNC | FUNC+OFF | FUNC%%return | MODULE:FUNC[+OFF]\n"
"\n"
"  -t, --trigger N     call getpgid(2) N times after attaching; count only this\n"
"                      process's hits (exact counts for probes in the getpgid path)\n"
"  -d, --duration S    print hits once a second for S seconds (0: until Ctrl-C)\n"
"  -w, --wait-opt S    wait up to S seconds for int3 probes to be optimized\n"
"  -m, --multi         attach all SPECs as one kprobe_multi link\n"
"                      (bpf_program__attach_kprobe_multi_opts, cookie = the\n"
"                      SPEC's index): all FUNC or FUNC+OFF (an offset is a\n"
"                      kprobe of the link: bpf_kprobe_multi_opts.offsets), or\n"
"                      all FUNC%%return; all or none attached; not with\n"
"                      --cost or --legacy\n"
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
"MECHANISM is ftrace (function entry), callopt (call-optimized), jmpopt\n"
"(jump-optimized), pending (int3 until the optimizer is done), int3, disabled\n"
"or gone; - when kpctl cannot tell. CLASS is how the kernel enters the\n"
"handlers: trap, ftrace, optimized or disarmed. SOURCE is link_info when the\n"
"kernel reports the class in bpf_link_info (the debugfs kprobes list tells\n"
"callopt from jmpopt and int3 from pending), else debugfs (the list alone,\n"
"which shows pending as optimized), or none. Without debugfs a trap or\n"
"optimized probe has no mechanism, and --wait-opt waits its whole time.\n"
"  -h, --help          this help\n"
"\n"
"Examples:\n"
"  kpctl attach __x64_sys_getpgid __x64_sys_getpgid+0x20 --trigger 1000\n"
"  kpctl attach --wait-opt 2 --cost 20000 __x64_sys_getpgid+0x20\n"
"  kpctl attach --legacy --trigger 100 __x64_sys_getpgid\n"
"  kpctl attach --multi --trigger 100 __x64_sys_getpgid pid_vnr\n"
"  kpctl -j attach vfs_read%%return --duration 5\n");
}

struct attach_opts {
	bool multi;
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
		{ "multi", no_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	char *end;
	int c;

	o->duration = -1;
	optind = 0;
	while ((c = cmd_getopt(argc, argv, "t:d:w:c:lmh", opts)) != -1) {
		switch (c) {
		case 'm':
			o->multi = true;
			break;
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
			return show_help(usage_attach);
		default:
			return EXIT_USAGE;	/* said by cmd_getopt() */
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
		t0 = kpx_now_ms();
		err = attach_probe(prog, &probes[i], i);
		r->attach_ms += kpx_now_ms() - t0;
		if (err) {
			attach_failed(&probes[i], err);
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

/*
 * --multi: every SPEC an entry or offset (FUNC, FUNC+OFF), or every SPEC a
 * return (FUNC%return), in one link.
 */
static int check_multi_specs(struct probe *probes, int n)
{
	for (int i = 0; i < n; i++) {
		struct probe *p = &probes[i];

		if (p->retprobe != probes[0].retprobe) {
			errx("attach --multi: '%s' and '%s': one link is either all entries or "
			     "all returns", probes[0].spec, p->spec);
			return -1;
		}
	}
	return 0;
}

/*
 * --multi, once the SPECs are checked: an offset needs a kprobe_multi
 * that takes offsets (the series' 0030: link_create.kprobe_multi.offsets,
 * with the flag BPF_F_KPROBE_MULTI_OFFSETS, which other kernels refuse
 * with EINVAL, as they refuse any flag they do not know). The kernel's
 * BTF tells, before anything is loaded. Then the names are what the
 * kernel looks up: module functions by their name alone.
 */
static int prepare_multi_specs(struct probe *probes, int n)
{
	for (int i = 0; i < n; i++) {
		if (probes[i].offset && !btf_has_member("bpf_attr",
							"link_create.kprobe_multi.offsets")) {
			errx("attach --multi: '%s': this kernel's kprobe_multi takes no offsets "
			     "(its BTF has no bpf_attr.link_create.kprobe_multi.offsets; the "
			     "series' 0030 adds them): attach FUNC+OFF without --multi",
			     probes[i].spec);
			return -1;
		}
	}
	for (int i = 0; i < n; i++) {
		struct probe *p = &probes[i];
		const char *colon = strchr(p->func, ':');

		if (colon)
			memmove(p->func, colon + 1, strlen(colon + 1) + 1);
		p->multi = true;
	}
	return 0;
}

/*
 * The kernel refused the link with EINVAL or EILSEQ: the first SPEC at an
 * offset that 'explain' refuses too, with its reason (into @buf); else "".
 */
static void multi_refusal(const struct probe *probes, int n, int err, char *buf, size_t len)
{
	char why[512];

	buf[0] = '\0';
	if (err != -EINVAL && err != -EILSEQ)
		return;
	for (int i = 0; i < n; i++) {
		if (!probes[i].offset || explain_refusal(&probes[i], why, sizeof(why)))
			continue;
		snprintf(buf, len, "; '%s': %s", probes[i].spec, why);
		return;
	}
}

static struct bpf_link *attach_multi(struct kpctl_bpf *skel, struct probe *probes, int n,
				     struct attach_result *r)
{
	struct bpf_program *prog = probes[0].retprobe ? skel->progs.kpctl_kretprobe_multi
						      : skel->progs.kpctl_kprobe_multi;
	unsigned long offsets[n];
	bool any_offset = false;
	const char *syms[n];
	__u64 cookies[n];
	struct bpf_link *link;
	double t0;
	int err;

	for (int i = 0; i < n; i++) {
		syms[i] = probes[i].func;
		cookies[i] = i;
		offsets[i] = probes[i].offset;
		any_offset |= offsets[i] != 0;
	}
	/* Without an offset, what any kernel with kprobe_multi takes. */
	LIBBPF_OPTS(bpf_kprobe_multi_opts, opts, .syms = syms, .cookies = cookies, .cnt = n,
		    .retprobe = probes[0].retprobe, .offsets = any_offset ? offsets : NULL);
	t0 = kpx_now_ms();
	link = bpf_program__attach_kprobe_multi_opts(prog, NULL, &opts);
	err = link ? 0 : -errno;
	r->attach_ms = kpx_now_ms() - t0;
	if (err) {
		char why[800];

		multi_refusal(probes, n, err, why, sizeof(why));
		errx("attach --multi: the kernel refused one kprobe_multi link over %d "
		     "function(s): %s%s", n, attach_error(err), why);
	}
	return link;
}

/*
 * --multi: the address and mechanism of each SPEC: the class from the
 * link's info (kprobe_multi.probe_flags), then, unless every class is
 * ftrace, one read of the debugfs kprobes list: the sites at an offset are
 * kprobes of the link, listed with their flags (kpx_mech_resolve()). The
 * kernel sorts the addresses (and the cookies with them): the cookie says
 * which SPEC an address belongs to. A class of 0 is not resolved with
 * debugfs: a kernel that reports none runs every address on its fprobe,
 * and a kprobe listed at the same address would be another's.
 */
static void multi_mechanisms(struct bpf_link *link, struct probe *probes, int n)
{
	__u32 pflags[n], cnt = n;
	__u64 addrs[n], cookies[n];
	struct kpx_kprobes list = {};
	bool need_list = false, list_read = false;
	int err;

	memset(cookies, 0xff, sizeof(cookies));
	for (int i = 0; i < n; i++) {
		probes[i].mechanism[0] = '\0';
		probes[i].flags[0] = '\0';
		probes[i].mech_source = "none";
		probes[i].probe_flags = 0;
		probes[i].link_info_read = false;
	}
	err = kpx_multi_link_info(bpf_link__fd(link), &cnt, addrs, cookies, pflags, NULL);
	if (err) {
		warnx("attach --multi: cannot read the link's info: %s", strerror(-err));
		return;
	}
	for (int j = 0; j < n; j++)
		need_list |= class_needs_list(pflags[j]);
	if (need_list) {
		static bool warned;

		err = kpx_kprobes_read(&list);
		list_read = !err;
		if (err && !warned) {
			warned = true;
			warnx("attach --multi: cannot tell callopt from jmpopt, nor int3 from "
			      "pending, at the addresses at an offset: %s is not readable (%s)",
			      KPX_KPROBES_LIST, strerror(-err));
		}
	}
	for (int j = 0; j < n; j++) {
		const struct kpx_kprobe *e = NULL;
		const char *name, *src;
		struct probe *p;

		if (cookies[j] >= (__u64)n)
			continue;
		p = &probes[cookies[j]];
		p->addr = addrs[j];
		p->probe_flags = pflags[j];
		p->link_info_read = true;
		if (list_read && pflags[j])
			e = kpx_kprobes_find(&list, addrs[j], p->retprobe);
		if (e)
			snprintf(p->flags, sizeof(p->flags), "%s", e->flags);
		name = kpx_mech_resolve(pflags[j], e, list_read, &src);
		snprintf(p->mechanism, sizeof(p->mechanism), "%s", name ? name : "");
		p->mech_source = src;
	}
	kpx_kprobes_free(&list);
}

static void watch(struct kpctl_bpf *skel, struct probe *probes, int n,
		  const struct attach_opts *o)
{
	double t0 = kpx_now_ms();

	while (!stop_requested && (!o->duration || kpx_now_ms() - t0 < o->duration * 1e3)) {
		sleep(1);
		read_counts(skel, probes, n);
		if (!env.json) {
			printf("--- %.0f s\n", (kpx_now_ms() - t0) / 1e3);
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
	if (r->multi)
		printf("kpctl: detached the kprobe_multi link over %d function(s) in %.3f ms\n",
		       n, r->detach_ms);
	else
		printf("kpctl: detached %d probe(s) in %.3f ms\n", n, r->detach_ms);
}

int cmd_attach(int argc, char **argv)
{
	struct attach_opts o = {};
	struct attach_result r = {};
	struct kpctl_bpf *skel = NULL;
	struct bpf_link *mlink = NULL;
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
	if (o.multi && (attach_mode == PROBE_ATTACH_MODE_LEGACY || o.cost_calls)) {
		errx("attach --multi: not with --%s", o.cost_calls ? "cost" : "legacy");
		return EXIT_USAGE;
	}
	probes = parse_specs(n, argv + optind);
	if (!probes)
		return EXIT_USAGE;
	if (o.multi && check_multi_specs(probes, n)) {
		free(probes);
		return EXIT_USAGE;
	}
	/* The SPECs, before anything is loaded: what kpctl can tell refused. */
	ret = check_probes(probes, n);
	if (ret >= 0)
		goto out;
	ret = EXIT_FAIL;
	if (o.multi && prepare_multi_specs(probes, n))
		goto out;
	if (require_privileges() || require_kprobes())
		goto out;

	skel = open_skel();
	if (!skel)
		goto out;
	if (o.triggers || o.cost_calls)
		skel->rodata->target_tgid = getpid();
	if (o.multi ? load_skel(skel, "kpctl_kprobe_multi", "kpctl_kretprobe_multi", NULL) :
		      load_skel(skel, "kpctl_kprobe", "kpctl_kretprobe", NULL))
		goto out;
	if (o.multi) {
		r.multi = true;
		r.triggers = o.triggers;
		mlink = attach_multi(skel, probes, n, &r);
		if (!mlink)
			goto out;
		multi_mechanisms(mlink, probes, n);
		for (int i = 0; i < n; i++)
			snprintf(probes[i].mech_at_attach, sizeof(probes[i].mech_at_attach), "%s",
				 probes[i].mechanism);
		/* Sites at an offset are kprobes: the optimizer may take them. */
		t0 = kpx_now_ms();
		while (!mechanisms_settled(probes, n) && kpx_now_ms() - t0 < o.wait_opt * 1e3 &&
		       !stop_requested) {
			usleep(20000);
			multi_mechanisms(mlink, probes, n);
		}
		goto attached;
	}

	r.triggers = o.triggers;
	r.cost_calls = o.cost_calls;
	if (o.cost_calls)
		r.base_ns = time_getpgid(skel, probes, 0, o.cost_calls, NULL);
	attached = attach_all(skel, probes, n, &o, &r);
	if (attached < n) {
		n = attached;
		goto detach;
	}

	t0 = kpx_now_ms();
	while (!probes_settled(probes, n) && kpx_now_ms() - t0 < o.wait_opt * 1e3 &&
	       !stop_requested)
		usleep(20000);
	if (o.cost_calls)
		reset_counts(skel, n);

attached:
	if (!env.json) {
		if (mlink)
			printf("kpctl: attached one kprobe_multi link over %d function(s) in "
			       "%.3f ms\n", n, r.attach_ms);
		else
			printf("kpctl: attached %d probe(s) in %.3f ms\n", n, r.attach_ms);
		print_probes(probes, n, false, false);
	}
	for (long i = 0; i < o.triggers && !stop_requested; i++)
		getpgid_self();
	if (o.duration >= 0)
		watch(skel, probes, n, &o);
	read_counts(skel, probes, n);
	if (mlink)
		multi_mechanisms(mlink, probes, n);
	else
		probe_mechanisms(probes, n);
	ret = EXIT_OK;

detach:
	t0 = kpx_now_ms();
	bpf_link__destroy(mlink);
	for (int i = 0; i < n; i++)
		detach_probe(&probes[i]);
	r.detach_ms = kpx_now_ms() - t0;
	if (ret == EXIT_OK)
		report_attach(probes, n, &r);
out:
	kpctl_bpf__destroy(skel);
	free(probes);
	return ret;
}

