/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libkpx: what kpctl, the stress and sweep controllers and kpx-bench share
 * (build/libkpx.a, built by bpf/bpf.mk from the sources in bpf/).
 *
 *  - time: kpx_now_ms();
 *  - the kprobes knobs in /proc/sys/debug: their paths, read and write;
 *  - mechanism names ("callopt", "int3", ...), and the probe classes the
 *    kernel reports in bpf_link_info (BPF_PERF_PROBE_TRAP is "trap"): the
 *    mechanism from a class and the probe's line of the debugfs kprobes
 *    list, which alone tells callopt from jmpopt and int3 from pending;
 *  - the debugfs kprobes list, read once, sorted, looked up by address;
 *  - latency percentiles (nearest rank);
 *  - the core-kernel symbols of /proc/kallsyms, read once, sorted;
 *  - a JSON writer that cannot write invalid JSON;
 *  - reading kernel text with a BPF_PROG_RUN program.
 */
#ifndef KPX_H
#define KPX_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <linux/types.h>
#include "kpx_text.h"

/* --- time ------------------------------------------------------------------ */

/* CLOCK_MONOTONIC in milliseconds. */
double kpx_now_ms(void);

unsigned long kpx_gcd(unsigned long a, unsigned long b);

/* --- knobs ----------------------------------------------------------------- */

/*
 * kprobes-optimization is upstream's sysctl; callopt chooses between the two
 * optimizers (patch 0004, debugfs); fast_detach, cleared, forces stock's
 * synchronous detach (a test-only patch at the series' end, debugfs).
 */
#define KPX_KNOB_OPTIMIZATION	"/proc/sys/debug/kprobes-optimization"
#define KPX_KNOB_CALLOPT	"/sys/kernel/debug/kprobes/callopt"
#define KPX_KNOB_FAST_DETACH	"/sys/kernel/debug/kprobes/fast_detach"

#define KPX_KPROBES_LIST	"/sys/kernel/debug/kprobes/list"
#define KPX_KPROBES_BLACKLIST	"/sys/kernel/debug/kprobes/blacklist"

/* An integer sysctl or a debugfs bool (1/0); -1 when absent or unreadable. */
int kpx_sysctl_read(const char *path);
/* 0, or -errno. */
int kpx_sysctl_write(const char *path, int val);
/*
 * ftrace's count of patched functions (the lines of enabled_functions); -1
 * when it cannot be read (no tracefs).
 */
long kpx_enabled_functions(void);

/* --- mechanisms ------------------------------------------------------------ */

/* In the order the tools count and print them; KPX_MECH_UNKNOWN last. */
enum kpx_mech {
	KPX_MECH_FTRACE,
	KPX_MECH_CALLOPT,
	KPX_MECH_JMPOPT,
	KPX_MECH_INT3,
	KPX_MECH_PENDING,
	KPX_MECH_DISABLED,
	KPX_MECH_GONE,
	KPX_MECH_UNKNOWN,
	KPX_MECH_NR,
};

/* "ftrace", "callopt", "jmpopt", "int3", "pending", "disabled", "gone", "unknown" */
const char *kpx_mech_name(enum kpx_mech m);
/* The mechanism of that name; KPX_MECH_UNKNOWN for any other name. */
enum kpx_mech kpx_mech_from_name(const char *name);
/* From the flags of a debugfs kprobes list line ("[FTRACE]", "[OPTIMIZED]",
 * ...); no flag is int3. */
const char *kpx_debugfs_mech_name(const char *flags);
/*
 * The class of a probe (bpf_link_info's perf_event.flags, or an entry of
 * kprobe_multi.probe_flags) is named by the series' libbpf:
 * libbpf_perf_probe_class_str(), as bpftool names it.
 */

/*
 * A kprobe_multi link's addresses, cookies and probe classes (bpf_link_info
 * kprobe_multi; each array may be NULL, addrs only with the others). On
 * entry *count is the arrays' length (0: only ask the count); on return the
 * link's count, and *missed (if not NULL) its misses. Fills what fits; a
 * kernel that does not report classes leaves @probe_flags 0. Returns 0 or
 * -errno (-ENOSPC: more addresses than *count on entry).
 */
int kpx_multi_link_info(int link_fd, __u32 *count, __u64 *addrs, __u64 *cookies,
			__u32 *probe_flags, __u64 *missed);

/* --- the debugfs kprobes list ---------------------------------------------- */

struct kpx_kprobe {
	unsigned long long addr;
	bool ret;		/* a return probe ("r") */
	char flags[64];		/* "[FTRACE]", "" */
};

struct kpx_kprobes {
	struct kpx_kprobe *v;	/* sorted by address, then ret */
	size_t n, cap;
};

/* Reads the whole list again (into @l, reusing its memory); 0 or -errno. */
int kpx_kprobes_read(struct kpx_kprobes *l);
/* The probe at @addr: a return probe when @ret is 1, not when 0, either when -1. */
const struct kpx_kprobe *kpx_kprobes_find(const struct kpx_kprobes *l, unsigned long long addr,
					  int ret);
void kpx_kprobes_free(struct kpx_kprobes *l);

