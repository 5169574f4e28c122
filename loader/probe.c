// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The probe helpers every kpctl command uses: parse a SPEC, attach and
 * detach it with bpf_program__attach_kprobe_opts, tell its mechanism (the
 * class bpf_link_info reports, refined with the debugfs kprobes list, else
 * the debugfs list alone), read its counts, and open and load the BPF
 * skeleton.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "common.h"
#include "kpctl.skel.h"

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

static void set_mech(struct probe *p, const char *name, const char *source)
{
	snprintf(p->mechanism, sizeof(p->mechanism), "%s", name ? name : "");
	p->mech_source = source;
}

bool class_needs_list(__u32 probe_flags)
{
	return probe_flags == BPF_PERF_PROBE_TRAP || probe_flags == BPF_PERF_PROBE_OPTIMIZED ||
	       probe_flags == BPF_PERF_PROBE_DISARMED;
}

/*
 * The mechanism behind each probe (kpx_mech_resolve()): the class the
 * kernel reports in bpf_link_info (perf_event.flags), then, unless every
 * class is ftrace, one read of the debugfs kprobes list for all @n probes,
 * where every kprobe the kernel registered for a perf/BPF link is listed
 * with its flags: they tell callopt from jmpopt, int3 from pending (queued
 * for the optimizer) and gone from disabled, and the mechanism where the
 * kernel reports no class. The link infos are read first: a probe the
 * optimizer finishes in between then reads "pending", and is read again.
 * KPCTL_MECH_SOURCE=debugfs ignores the class (to test the fallback).
 */
void probe_mechanisms(struct probe *probes, int n)
{
	static bool warned;
	const char *force = getenv("KPCTL_MECH_SOURCE");
	bool use_link_info = !force || strcmp(force, "debugfs");
	struct kpx_kprobes list = {};
	bool need_list = false, list_read = false;
	int list_err = 0;

	for (int i = 0; i < n; i++) {
		struct probe *p = &probes[i];
		__u32 cls;

		if (p->link)
			probe_link_info(p);
		p->flags[0] = '\0';
		cls = use_link_info ? p->probe_flags : 0;
		need_list |= p->addr && (!cls || class_needs_list(cls));
	}
	if (need_list) {
		list_err = kpx_kprobes_read(&list);
		list_read = !list_err;
	}
	for (int i = 0; i < n; i++) {
		struct probe *p = &probes[i];
		__u32 cls = use_link_info ? p->probe_flags : 0;
		const struct kpx_kprobe *e = NULL;
		const char *name, *src;

		if (list_read && p->addr)
			e = kpx_kprobes_find(&list, p->addr, p->retprobe);
		if (e)
			snprintf(p->flags, sizeof(p->flags), "%s", e->flags);
		/* Two statements: an argument may be read before another is evaluated. */
		name = kpx_mech_resolve(cls, e, list_read, &src);
		set_mech(p, name, src);
		/* Unknown for want of the list (not for a class no bit names). */
		if (p->mechanism[0] || !list_err || !p->addr || (cls && !class_needs_list(cls)) ||
		    warned)
			continue;
		warned = true;
		if (cls == BPF_PERF_PROBE_TRAP || cls == BPF_PERF_PROBE_OPTIMIZED)
			warnx("cannot tell the mechanism of '%s': the kernel reports its class, "
			      "%s, and only %s tells %s, which is not readable (%s; debugfs not "
			      "mounted, or no CONFIG_DEBUG_FS?)", p->spec, libbpf_perf_probe_class_str(cls),
			      KPX_KPROBES_LIST, cls == BPF_PERF_PROBE_TRAP ? "int3 from pending" :
			      "callopt from jmpopt", strerror(-list_err));
		else
			warnx("cannot tell the mechanism of '%s': %s, and %s is not readable (%s; "
			      "debugfs not mounted, or no CONFIG_DEBUG_FS?)", p->spec,
			      p->probe_flags ? "KPCTL_MECH_SOURCE=debugfs ignores its class" :
			      "the kernel does not report its class in the link info",
			      KPX_KPROBES_LIST, strerror(-list_err));
	}
	kpx_kprobes_free(&list);
}

