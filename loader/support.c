// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the running kernel lacks, said plainly before anything is loaded or
 * attached: kprobes (CONFIG_KPROBES), the kprobe PMU that BPF kprobe links
 * are made of (CONFIG_KPROBE_EVENTS on CONFIG_PERF_EVENTS), and BTF for the
 * CO-RE programs (CONFIG_DEBUG_INFO_BTF); and what this process lacks: the
 * privileges to load BPF programs and attach kprobes. Without these checks
 * libbpf's errors read as if the function or the file were missing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include "common.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON	38
#endif
#ifndef CAP_BPF
#define CAP_BPF		39
#endif

#define KPROBE_PMU	"/sys/bus/event_source/devices/kprobe"
#define PMU_DIR		"/sys/bus/event_source/devices"

/* 1: @name is a core-kernel symbol, 0: it is not, -1: kallsyms unreadable. */
static int kallsyms_has(const char *name)
{
	int count;

	if (kpx_kallsyms_load())
		return -1;
	return kpx_ksym_find(name, &count) ? 1 : 0;
}

/* 1: the kernel has kprobes (register_kprobe), 0: not, -1: cannot tell. */
int has_kprobes(void)
{
	return kallsyms_has("register_kprobe");
}

/* 1: the kprobe PMU is there, 0: not, -1: cannot tell (sysfs not mounted). */
int has_kprobe_pmu(void)
{
	if (!access(KPROBE_PMU, F_OK))
		return 1;
	return access(PMU_DIR, F_OK) ? -1 : 0;
}

/*
 * 0 when BPF kprobes can be attached here as far as userspace can tell;
 * otherwise says why and returns -EOPNOTSUPP. A BPF kprobe link is a perf
 * event of the kprobe PMU (libbpf's fallback, tracefs kprobe_events, needs
 * the same CONFIG_KPROBE_EVENTS and perf events too).
 */
int require_kprobes(void)
{
	int has;

	if (!access(KPROBE_PMU, F_OK))
		return 0;
	if (access(PMU_DIR, F_OK))
		return 0;	/* sysfs not mounted: cannot tell, let the kernel answer */
	has = kallsyms_has("register_kprobe");
	if (has == 0) {
		errx_unavailable("the kernel has no kprobes (CONFIG_KPROBES is off: no "
				 "register_kprobe in /proc/kallsyms, no kprobe PMU at %s); BPF "
				 "kprobes cannot be attached", KPROBE_PMU);
		return -EOPNOTSUPP;
	}
	errx_unavailable("the kernel has no kprobe PMU (%s is absent: CONFIG_KPROBE_EVENTS or "
			 "CONFIG_PERF_EVENTS is off%s); BPF kprobes cannot be attached",
			 KPROBE_PMU, has > 0 ? ", although kprobes are built in" : "");
	return -EOPNOTSUPP;
}

/*
 * kpctl's BPF programs are CO-RE (built against vmlinux.h): they need the
 * kernel's BTF, or a file that stands in for it (--btf, $KPCTL_BTF), which
 * is then handed to libbpf as btf_custom_path. Checked before anything is
 * loaded, so that nothing is left behind.
 */
/* --btf FILE, else $KPCTL_BTF (*@what says which); NULL: the kernel's own. */
const char *btf_override(const char **what)
{
	const char *path = env.btf_path;

	*what = "--btf";
	if (!path || !*path) {
		path = getenv("KPCTL_BTF");
		*what = "KPCTL_BTF";
	}
	return path && *path ? path : NULL;
}

int require_btf(const char **custom_path)
{
	const char *what, *path = btf_override(&what);
	const char *check;

	check = path ? path : KERNEL_BTF;
	if (access(check, R_OK)) {
		int err = errno;

		if (err == ENOENT)
			errx_unavailable("kernel has no BTF (CONFIG_DEBUG_INFO_BTF): %s is "
					 "missing%s%s%s; CO-RE programs cannot load", check,
					 path ? " (" : "", path ? what : "", path ? ")" : "");
		else
			errx_unavailable("cannot read the kernel's BTF at %s: %s; CO-RE programs "
					 "cannot load", check, strerror(err));
		return -ENOENT;
	}
	*custom_path = path;
	return 0;
}

/*
 * Whether this process may load kpctl's programs and attach kprobes: the
 * kernel wants CAP_BPF and CAP_PERFMON for a kprobe program and its perf
 * event (bpf_prog_load(), perf_event_open()), or CAP_SYS_ADMIN, which
 * implies both (and is what kernels before 5.8 want). 1 yes, 0 no, -1
 * cannot tell (capget() failed).
 */
int kpctl_privileged(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};

	if (syscall(SYS_capget, &h, d))
		return -1;
#define HAS(cap) (!!(d[(cap) / 32].effective & (1U << ((cap) % 32))))
	return HAS(CAP_SYS_ADMIN) || (HAS(CAP_BPF) && HAS(CAP_PERFMON));
#undef HAS
}

/*
 * Checked before anything is loaded, after the arguments: without the
 * privileges, every kernel-facing command would fail on the way, in a
 * place that need not say why (links: tracefs unreadable; attach: the
 * program load). Says so and returns -EPERM (exit 3).
 */
int require_privileges(void)
{
	if (kpctl_privileged())
		return 0;
	errx_unavailable("not root (no CAP_BPF and CAP_PERFMON): kpctl needs root, or both "
			 "capabilities, to load BPF programs and attach kprobes");
	return -EPERM;
}
