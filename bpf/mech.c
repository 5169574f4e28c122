// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* libkpx: mechanism names, probe classes and the debugfs kprobes list. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include "kpx.h"

static const char *const mech_names[KPX_MECH_NR] = {
	[KPX_MECH_FTRACE] = "ftrace",
	[KPX_MECH_CALLOPT] = "callopt",
	[KPX_MECH_JMPOPT] = "jmpopt",
	[KPX_MECH_INT3] = "int3",
	[KPX_MECH_PENDING] = "pending",
	[KPX_MECH_DISABLED] = "disabled",
	[KPX_MECH_GONE] = "gone",
	[KPX_MECH_UNKNOWN] = "unknown",
};

const char *kpx_mech_name(enum kpx_mech m)
{
	return (unsigned int)m < KPX_MECH_NR ? mech_names[m] : mech_names[KPX_MECH_UNKNOWN];
}

enum kpx_mech kpx_mech_from_name(const char *name)
{
	for (int m = 0; m < KPX_MECH_UNKNOWN; m++)
		if (!strcmp(name, mech_names[m]))
			return m;
	return KPX_MECH_UNKNOWN;
}

/* debugfs's flags, most telling first; no flag: int3. */
static const struct {
	const char *flag;
	enum kpx_mech mech;
} debugfs_flags[] = {
	{ "[GONE]", KPX_MECH_GONE },
	{ "[DISABLED]", KPX_MECH_DISABLED },
	{ "[FTRACE]", KPX_MECH_FTRACE },
	{ "[CALLOPT]", KPX_MECH_CALLOPT },
	{ "[OPTIMIZED]", KPX_MECH_JMPOPT },
};

const char *kpx_debugfs_mech_name(const char *flags)
{
	for (size_t i = 0; i < sizeof(debugfs_flags) / sizeof(debugfs_flags[0]); i++)
		if (strstr(flags, debugfs_flags[i].flag))
			return mech_names[debugfs_flags[i].mech];
	return mech_names[KPX_MECH_INT3];
}

static int kprobe_cmp(const void *a, const void *b)
{
	const struct kpx_kprobe *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (int)x->ret - (int)y->ret;
}

int kpx_kprobes_read(struct kpx_kprobes *l)
{
	char line[512], type[4];
	FILE *f;
	int err = 0;

	l->n = 0;
	f = fopen(KPX_KPROBES_LIST, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct kpx_kprobe e = {};
		char *fl;

		/* "ffffffff81234567  k  do_getpgid+0x0    [FTRACE]" */
		if (sscanf(line, "%llx %3s", &e.addr, type) != 2)
			continue;
		e.ret = type[0] == 'r';
		fl = strchr(line, '[');
		snprintf(e.flags, sizeof(e.flags), "%s", fl ? fl : "");
		e.flags[strcspn(e.flags, "\n")] = '\0';
		if (l->n == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 256;
			struct kpx_kprobe *v = realloc(l->v, cap * sizeof(*v));

			if (!v) {
				err = -ENOMEM;
				break;
			}
			l->v = v;
			l->cap = cap;
		}
		l->v[l->n++] = e;
	}
	fclose(f);
	if (l->n)
		qsort(l->v, l->n, sizeof(*l->v), kprobe_cmp);
	return err;
}

const struct kpx_kprobe *kpx_kprobes_find(const struct kpx_kprobes *l, unsigned long long addr,
					  int ret)
{
	size_t lo = 0, hi = l->n;

	/* The first entry at @addr (non-return probes sort first). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->v[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < l->n && l->v[lo].addr == addr; lo++)
		if (ret < 0 || l->v[lo].ret == (ret > 0))
			return &l->v[lo];
	return NULL;
}

void kpx_kprobes_free(struct kpx_kprobes *l)
{
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

/* The debugfs flags a probe can have; a line with none of them: int3. */
static bool has_flag(const struct kpx_kprobe *e, const char *flag)
{
	return e && strstr(e->flags, flag);
}

static bool no_flag(const struct kpx_kprobe *e)
{
	for (size_t i = 0; i < sizeof(debugfs_flags) / sizeof(debugfs_flags[0]); i++)
		if (has_flag(e, debugfs_flags[i].flag))
			return false;
	return true;
}

const char *kpx_mech_resolve(__u32 probe_flags, const struct kpx_kprobe *e, bool list_read,
			     const char **source)
{
	const char *src = "link_info", *m = NULL;

	if (!list_read)
		e = NULL;
	switch (probe_flags) {
	case 0:
		src = e ? "debugfs" : "none";
		m = e ? kpx_debugfs_mech_name(e->flags) : NULL;
		break;
	case BPF_PERF_PROBE_FTRACE:
		m = mech_names[KPX_MECH_FTRACE];
		break;
	case BPF_PERF_PROBE_OPTIMIZED:
		/* The branch is in the text; debugfs names the optimizer. */
		if (has_flag(e, "[OPTIMIZED]"))
			m = mech_names[has_flag(e, "[CALLOPT]") ? KPX_MECH_CALLOPT : KPX_MECH_JMPOPT];
		break;
	case BPF_PERF_PROBE_TRAP:
		/*
		 * debugfs flags a probe [OPTIMIZED] as soon as it is queued for
		 * the optimizer, while the kernel reads it as a trap until the
		 * branch is written: pending. Any other flag disagrees.
		 */
		if (has_flag(e, "[OPTIMIZED]") && !has_flag(e, "[GONE]") &&
		    !has_flag(e, "[DISABLED]") && !has_flag(e, "[FTRACE]"))
			m = mech_names[KPX_MECH_PENDING];
		else if (e && no_flag(e))
			m = mech_names[KPX_MECH_INT3];
		break;
	case BPF_PERF_PROBE_DISARMED:
		m = mech_names[has_flag(e, "[GONE]") ? KPX_MECH_GONE : KPX_MECH_DISABLED];
		break;
	default:	/* not one bit the kernel defines */
		break;
	}
	if (source)
		*source = src;
	return m;
}

int kpx_multi_link_info(int link_fd, __u32 *count, __u64 *addrs, __u64 *cookies,
			__u32 *probe_flags, __u64 *missed)
{
	struct bpf_link_info info;
	__u32 len = sizeof(info);
	int err;

	memset(&info, 0, sizeof(info));
	if (*count && addrs) {
		memset(addrs, 0, *count * sizeof(*addrs));
		info.kprobe_multi.addrs = (__u64)(unsigned long)addrs;
		info.kprobe_multi.cookies = (__u64)(unsigned long)cookies;
		if (probe_flags) {
			memset(probe_flags, 0, *count * sizeof(*probe_flags));
			info.kprobe_multi.probe_flags = (__u64)(unsigned long)probe_flags;
		}
		info.kprobe_multi.count = *count;
	}
	err = bpf_link_get_info_by_fd(link_fd, &info, &len) ? -errno : 0;
	if (err && err != -ENOSPC)
		return err;
	if (info.type != BPF_LINK_TYPE_KPROBE_MULTI)
		return -EINVAL;
	*count = info.kprobe_multi.count;
	if (missed)
		*missed = info.kprobe_multi.missed;
	return err;
}
