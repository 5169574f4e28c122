// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the running kernel lacks, said plainly before anything is loaded or
 * attached: kprobes (CONFIG_KPROBES), the kprobe PMU that BPF kprobe links
 * are made of (CONFIG_KPROBE_EVENTS on CONFIG_PERF_EVENTS), and BTF for the
 * CO-RE programs (CONFIG_DEBUG_INFO_BTF). Without these checks libbpf's
 * errors read as if the function or the file were missing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common.h"

#define KPROBE_PMU	"/sys/bus/event_source/devices/kprobe"
#define PMU_DIR		"/sys/bus/event_source/devices"
#define KERNEL_BTF	"/sys/kernel/btf/vmlinux"

/* 1: @name is a core-kernel symbol, 0: it is not, -1: kallsyms unreadable. */
static int kallsyms_has(const char *name)
{
	int count;

	if (kpx_kallsyms_load())
		return -1;
	return kpx_ksym_find(name, &count) ? 1 : 0;
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
int require_btf(const char **custom_path)
{
	const char *path = env.btf_path, *what = "--btf";
	const char *check;

	if (!path || !*path) {
		path = getenv("KPCTL_BTF");
		what = "KPCTL_BTF";
	}
	if (path && !*path)
		path = NULL;
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