void probe_mechanism(struct probe *p)
{
	probe_mechanisms(p, 1);
}

/*
 * Whether the mechanism is final. "pending" waits for the optimizer. An
 * unknown mechanism (the class and the debugfs line disagreed, or debugfs
 * is gone) is read again when the class is trap or optimized. debugfs
 * alone cannot tell int3 from pending (it flags a queued probe optimized),
 * so only the link info's class makes int3 final. Without debugfs a trap
 * probe therefore never settles: the waits run out their time.
 */
bool mechanism_settled(const struct probe *p)
{
	bool link_info = p->mech_source && !strcmp(p->mech_source, "link_info");

	if (!strcmp(p->mechanism, "pending"))
		return false;
	if (!p->mechanism[0])
		return !link_info || (p->probe_flags != BPF_PERF_PROBE_TRAP &&
				      p->probe_flags != BPF_PERF_PROBE_OPTIMIZED);
	return strcmp(p->mechanism, "int3") || link_info;
}

/*
 * The class: the kernel's from the link info; from the debugfs mechanism
 * when debugfs alone told (callopt and jmpopt are "optimized" there, also
 * while queued, as debugfs shows them); NULL otherwise.
 */
const char *probe_class(const struct probe *p)
{
	static const struct {
		const char *mech;
		__u32 cls;
	} classes[] = {
		{ "ftrace", BPF_PERF_PROBE_FTRACE },
		{ "callopt", BPF_PERF_PROBE_OPTIMIZED },
		{ "jmpopt", BPF_PERF_PROBE_OPTIMIZED },
		{ "int3", BPF_PERF_PROBE_TRAP },
		{ "disabled", BPF_PERF_PROBE_DISARMED },
		{ "gone", BPF_PERF_PROBE_DISARMED },
	};

	if (!p->mech_source)
		return NULL;
	if (!strcmp(p->mech_source, "link_info"))
		return libbpf_perf_probe_class_str(p->probe_flags);
	if (strcmp(p->mech_source, "debugfs"))
		return NULL;
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (!strcmp(p->mechanism, classes[i].mech))
			return libbpf_perf_probe_class_str(classes[i].cls);
	return NULL;
}

void json_mech_field(struct kpx_json *w, const char *name, const char *mech)
{
	if (mech[0])
		jw_string_field(w, name, mech);
	else
		jw_null_field(w, name);
}

void json_probe_class(struct kpx_json *w, const struct probe *p)
{
	const char *cls = probe_class(p);

	if (cls)
		jw_string_field(w, "probe", cls);
	else
		jw_null_field(w, "probe");
	if (p->link_info_read)
		jw_uint_field(w, "probe_flags", p->probe_flags);
	else
		jw_null_field(w, "probe_flags");
}

