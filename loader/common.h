/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared between kpctl's subcommands (loader side only). */
#ifndef KPCTL_COMMON_H
#define KPCTL_COMMON_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <bpf/libbpf.h>
#include "kpctl.h"
#include "kpx.h"

#define KPROBES_LIST		KPX_KPROBES_LIST
#define KPROBES_BLACKLIST	KPX_KPROBES_BLACKLIST
#define KPROBES_OPTIMIZATION	KPX_KNOB_OPTIMIZATION
#define KPROBES_CALLOPT		KPX_KNOB_CALLOPT
#define KERNEL_BTF		"/sys/kernel/btf/vmlinux"

/* The version of kpctl's JSON output: "schema" in every object it prints. */
#define KPCTL_SCHEMA	2

enum exit_code {
	EXIT_OK = 0,
	EXIT_FAIL = 1,		/* a check failed, or the kernel refused */
	EXIT_USAGE = 2,		/* bad command line */
	EXIT_UNAVAILABLE = 3,	/* cannot run here: no BTF, no kprobes, no BPF, not root */
};

struct env {
	bool verbose;
	bool json;
	const char *btf_path;	/* --btf FILE, else $KPCTL_BTF; NULL: the kernel's own */
	bool unavailable;	/* errx_unavailable() was called: exit 3 */
	char error[512];	/* the first error, for {"error": ...} */
};

extern struct env env;
extern volatile sig_atomic_t stop_requested;

struct kpctl_bpf;

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
	__u64 ctrl_hits;
	__u32 probe_flags;	/* the class: bpf_link_info's BPF_PERF_PROBE_* (0: not reported) */
	bool link_info_read;	/* probe_flags is the link's (false: no BPF link, --legacy) */
	char mechanism[16];	/* kpx_mech_resolve()'s; "" when it cannot tell (JSON null) */
	char mech_at_attach[16];	/* the mechanism right after the attach returned */
	const char *mech_source;	/* "link_info", "debugfs" or "none" */
	bool multi;		/* one address of a kprobe_multi link ('attach --multi') */
	char flags[64];		/* raw debugfs flags, e.g. "[FTRACE]" */
	double cost_ns;		/* estimated ns per hit; NAN when not measured */
};

/* kpctl.c: the command line */
void errx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* probe.c: a latency object of -j output ("total", "sum", "p50", "p99", "max", "n") */
void json_latency(struct kpx_json *w, const char *name, double total, struct kpx_pct p);
/* A warning: to stderr like errx(), but never the error of -j's document. */
void warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* errx(), and kpctl exits 3: it cannot run on this machine. */
void errx_unavailable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
struct kpx_json *json_begin(void);
void json_end(void);
int show_help(void (*usage)(FILE *f));
struct option;
int cmd_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);

/* probe.c: the probe helpers */
int parse_spec(const char *spec, struct probe *p);
int check_spec_in_bounds(const struct probe *p);
int check_probes(const struct probe *probes, int n);
void probe_mechanism(struct probe *p);
void probe_mechanisms(struct probe *probes, int n);
bool mechanism_settled(const struct probe *p);
/* Whether kpx_mech_resolve() needs the debugfs line for a class (trap,
 * optimized, disarmed), or names the mechanism without it (ftrace, and a
 * word that is not one known bit: null); 0 is not a class */
bool class_needs_list(__u32 probe_flags);
/* "trap", "ftrace", "optimized", "disarmed"; NULL when unknown (JSON null) */
const char *probe_class(const struct probe *p);
/* -j: @name and the mechanism @mech, null when it is "" (unknown) */
void json_mech_field(struct kpx_json *w, const char *name, const char *mech);
/* -j: "probe" (probe_class()) and "probe_flags" (null without a BPF link) */
void json_probe_class(struct kpx_json *w, const struct probe *p);
void probe_link_info(struct probe *p);
/* probes_settled() without reading the mechanisms again (attach --multi) */
bool mechanisms_settled(const struct probe *probes, int n);
const char *attach_error(int err);
void attach_failed(const struct probe *p, int err);
extern enum probe_attach_mode attach_mode;
int attach_probe(struct bpf_program *prog, struct probe *p, int slot);
void detach_probe(struct probe *p);
int wait_mechanism(struct probe *p, const char *want, double secs);
bool probes_settled(struct probe *probes, int n);
void read_counts(struct kpctl_bpf *skel, struct probe *probes, int n);
struct kpctl_bpf *open_skel(void);
int load_skel(struct kpctl_bpf *skel, ...) __attribute__((sentinel));
void reset_counts(struct kpctl_bpf *skel, int n);
long getpgid_self(void);

/* support.c: what the running kernel lacks, said plainly */
int require_kprobes(void);
int has_kprobes(void);
int has_kprobe_pmu(void);
int require_btf(const char **custom_path);
const char *btf_override(const char **what);
int kpctl_privileged(void);
int require_privileges(void);

/* feature.c: whether the kernel's BTF has struct/union TYPE's member
 * PATH ("a.b.c"): 1 yes, 0 no, -1 cannot tell (no BTF) */
int btf_has_member(const char *type, const char *path);

/* explain.c: FUNC, FUNC+MID and FUNC+SINGLE of the getpgid function */
int default_getpgid_sites(struct kpctl_bpf *skel, char (*specs)[256], int max);
/* explain.c: why the kernel refused a probe at @p, as 'explain' decides it */
int explain_refusal(const struct probe *p, char *buf, size_t len);

int cmd_attach(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_regs(int argc, char **argv);
int cmd_stress(int argc, char **argv);
int cmd_links(int argc, char **argv);
int cmd_feature(int argc, char **argv);

/* ksyms.c: the running kernel's symbols */
struct ksym {
	char name[128];
	unsigned long long addr;
	unsigned long long size;	/* to the next symbol, as kallsyms computes it */
	char next[128];			/* the symbol that follows */
	char type;
	int count;			/* symbols of this name */
};

int ksym_lookup(const char *name, struct ksym *sym);
int ksym_lookup_func(const char *arg, struct ksym *sym);
int ksym_lookup_module(const char *mod, const char *name, struct ksym *sym);
int ksym_func_exists(const char *func);
bool ksym_addrs_visible(void);
unsigned long long ksym_addr(const char *name);
const char *getpgid_func(void);

#endif /* KPCTL_COMMON_H */