/*
 * The mechanism of a probe, from its class @probe_flags (as above) and @e,
 * its line of the debugfs kprobes list (kpx_kprobes_find(); NULL: not
 * listed; ignored when @list_read is false: the list could not be read):
 *
 *   FTRACE                        "ftrace"
 *   OPTIMIZED and [OPTIMIZED]     "callopt" with [CALLOPT], else "jmpopt"
 *   TRAP and [OPTIMIZED]          "pending" (queued for the optimizer)
 *   TRAP and no flag              "int3"
 *   DISARMED                      "gone" with [GONE], else "disabled"
 *   0 and a line                  kpx_debugfs_mech_name() of the line
 *
 * NULL when it cannot tell: OPTIMIZED or TRAP without the line, or with a
 * line that disagrees (the two are read at different times), 0 without a
 * line, a value that is not one known bit. *@source (if not NULL) gets
 * where the answer came from: "link_info" for any @probe_flags but 0 (the
 * kernel's class, refined with debugfs where the class alone does not name
 * the mechanism), "debugfs" when the line alone told, "none" when nothing
 * did.
 */
const char *kpx_mech_resolve(__u32 probe_flags, const struct kpx_kprobe *e, bool list_read,
			     const char **source);

/* --- percentiles ----------------------------------------------------------- */

/*
 * Nearest rank: the q-quantile of n sorted values is v[ceil(q * n) - 1]
 * (p50 = v[ceil(n / 2) - 1], p99 = v[ceil(0.99 n) - 1]); all 0 when n == 0.
 */
struct kpx_pct {
	double p50, p99, max, total;
	size_t n;
};

/* Sorts @v. */
struct kpx_pct kpx_percentiles(double *v, size_t n);
/* @permille: 500 for p50, 990 for p99; @v sorted. */
double kpx_percentile(const double *v, size_t n, unsigned int permille);

/* --- kallsyms -------------------------------------------------------------- */

struct kpx_ksym {
	const char *name;
	unsigned long long addr;
	char type;
};

/*
 * Reads the core-kernel symbols of /proc/kallsyms (not modules, BPF or
 * trampolines) once; later calls return the first call's result. 0, or
 * -errno. Without root every address reads 0.
 */
int kpx_kallsyms_load(void);
/*
 * Takes the symbols from @f (in /proc/kallsyms' format; closed here)
 * instead of the running kernel's: for a kernel image read offline. Only
 * before the first lookup: -EBUSY after it.
 */
int kpx_kallsyms_load_stream(FILE *f);
/* The first symbol of @name (NULL: none); *@count gets how many have it. */
const struct kpx_ksym *kpx_ksym_find(const char *name, int *count);
/* The first symbol at @addr (NULL: none). */
const struct kpx_ksym *kpx_ksym_at(unsigned long long addr);
/* The symbol at the next higher address (NULL: none). */
const struct kpx_ksym *kpx_ksym_next(const struct kpx_ksym *sym);

/* --- JSON ------------------------------------------------------------------ */

/*
 * A JSON writer: objects and arrays nest, commas and escapes are its job.
 * Strings are escaped (control characters, invalid UTF-8 as U+FFFD), numbers
 * that are not finite are written as null. A document ends with a newline
 * when its outermost object or array is closed.
 */
#define KPX_JSON_DEPTH	32

struct kpx_json {
	FILE *f;
	int depth;
	bool first[KPX_JSON_DEPTH];	/* nothing written yet at this depth */
	bool in_object[KPX_JSON_DEPTH];
	bool after_name;
	unsigned long docs;		/* documents completed */
};

void jw_init(struct kpx_json *w, FILE *f);
void jw_start_object(struct kpx_json *w);
void jw_end_object(struct kpx_json *w);
void jw_start_array(struct kpx_json *w);
void jw_end_array(struct kpx_json *w);
void jw_name(struct kpx_json *w, const char *name);
void jw_string(struct kpx_json *w, const char *s);
void jw_stringf(struct kpx_json *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jw_int(struct kpx_json *w, long long v);
void jw_uint(struct kpx_json *w, unsigned long long v);
/* @prec digits after the point; null when not finite. */
void jw_float(struct kpx_json *w, int prec, double v);
void jw_bool(struct kpx_json *w, bool v);
void jw_null(struct kpx_json *w);
/* "0x..." */
void jw_hex(struct kpx_json *w, unsigned long long v);

/* name + value */
void jw_string_field(struct kpx_json *w, const char *name, const char *s);
void jw_int_field(struct kpx_json *w, const char *name, long long v);
void jw_uint_field(struct kpx_json *w, const char *name, unsigned long long v);
void jw_float_field(struct kpx_json *w, const char *name, int prec, double v);
void jw_bool_field(struct kpx_json *w, const char *name, bool v);
void jw_null_field(struct kpx_json *w, const char *name);
void jw_hex_field(struct kpx_json *w, const char *name, unsigned long long v);
void jw_object_field(struct kpx_json *w, const char *name);	/* name + { */
void jw_array_field(struct kpx_json *w, const char *name);	/* name + [ */

/* @s as a JSON string, with the writer's escapes, to @f. */
void kpx_json_fputs(FILE *f, const char *s);

/* --- kernel text ----------------------------------------------------------- */

/*
 * Copies @len bytes of kernel text at @addr to @buf with the program
 * @prog_fd, which reads into @text_buf (its .bss buffer, @max bytes).
 * 0, or a negative error.
 */
int kpx_read_text(int prog_fd, const void *text_buf, size_t max, unsigned long long addr,
		  void *buf, size_t len);

#endif /* KPX_H */