void probe_link_info(struct probe *p)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);
	char name[256];

	p->link_info_read = false;
	p->probe_flags = 0;
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
	p->probe_flags = info.perf_event.flags;
	p->link_info_read = true;
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
 * A FUNC+OFF or MODULE:FUNC+OFF past the function's end is resolved by the
 * kernel into whatever symbol lies there: refuse it here, with the reason.
 * The size is kallsyms': up to the next symbol (of the same module for a
 * module function). Needs the addresses (root); without them, or without
 * a size (a module's last symbol), the kernel decides.
 */
int check_spec_in_bounds(const struct probe *p)
{
	const char *colon = strchr(p->func, ':');
	struct ksym sym;
	char mod[64];
	int err;

	if (!p->offset)
		return 0;
	if (colon) {
		snprintf(mod, sizeof(mod), "%.*s", (int)(colon - p->func), p->func);
		err = ksym_lookup_module(mod, colon + 1, &sym);
	} else {
		err = ksym_lookup(p->func, &sym);
		if (err == -ENOENT)	/* FUNC alone may name a module's function */
			err = ksym_lookup_module(NULL, p->func, &sym);
	}
	if (err || !sym.size || p->offset < sym.size)
		return 0;
	errx("cannot attach '%s': offset 0x%lx is past the end of %s (0x%llx bytes; "
	     "the address is %s+0x%llx)", p->spec, p->offset, p->func, sym.size,
	     sym.next, (unsigned long long)p->offset - sym.size);
	return -ERANGE;
}

/*
 * What kpctl checks of @n parsed SPECs before it loads anything (and before
 * it asks for root: kallsyms' names are there for everyone): that each
 * FUNC names a function of the running kernel, in the core kernel or a
 * loaded module, as kprobes look it up (bad usage otherwise, exit 2), then
 * that each +OFF lies inside its function (check_spec_in_bounds(), exit
 * 1). Returns -1 when the SPECs may be attached, else the exit status, the
 * reason said.
 */
int check_probes(const struct probe *probes, int n)
{
	for (int i = 0; i < n; i++) {
		const struct probe *p = &probes[i];

		if (ksym_func_exists(p->func))
			continue;
		errx("no such function in the kernel: '%s'%s", p->spec,
		     strchr(p->func, ':') ? " (or its module is not loaded)" : "");
		return EXIT_USAGE;
	}
	for (int i = 0; i < n; i++)
		if (check_spec_in_bounds(&probes[i]))
			return EXIT_FAIL;
	return -1;
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

/*
 * A kprobe_multi link's addresses (sorted by the kernel), their cookies
 * (@cookies may be NULL) and mechanisms, @n of each. @addrs and @mechs are
 * zeroed first: a kernel that does not report mechanisms leaves them 0.
 * 0, or -1 with errno set.
 */
void detach_probe(struct probe *p)
{
	bpf_link__destroy(p->link);
	p->link = NULL;
}

/* Waits up to @secs for the mechanism @want (NULL: a settled one). */
int wait_mechanism(struct probe *p, const char *want, double secs)
{
	double t0 = kpx_now_ms();

	for (;;) {
		probe_mechanism(p);
		if (want ? !strcmp(p->mechanism, want) : mechanism_settled(p))
			return 0;
		if (kpx_now_ms() - t0 >= secs * 1e3 || stop_requested)
			return -ETIMEDOUT;
		usleep(20000);
	}
}

bool probes_settled(struct probe *probes, int n)
{
	probe_mechanisms(probes, n);
	return mechanisms_settled(probes, n);
}

bool mechanisms_settled(const struct probe *probes, int n)
{
	for (int i = 0; i < n; i++)
		if (!mechanism_settled(&probes[i]))
			return false;
	return true;
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
		errx_unavailable("cannot open the BPF object: %s", strerror(errno));
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
		errx_unavailable("cannot load the BPF program: %s%s", strerror(-err),
				 err == -EPERM ? " (needs root, or CAP_BPF and CAP_PERFMON)" : "");
	return err;
}

/*
 * "cannot attach SPEC: why"; without the rights to, kpctl could not run.
 * EINVAL (and EILSEQ) has several causes: 'explain' tells which, from the
 * kernel's image and tables, when it can.
 */
void attach_failed(const struct probe *p, int err)
{
	char why[768];

	if (err == -EPERM || err == -EACCES)
		errx_unavailable("cannot attach '%s': %s", p->spec, attach_error(err));
	else if ((err == -EINVAL || err == -EILSEQ) && !explain_refusal(p, why, sizeof(why)))
		errx("cannot attach '%s': the kernel refused this site (%s): %s", p->spec,
		     err == -EINVAL ? "EINVAL" : "EILSEQ", why);
	else
		errx("cannot attach '%s': %s", p->spec, attach_error(err));
}

/*
 * A latency object of -j output, the same in every command: "total" the
 * wall time of the phase (ms), "sum" the sum of the @p.n timed calls, and
 * their nearest-rank p50, p99 and max.
 */
void json_latency(struct kpx_json *w, const char *name, double total, struct kpx_pct p)
{
	jw_object_field(w, name);
	jw_float_field(w, "total", 3, total);
	jw_float_field(w, "sum", 3, p.total);
	jw_float_field(w, "p50", 3, p.p50);
	jw_float_field(w, "p99", 3, p.p99);
	jw_float_field(w, "max", 3, p.max);
	jw_uint_field(w, "n", p.n);
	jw_end_object(w);
}
