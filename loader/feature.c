// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl feature: what the running kernel has, asked before anything is
 * tried (as bpftool's 'feature probe' does): what every kernel-facing
 * command checks first (kprobes, the kprobe PMU, BTF, the privileges), the
 * kprobes knobs (a sysctl, and the series' debugfs files), and the UAPI of
 * the kprobes series, read from the kernel's BTF: whether bpf_link_info
 * reports the class of a kprobe link's probe and of each kprobe_multi
 * address (0010, 0027) and whether kprobe_multi links take offsets (0030). Nothing is loaded or attached: it needs no root (but the
 * debugfs files are root's).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <bpf/btf.h>
#include "common.h"

/* The kernel's BTF (--btf, $KPCTL_BTF, else /sys/kernel/btf/vmlinux), once. */
static struct {
	bool tried;
	struct btf *btf;
	const char *path;
} kbtf;

static struct btf *kernel_btf(void)
{
	const char *what;

	if (!kbtf.tried) {
		kbtf.tried = true;
		kbtf.path = btf_override(&what);
		if (!kbtf.path)
			kbtf.path = KERNEL_BTF;
		kbtf.btf = btf__parse(kbtf.path, NULL);
	}
	return kbtf.btf;
}

/*
 * The type of member @name of the struct or union @id, also inside its
 * anonymous members (bpf_attr and bpf_link_info nest their commands in
 * anonymous unions), typedefs and qualifiers skipped; -1: no such member.
 */
static int member_type(const struct btf *btf, int id, const char *name)
{
	const struct btf_type *t = btf__type_by_id(btf, id);
	const struct btf_member *m;

	if (!t || !(btf_is_struct(t) || btf_is_union(t)))
		return -1;
	m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++, m++) {
		const char *n = btf__name_by_offset(btf, m->name_off);
		int tid = btf__resolve_type(btf, m->type);

		if (tid < 0)
			continue;
		if (n && *n) {
			if (!strcmp(n, name))
				return tid;
			continue;
		}
		tid = member_type(btf, tid, name);
		if (tid >= 0)
			return tid;
	}
	return -1;
}

int btf_has_member(const char *type, const char *path)
{
	const struct btf *btf = kernel_btf();
	char buf[128], *tok, *save = NULL;
	int id;

	if (!btf)
		return -1;
	id = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
	if (id < 0)
		id = btf__find_by_name_kind(btf, type, BTF_KIND_UNION);
	if (id < 0)
		return 0;
	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && id >= 0; tok = strtok_r(NULL, ".", &save))
		id = member_type(btf, id, tok);
	return id >= 0;
}

/* The UAPI kpctl uses, by the member that shows it in the kernel's BTF. */
static const struct bpf_feature {
	const char *key;	/* in -j's "bpf" */
	const char *what;
	const char *type, *member;
	const char *patch;	/* of the series; NULL: upstream */
} bpf_features[] = {
	{ "kprobe_multi", "kprobe_multi links", "bpf_attr", "link_create.kprobe_multi", NULL },
	{ "link_info_probe", "link info: a kprobe's probe class", "bpf_link_info",
	  "perf_event.flags", "0010" },
	{ "kprobe_multi_probe_flags", "link info: kprobe_multi classes", "bpf_link_info",
	  "kprobe_multi.probe_flags", "0027" },
	{ "kprobe_multi_offsets", "kprobe_multi links take offsets", "bpf_attr",
	  "link_create.kprobe_multi.offsets", "0030" },
};
#define NBPF (sizeof(bpf_features) / sizeof(bpf_features[0]))

static const struct knob {
	const char *name;
	const char *path;
	const char *patch;	/* of the series; NULL: upstream */
} knobs[] = {
	{ "kprobes-optimization", KPX_KNOB_OPTIMIZATION, NULL },
	{ "kprobes/callopt", KPX_KNOB_CALLOPT, "0004" },
	{ "kprobes/fast_detach", KPX_KNOB_FAST_DETACH, "0049" },
};
#define NKNOBS (sizeof(knobs) / sizeof(knobs[0]))

struct features {
	struct utsname uts;
	int kprobes, kprobe_pmu, privileged;	/* 1, 0, -1: cannot tell */
	bool btf, kprobes_list;
	bool knob_there[NKNOBS];
	int knob[NKNOBS];			/* -1: absent or unreadable */
	int bpf[NBPF];				/* 1, 0, -1: no BTF */
	int series;				/* 1, 0, -1: cannot tell */
};

static void probe_features(struct features *f)
{
	const char *what, *btf_path = btf_override(&what);

	if (uname(&f->uts))
		snprintf(f->uts.release, sizeof(f->uts.release), "unknown");
	f->kprobes = has_kprobes();
	f->kprobe_pmu = has_kprobe_pmu();
	f->privileged = kpctl_privileged();
	f->btf = !access(btf_path ? btf_path : KERNEL_BTF, R_OK);
	f->kprobes_list = !access(KPX_KPROBES_LIST, R_OK);
	/* The series is there when one of its knobs or one of its UAPI fields is. */
	f->series = 0;
	for (size_t i = 0; i < NKNOBS; i++) {
		/* debugfs is root's: EACCES means it is there, unreadable. */
		f->knob_there[i] = !access(knobs[i].path, F_OK) || errno == EACCES;
		f->knob[i] = f->knob_there[i] ? kpx_sysctl_read(knobs[i].path) : -1;
		if (f->knob_there[i] && knobs[i].patch)
			f->series = 1;
	}
	for (size_t i = 0; i < NBPF; i++) {
		f->bpf[i] = btf_has_member(bpf_features[i].type, bpf_features[i].member);
		if (f->bpf[i] > 0 && bpf_features[i].patch)
			f->series = 1;
	}
	if (!f->series && !kernel_btf())
		f->series = -1;
}

static void jw_tristate_field(struct kpx_json *w, const char *name, int v)
{
	if (v < 0)
		jw_null_field(w, name);
	else
		jw_bool_field(w, name, v);
}

static void print_feature_json(const struct features *f)
{
	struct kpx_json *w = json_begin();

	jw_string_field(w, "release", f->uts.release);
	jw_tristate_field(w, "series", f->series);
	jw_object_field(w, "requirements");
	jw_tristate_field(w, "kprobes", f->kprobes);
	jw_tristate_field(w, "kprobe_pmu", f->kprobe_pmu);
	jw_bool_field(w, "btf", f->btf);
	jw_tristate_field(w, "privileged", f->privileged);
	jw_bool_field(w, "kprobes_list", f->kprobes_list);
	jw_end_object(w);
	jw_string_field(w, "btf_path", kbtf.path);
	jw_object_field(w, "knobs");
	for (size_t i = 0; i < NKNOBS; i++) {
		if (f->knob[i] < 0)
			jw_null_field(w, knobs[i].name);
		else
			jw_int_field(w, knobs[i].name, f->knob[i]);
	}
	jw_end_object(w);
	jw_object_field(w, "bpf");
	for (size_t i = 0; i < NBPF; i++)
		jw_tristate_field(w, bpf_features[i].key, f->bpf[i]);
	jw_end_object(w);
	json_end();
}

static const char *yes_no(int v)
{
	return v < 0 ? "?" : v ? "yes" : "no";
}

static void print_feature_text(const struct features *f)
{
	char where[160];

	printf("kernel %s: %s\n", f->uts.release,
	       f->series > 0 ? "has the kprobes series (its knobs or UAPI are there)" :
	       f->series == 0 ? "has no part of the kprobes series" :
	       "cannot tell whether it has the kprobes series (no BTF, no knob of it)");
	printf("%-36s %-6s %s\n", "REQUIREMENT", "HAS", "WHERE");
	printf("%-36s %-6s %s\n", "kprobes", yes_no(f->kprobes),
	       "register_kprobe in /proc/kallsyms");
	printf("%-36s %-6s %s\n", "kprobe PMU", yes_no(f->kprobe_pmu),
	       "/sys/bus/event_source/devices/kprobe");
	printf("%-36s %-6s %s\n", "BTF", yes_no(f->btf), kbtf.path);
	printf("%-36s %-6s %s\n", "root (or CAP_BPF and CAP_PERFMON)", yes_no(f->privileged),
	       "this process's capabilities");
	printf("%-36s %-6s %s\n", "debugfs kprobes list (optional)", yes_no(f->kprobes_list),
	       KPX_KPROBES_LIST);
	printf("%-36s %-6s %s\n", "KNOB", "VALUE", "ADDED BY");
	for (size_t i = 0; i < NKNOBS; i++) {
		char val[16];

		if (f->knob[i] >= 0)
			snprintf(val, sizeof(val), "%d", f->knob[i]);
		else
			snprintf(val, sizeof(val), "%s", f->knob_there[i] ? "?" : "absent");
		snprintf(where, sizeof(where), "%s%s", knobs[i].patch ? "the series' " : "upstream",
			 knobs[i].patch ? knobs[i].patch : "");
		printf("%-36s %-6s %s\n", knobs[i].name, val, where);
	}
	printf("%-36s %-6s %s\n", "BPF (from the kernel's BTF)", "HAS", "ADDED BY");
	for (size_t i = 0; i < NBPF; i++) {
		snprintf(where, sizeof(where), "%s%s (%s.%s)",
			 bpf_features[i].patch ? "the series' " : "upstream",
			 bpf_features[i].patch ? bpf_features[i].patch : "",
			 bpf_features[i].type, bpf_features[i].member);
		printf("%-36s %-6s %s\n", bpf_features[i].what, yes_no(f->bpf[i]), where);
	}
}

static void usage_feature(FILE *f)
{
	fprintf(f,
"Usage: kpctl feature [OPTIONS]\n"
"\n"
"What the running kernel has, to ask before trying (as bpftool's 'feature\n"
"probe'): what every kernel-facing command needs (kprobes, the kprobe PMU,\n"
"BTF, root or CAP_BPF and CAP_PERFMON; the debugfs kprobes list is\n"
"optional), the kprobes knobs in /proc/sys/debug and their values (absent on\n"
"a kernel without them), and the UAPI of the kprobes series, from the\n"
"kernel's BTF (--btf FILE reads FILE instead): whether bpf_link_info reports\n"
"the class of a kprobe's probe and of each kprobe_multi address, and whether\n"
"kprobe_multi links take offsets. The series is there when one of its\n"
"knobs or UAPI fields is. Nothing is loaded or attached: no root needed.\n"
"Exit 0 whatever the kernel has.\n"
"\n"
"  -h, --help          this help\n"
"\n"
"Examples:\n"
"  kpctl feature\n"
"  kpctl -j feature | jq .series\n");
}

int cmd_feature(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct features f = {};
	int c;

	optind = 0;
	while ((c = cmd_getopt(argc, argv, "h", opts)) != -1) {
		if (c == 'h')
			return show_help(usage_feature);
		return EXIT_USAGE;	/* said by cmd_getopt() */
	}
	if (optind != argc) {
		errx("feature: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	probe_features(&f);
	if (env.json)
		print_feature_json(&f);
	else
		print_feature_text(&f);
	btf__free(kbtf.btf);
	memset(&kbtf, 0, sizeof(kbtf));
	return EXIT_OK;
}
