// SPDX-License-Identifier: GPL-2.0
/*
 * kpx-sweep: attach a BPF kprobe link at every site of a list, in batches,
 * while a workload (workload.c) drives the kernel, and record per site how
 * the kernel ran the probe and what happened.
 *
 * The site list comes from scripts/sites/sweep-sites (build/vmlinux decoded on
 * the host), with link-time addresses: on a kernel booted with KASLR they are
 * moved by the one offset that the sites named by a unique symbol agree on
 * (relocate_sites(); the summary's kaslr_offset). Site i is in batch i mod NB (NB = the number of batches), so
 * that the sites of one batch lie far apart (no probe inside another's
 * displaced instructions) and neighbouring boundaries go to different
 * batches; the batches run in the order k * STEP mod NB (STEP >= 5, prime
 * to NB), so that a batch never follows one whose sites lie within 5 bytes
 * of its own (the kernel releases detached kprobes a little later, in a
 * worker). --batches FIRST-LAST selects runs (k), for resuming. Per batch:
 *
 *   attach  bpf_program__attach_kprobe_opts(FUNC, offset), or by address
 *           when FUNC is not unique, cookie = site index (BPF link mode),
 *           from --attach-threads threads at once (default 1); a refused
 *           attach is recorded with its errno. The workload pauses
 *           meanwhile, except in every --attach-load'th batch (default 4):
 *           under TCG an attach costs 4-5 times more with 4 busy vCPUs
 *           (every text poke waits for IPIs), and the batches attached
 *           under load still race the patching with CPUs running the code
 *   settle  until no site is "pending" (the multi-instruction callopt
 *           waits for RCU-tasks first) or of a trap or optimized class
 *           whose mechanism cannot be told yet, or, on kernels that do not
 *           report the class (stock), until the optimized set in debugfs
 *           is stable, at most --settle-ms
 *   hold    --hold-ms while the workload runs (it runs all the time)
 *   record  mechanism: the class in bpf_link_info (perf_event.flags, or
 *           kprobe_multi.probe_flags) of every link first, then
 *           /sys/kernel/debug/kprobes/list, which tells callopt from
 *           jmpopt and int3 from pending (libkpx's kpx_mech_resolve());
 *           debugfs alone ([FTRACE], [CALLOPT], [OPTIMIZED], none: int3)
 *           where the kernel reports no class; the source is recorded. A
 *           mechanism that cannot be told is read again, up to 3 times
 *   detach  all links (--detach-threads at once), one RCU grace period
 *           (membarrier), then the hit counts are taken; a count that
 *           moves later is a late run
 *   drain   count the batch's kprobes still registered; --drain-ms waits
 *           for them to go (default 0: no wait)
 *
 * At the end every kprobe must be gone from the debugfs list within 30 s.
 * The site results go to --out as JSON lines, one object per site, written
 * after each batch (so a run that hangs keeps the batches before); the
 * progress of each batch goes to --progress and to the kernel log
 * ("kpx-sweep: batch B/NB ..." via /dev/kmsg); the summary (workload
 * results, late runs, totals) to --summary.
 *
 * A site fails when its probe landed at another address than the site (the
 * kernel moves +0 of an ENDBR function to +4: allowed), when a run saw another pt_regs ip than the
 * address + 1, when its program ran after detach + grace period, or when
 * its mechanism cannot be told. Exit status: 0 when no site failed and the
 * workload's results hold, 1 otherwise, 2 on bad usage or a site list for
 * another kernel.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "kpx.h"
#include "kpx_sweep.h"
#include "kpx_sweep.skel.h"
#include "workload.h"


enum result { R_NONE, R_ATTACHED, R_REFUSED, R_FAILED };
static const char * const result_names[] = { "none", "attached", "refused", "failed" };

struct site {
	unsigned long long addr;
	char func[128];
	unsigned long off;
	bool by_addr;
	char group[24];
	char cls[48];
	int len;
	char bytes[48];
	char notes[16];		/* "alt": in an alternative; "-" */
	/* results */
	char live[2 * SWEEP_TEXT_MAX + 1];	/* the instruction in the running kernel */
	char live16[2 * SWEEP_TEXT_MAX + 1];	/* 16 bytes there (what a call displaces) */
	bool in_blacklist;
	enum result result;
	int err;
	char why[160];
	struct bpf_link *link;
	struct bpf_link *mlink;	/* --multi: the kprobe_multi link it is in (shared) */
	unsigned long long link_addr;
	char mech_settle[16], mech[16];
	const char *mech_source;
	__u32 probe_flags;	/* the class in the link info (0: not reported) */
	bool info_err;		/* the link info could not be read */
	char flags[64];
	unsigned long long hits, missed;
	double attach_ms;
	int batch;
};

static struct site *sites;
static int nsites;
static struct kpx_sweep_bpf *skel;
static bool verbose;
static FILE *progress;
static int kmsg_fd = -1;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!verbose && level != LIBBPF_WARN)
		return 0;
	/* Refused attaches are expected and recorded: not worth a warning. */
	if (!verbose && (strstr(fmt, "failed to create") || strstr(fmt, "failed to attach")))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* A line in the progress file and the kernel log (for splat attribution). */
static void mark(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (progress) {
		fprintf(progress, "%.3f %s\n", kpx_now_ms() / 1e3, buf);
		fflush(progress);
		fsync(fileno(progress));
	}
	if (kmsg_fd >= 0)
		dprintf(kmsg_fd, "<6>kpx-sweep: %s\n", buf);
}

/* --- the site list ------------------------------------------------------ */

static char list_build_id[80];

static int read_sites(const char *path)
{
	char line[1024];
	int cap = 0, lineno = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "kpx-sweep: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		struct site *s;
		char how[8];
		int n;

		lineno++;
		if (line[0] == '#') {
			sscanf(line, "# build-id %79s", list_build_id);
			continue;
		}
		if (nsites == cap) {
			cap = cap ? 2 * cap : 4096;
			sites = realloc(sites, cap * sizeof(*sites));
			if (!sites)
				return -1;
		}
		s = &sites[nsites];
		memset(s, 0, sizeof(*s));
		line[strcspn(line, "\n")] = '\0';
		strcpy(s->notes, "-");
		n = sscanf(line, "%llx\t%127[^\t]\t%li\t%7[^\t]\t%23[^\t]\t%47[^\t]\t%d\t%47s\t%15s",
			   &s->addr, s->func, &s->off, how, s->group, s->cls, &s->len, s->bytes,
			   s->notes);
		if (n != 8 && n != 9) {
			fprintf(stderr, "kpx-sweep: %s:%d: bad line\n", path, lineno);
			return -1;
		}
		s->by_addr = !strcmp(how, "addr");
		s->batch = -1;
		nsites++;
	}
	fclose(f);
	if (nsites > SWEEP_MAX_SITES) {
		fprintf(stderr, "kpx-sweep: %d sites, at most %d\n", nsites, SWEEP_MAX_SITES);
		return -1;
	}
	return 0;
}

/*
 * KASLR: the list holds link-time addresses (sweep-sites reads vmlinux), and
 * x86-64 KASLR moves the kernel image as a whole, so one offset relocates
 * every site. It is taken from the sites attached by name whose name is
 * unique in kallsyms (running address + off - listed address), and every
 * such site must give the same one: a list that does not fit this image in
 * that way is refused. 0 on a kernel booted with nokaslr.
 */
static long long kaslr_offset;

static int relocate_sites(void)
{
	int checked = 0;

	if (kpx_kallsyms_load()) {
		fprintf(stderr, "kpx-sweep: cannot read /proc/kallsyms\n");
		return -1;
	}
	for (int i = 0; i < nsites; i++) {
		const struct kpx_ksym *k;
		long long d;
		int count;

		if (sites[i].by_addr)
			continue;
		k = kpx_ksym_find(sites[i].func, &count);
		if (!k || count != 1)
			continue;
		if (!k->addr) {
			fprintf(stderr, "kpx-sweep: kallsyms shows no addresses (root needed)\n");
			return -1;
		}
		d = (long long)(k->addr + sites[i].off - sites[i].addr);
		if (checked++ && d != kaslr_offset) {
			fprintf(stderr,
				"kpx-sweep: %s+0x%lx is 0x%llx in the list and 0x%llx in kallsyms: not one KASLR offset (0x%llx before)\n",
				sites[i].func, sites[i].off, sites[i].addr, k->addr + sites[i].off,
				(unsigned long long)kaslr_offset);
			return -1;
		}
		kaslr_offset = d;
	}
	if (!checked) {
		fprintf(stderr, "kpx-sweep: no site with a unique name: cannot tell the KASLR offset\n");
		return -1;
	}
	for (int i = 0; i < nsites; i++)
		sites[i].addr += kaslr_offset;
	return 0;
}

/* The running kernel's GNU build ID, hex. */
static int kernel_build_id(char *out, size_t len)
{
	unsigned char buf[4096];
	size_t n, off = 0;
	FILE *f = fopen("/sys/kernel/notes", "r");

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	while (off + 12 <= n) {
		unsigned int namesz, descsz, type;
		size_t name, desc;

		memcpy(&namesz, buf + off, 4);
		memcpy(&descsz, buf + off + 4, 4);
		memcpy(&type, buf + off + 8, 4);
		name = off + 12;
		desc = name + ((namesz + 3) & ~3U);
		if (desc + descsz > n)
			break;
		if (type == 3 && namesz == 4 && !memcmp(buf + name, "GNU", 4) && 2 * descsz < len) {
			for (unsigned int i = 0; i < descsz; i++)
				sprintf(out + 2 * i, "%02x", buf[desc + i]);
			return 0;
		}
		off = desc + ((descsz + 3) & ~3U);
	}
	return -1;
}

/* --- the kernel's view ---------------------------------------------------- */

struct range {
	unsigned long long lo, hi;
};
static struct range *blacklist;
static int nblacklist;

static void read_blacklist(void)
{
	char line[512];
	FILE *f = fopen(KPX_KPROBES_BLACKLIST, "r");
	int cap = 0;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		struct range r;

		if (sscanf(line, "0x%llx-0x%llx", &r.lo, &r.hi) != 2)
			continue;
		if (nblacklist == cap) {
			cap = cap ? 2 * cap : 1024;
			blacklist = realloc(blacklist, cap * sizeof(*blacklist));
			if (!blacklist)
				break;
		}
		blacklist[nblacklist++] = r;
	}
	fclose(f);
}

static bool blacklisted(unsigned long long a)
{
	for (int i = 0; i < nblacklist; i++)
		if (a >= blacklist[i].lo && a < blacklist[i].hi)
			return true;
	return false;
}

static int read_live_text(unsigned long long addr, unsigned char *buf, int len)
{
	return kpx_read_text(bpf_program__fd(skel->progs.sweep_read_text), skel->bss->text_buf,
			     SWEEP_TEXT_MAX, addr, buf, len);
}

/* The debugfs kprobes list (libkpx), read again for every batch. */
static struct kpx_kprobes kplist;

static const struct kpx_kprobe *kp_find(unsigned long long addr)
{
	return kpx_kprobes_find(&kplist, addr, -1);
}

/* KPX_SWEEP_MECH_SOURCE=debugfs: ignore the class in the link info, as on a
 * kernel that does not report it (to try the stock path on ours). */
static bool debugfs_only;
static bool multi_mode;

/*
 * --multi: a site's address, class and misses from its link's info. A
 * link holds many sites: its info is read once per batch_mechanisms() pass
 * (multi_cache_reset()) and kept, indexed by cookie (the site's index).
 */
static struct {
	struct bpf_link *link;
	__u32 cnt;
	__u64 missed, *addrs, *cookies;
	__u32 *probe_flags;
} mcache;

static void multi_cache_reset(void)
{
	free(mcache.addrs);
	free(mcache.cookies);
	free(mcache.probe_flags);
	memset(&mcache, 0, sizeof(mcache));
}

static int multi_info(struct site *s, int i, __u32 *probe_flags)
{
	__u32 cnt = 0;

	if (mcache.link != s->mlink) {
		multi_cache_reset();
		if (kpx_multi_link_info(bpf_link__fd(s->mlink), &cnt, NULL, NULL, NULL, NULL))
			return -1;
		mcache.addrs = calloc(cnt, sizeof(*mcache.addrs));
		mcache.cookies = calloc(cnt, sizeof(*mcache.cookies));
		mcache.probe_flags = calloc(cnt, sizeof(*mcache.probe_flags));
		if (!mcache.addrs || !mcache.cookies || !mcache.probe_flags ||
		    kpx_multi_link_info(bpf_link__fd(s->mlink), &cnt, mcache.addrs,
					mcache.cookies, mcache.probe_flags, &mcache.missed)) {
			multi_cache_reset();
			return -1;
		}
		mcache.link = s->mlink;
		mcache.cnt = cnt;
	}
	s->missed = mcache.missed;
	for (__u32 k = 0; k < mcache.cnt; k++)
		if (mcache.cookies[k] == (__u64)i) {
			s->link_addr = mcache.addrs[k];
			*probe_flags = mcache.probe_flags[k];
			return 0;
		}
	return -1;
}

/* Fills link_addr, missed and *@probe_flags, the class in the link info
 * (0 when the kernel does not report one). 0, or -1 when it cannot be read. */
static int link_info(struct site *s, int i, __u32 *probe_flags)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);

	*probe_flags = 0;
	if (multi_mode)
		return multi_info(s, i, probe_flags);

	if (bpf_link_get_info_by_fd(bpf_link__fd(s->link), &info, &len))
		return -1;
	if (info.type != BPF_LINK_TYPE_PERF_EVENT ||
	    info.perf_event.type != BPF_PERF_EVENT_KPROBE)
		return -1;
	s->link_addr = info.perf_event.kprobe.addr;
	s->missed = info.perf_event.kprobe.missed;
	*probe_flags = info.perf_event.flags;
	return 0;
}

/* The class for the progress marks, before the mechanism is told:
 * "class:trap", ..., "class:-" for 0 (not reported), "class:0x.." else. */
static const char *class_mark(__u32 probe_flags, char *buf, size_t len)
{
	const char *name = libbpf_perf_probe_class_str(probe_flags);

	if (name)
		snprintf(buf, len, "class:%s", name);
	else if (probe_flags)
		snprintf(buf, len, "class:0x%x", probe_flags);
	else
		snprintf(buf, len, "class:-");
	return buf;
}

/*
 * The mechanism of every attached site of the batch, into @field: the
 * classes of all links first, then one read of the debugfs list, then
 * kpx_mech_resolve() (a probe the optimizer finishes in between reads
 * "pending", and is read again). A mechanism that cannot be told is
 * recorded as "unknown"; *@unknown counts those sites. Returns the number
 * still pending (and of a trap or optimized class not told yet), or -1
 * when no link reports a class (then @optimized counts the debugfs
 * [OPTIMIZED] ones).
 */
static int batch_mechanisms(int *idx, int n, bool settle, int *optimized, int *unknown)
{
	int pending = 0, reported = 0;
	bool list_read;

	multi_cache_reset();
	for (int k = 0; k < n; k++) {
		struct site *s = &sites[idx[k]];

		if (s->result == R_ATTACHED)
			s->info_err = link_info(s, idx[k], &s->probe_flags) != 0;
	}
	list_read = !kpx_kprobes_read(&kplist);
	*optimized = 0;
	*unknown = 0;
	for (int k = 0; k < n; k++) {
		struct site *s = &sites[idx[k]];
		const struct kpx_kprobe *e;
		__u32 cls = debugfs_only || s->info_err ? 0 : s->probe_flags;
		const char *m;
		char *field = settle ? s->mech_settle : s->mech;

		if (s->result != R_ATTACHED)
			continue;
		e = list_read ? kp_find(s->link_addr) : NULL;
		snprintf(s->flags, sizeof(s->flags), "%s", e ? e->flags : "-");
		m = kpx_mech_resolve(cls, e, list_read, &s->mech_source);
		reported += cls != 0;
		if (e && strstr(e->flags, "[OPTIMIZED]"))
			(*optimized)++;
		snprintf(field, 16, "%s", m ? m : "unknown");
		*unknown += !m;
		pending += m ? !strcmp(m, "pending") :
			   cls == BPF_PERF_PROBE_TRAP || cls == BPF_PERF_PROBE_OPTIMIZED;
	}
	return reported ? pending : -1;
}

/* --- batches ----------------------------------------------------------- */

struct opts {
	int batch;
	int hold_ms;
	int settle_ms;
	int stable_ms;
	int drain_ms;
	int detach_threads;
	int attach_threads;
	int attach_load;	/* every Nth batch attaches under load (0: none) */
	int step;		/* batch b + 1 runs after batch b + step (mod NB) */
	int first_batch, last_batch;
};

struct detach_arg {
	int *idx, n, t, nt;
};

static void *detach_thread(void *p)
{
	struct detach_arg *a = p;

	for (int k = a->t; k < a->n; k += a->nt) {
		struct site *s = &sites[a->idx[k]];

		bpf_link__destroy(s->link);
		s->link = NULL;
	}
	return NULL;
}

static void attach_site(struct site *s, int i);

static void *attach_thread(void *p)
{
	struct detach_arg *a = p;

	for (int k = a->t; k < a->n; k += a->nt)
		attach_site(&sites[a->idx[k]], a->idx[k]);
	return NULL;
}

static void attach_site(struct site *s, int i)
{
	LIBBPF_OPTS(bpf_kprobe_opts, o, .offset = s->by_addr ? s->addr : s->off,
		    .bpf_cookie = (__u64)i, .attach_mode = PROBE_ATTACH_MODE_LINK);
	double t0 = kpx_now_ms();

	__atomic_store_n(&skel->bss->hits[i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&skel->bss->last_ip[i], 0, __ATOMIC_RELAXED);
	s->link = bpf_program__attach_kprobe_opts(skel->progs.sweep_probe,
						  s->by_addr ? NULL : s->func, &o);
	s->attach_ms = kpx_now_ms() - t0;
	/* Which sites are armed, in order, in case the VM dies while attaching
	 * (scripts/check/sweep tries the last ones first). No fsync: the run folder
	 * is uncached 9p, every write reaches the host. */
	if (progress) {
		flockfile(progress);
		fprintf(progress, "%.3f armed %d 0x%llx %s\n", kpx_now_ms() / 1e3, i, s->addr,
			s->link ? "ok" : "refused");
		fflush_unlocked(progress);
		funlockfile(progress);
	}
	if (!s->link) {
		s->err = errno;
		s->result = R_REFUSED;
		snprintf(s->mech, sizeof(s->mech), "refused");
		return;
	}
	s->result = R_ATTACHED;
}

/* --multi: the links of the batch being run. */
static struct bpf_link **mlinks;
static int nmlinks, mlinks_cap;

/*
 * --multi: attach @n sites as one kprobe_multi link (addrs = the site's
 * function, offsets = the site's offset, cookie = its index). The kernel
 * attaches all or none, so a refused link is split in two, down to single
 * sites: each site refused alone gets its own errno, and every refusal on
 * the way checks that a refused link leaves nothing registered (the drain
 * and the end of the run count what the debugfs list still shows).
 */
static void multi_attach(int *ids, int n)
{
	unsigned long *addrs = calloc(n, sizeof(*addrs)), *offs = calloc(n, sizeof(*offs));
	__u64 *cookies = calloc(n, sizeof(*cookies));
	struct bpf_link *l = NULL;
	double t0 = kpx_now_ms();
	int err = ENOMEM;

	if (addrs && offs && cookies) {
		LIBBPF_OPTS(bpf_kprobe_multi_opts, mo, .addrs = addrs, .offsets = offs,
			    .cookies = cookies, .cnt = n);

		for (int k = 0; k < n; k++) {
			struct site *s = &sites[ids[k]];

			addrs[k] = s->addr - s->off;
			offs[k] = s->off;
			cookies[k] = ids[k];
			__atomic_store_n(&skel->bss->hits[ids[k]], 0, __ATOMIC_RELAXED);
			__atomic_store_n(&skel->bss->last_ip[ids[k]], 0, __ATOMIC_RELAXED);
		}
		l = bpf_program__attach_kprobe_multi_opts(skel->progs.sweep_probe_multi, NULL, &mo);
		err = l ? 0 : errno;
	}
	free(addrs);
	free(offs);
	free(cookies);
	if (l) {
		if (nmlinks == mlinks_cap) {
			mlinks_cap = mlinks_cap ? 2 * mlinks_cap : 64;
			mlinks = realloc(mlinks, mlinks_cap * sizeof(*mlinks));
			if (!mlinks) {
				fprintf(stderr, "kpx-sweep: out of memory\n");
				exit(1);
			}
		}
		mlinks[nmlinks++] = l;
		for (int k = 0; k < n; k++) {
			sites[ids[k]].mlink = l;
			sites[ids[k]].result = R_ATTACHED;
			sites[ids[k]].attach_ms = (kpx_now_ms() - t0) / n;
		}
		if (progress)
			fprintf(progress, "%.3f armed %d sites from %d in one link\n",
				kpx_now_ms() / 1e3, n, ids[0]);
		return;
	}
	if (n == 1) {
		struct site *s = &sites[ids[0]];

		s->err = err;
		s->result = R_REFUSED;
		s->attach_ms = kpx_now_ms() - t0;
		snprintf(s->mech, sizeof(s->mech), "refused");
		return;
	}
	multi_attach(ids, n / 2);
	multi_attach(ids + n / 2, n - n / 2);
}

static void multi_detach(void)
{
	for (int k = 0; k < nmlinks; k++)
		bpf_link__destroy(mlinks[k]);
	nmlinks = 0;
}

static bool endbr(const char *hex)
{
	return !strncmp(hex, "f30f1efa", 8);
}

/*
 * The pt_regs ip a run at @s must see: the probed address + 1 on every
 * kprobe mechanism. --multi reports the address asked, not the kprobe's:
 * an entry (offset 0) is the fprobe's, whose ip is the return address of
 * the fentry call (the call, after an ENDBR, + 5).
 */
static unsigned long long multi_want_ip(const struct site *s)
{
	if (!multi_mode)
		return s->link_addr + 1;
	if (!s->off)
		return s->link_addr + (endbr(s->bytes) ? 4 : 0) + 5;
	return s->link_addr + 1;
}

/* After detach and a grace period: hits, and the checks of one site. */
static void finish_site(struct site *s, int i)
{
	unsigned long long ip;

	if (s->result != R_ATTACHED)
		return;
	s->hits = __atomic_load_n(&skel->bss->hits[i], __ATOMIC_RELAXED);
	ip = __atomic_load_n(&skel->bss->last_ip[i], __ATOMIC_RELAXED);
	if (s->link_addr != s->addr &&
	    !(s->link_addr == s->addr + 4 && endbr(s->bytes))) {
		s->result = R_FAILED;
		snprintf(s->why, sizeof(s->why), "probe at 0x%llx, not at the site",
			 s->link_addr);
	} else if (s->hits && ip != multi_want_ip(s)) {
		s->result = R_FAILED;
		snprintf(s->why, sizeof(s->why), "pt_regs ip 0x%llx, want 0x%llx", ip,
			 multi_want_ip(s));
	} else if (!strcmp(s->mech, "unknown") || !strcmp(s->mech, "error")) {
		s->result = R_FAILED;
		snprintf(s->why, sizeof(s->why), "mechanism unknown (%s)", s->mech_source);
	}
}

/* One JSON line per site (libkpx's writer: site names and reasons escaped). */
static void json_site(FILE *f, const struct site *s, int i)
{
	struct kpx_json w;

	jw_init(&w, f);
	jw_start_object(&w);
	jw_int_field(&w, "idx", i);
	jw_hex_field(&w, "addr", s->addr);
	jw_name(&w, "site");
	jw_stringf(&w, "%s+0x%lx", s->func, s->off);
	jw_string_field(&w, "func", s->func);
	jw_uint_field(&w, "off", s->off);
	jw_string_field(&w, "how", s->by_addr ? "addr" : "sym");
	jw_string_field(&w, "group", s->group);
	jw_string_field(&w, "class", s->cls);
	jw_int_field(&w, "len", s->len);
	jw_string_field(&w, "bytes", s->bytes);
	jw_string_field(&w, "notes", s->notes);
	jw_string_field(&w, "live", s->live);
	jw_string_field(&w, "live16", s->live16);
	jw_bool_field(&w, "live_same", !strncmp(s->live, s->bytes, 2 * s->len));
	jw_bool_field(&w, "blacklisted", s->in_blacklist);
	jw_int_field(&w, "batch", s->batch);
	jw_string_field(&w, "result", result_names[s->result]);
	jw_int_field(&w, "errno", s->err);
	jw_string_field(&w, "error", s->err ? strerrorname_np(s->err) ?: "?" : "");
	jw_string_field(&w, "why", s->why);
	jw_hex_field(&w, "link_addr", s->link_addr);
	jw_string_field(&w, "mechanism", s->mech[0] ? s->mech : "none");
	jw_string_field(&w, "mech_settle", s->mech_settle[0] ? s->mech_settle : "none");
	jw_string_field(&w, "mech_source", s->mech_source ? s->mech_source : "none");
	jw_string_field(&w, "debugfs", s->flags);
	jw_uint_field(&w, "hits", s->hits);
	jw_uint_field(&w, "missed", s->missed);
	jw_float_field(&w, "attach_ms", 3, s->attach_ms);
	jw_end_object(&w);
}

struct totals {
	double attach_ms, settle_ms, hold_ms, detach_ms, drain_ms, loaded_attach_ms;
	int loaded_batches;
	int batches, attached, refused, failed, still_listed;
	long drain_timeouts;
};

static int run_batch(const struct opts *o, int b, int nb, int run, struct totals *t, FILE *out,
		     struct wl_shared *wl)
{
	int *idx = malloc(sizeof(int) * (nsites / nb + 2)), n = 0, attached = 0, pending;
	int nt = o->detach_threads, optimized, last_opt = -1, unknown;
	double t0, t1, stable_since, settled;
	bool loaded;
	pthread_t th[64];
	struct detach_arg da[64];

	for (int i = b; i < nsites; i += nb)
		idx[n++] = i;
	mark("batch %d/%d attach %d sites (0x%llx..), run %d, workload %ld", b, nb, n,
	     sites[idx[0]].addr, run, wl ? wl_iters(wl) : 0);
	/* The workload pauses while this batch attaches, unless it is one of
	 * the batches attached under load (--attach-load). */
	loaded = o->attach_load > 0 && run % o->attach_load == 0;
	wl_gate(wl, !loaded);
	t0 = kpx_now_ms();
	for (int k = 0; k < n; k++)
		sites[idx[k]].batch = b;
	if (multi_mode) {
		multi_attach(idx, n);
	} else if (n <= 8 || o->attach_threads <= 1) {
		for (int k = 0; k < n; k++) {
			struct site *s = &sites[idx[k]];

			attach_site(s, idx[k]);
			if (n <= 8) {		/* bisection: in case the VM dies */
				const char *m = "refused";
				char buf[24];
				__u32 cls;

				if (s->result == R_ATTACHED)
					m = link_info(s, idx[k], &cls) ? "error" :
					    class_mark(cls, buf, sizeof(buf));
				mark("site 0x%llx %s+0x%lx %s %s", s->addr, s->func, s->off,
				     m, s->bytes);
			}
		}
	} else {
		nt = o->attach_threads > 64 ? 64 : o->attach_threads;
		for (int k = 0; k < nt; k++) {
			da[k] = (struct detach_arg){ idx, n, k, nt };
			pthread_create(&th[k], NULL, attach_thread, &da[k]);
		}
		for (int k = 0; k < nt; k++)
			pthread_join(th[k], NULL);
		nt = o->detach_threads;
	}
	for (int k = 0; k < n; k++)
		attached += sites[idx[k]].result == R_ATTACHED;
	t1 = kpx_now_ms();
	t->attach_ms += t1 - t0;
	if (loaded) {
		t->loaded_batches++;
		t->loaded_attach_ms += t1 - t0;
	}
	wl_gate(wl, 0);
	mark("batch %d/%d attached %d of %d in %.0f ms%s", b, nb, attached, n, t1 - t0,
	     loaded ? " under load" : "");
	/* Settle. */
	stable_since = kpx_now_ms();
	for (;;) {
		pending = batch_mechanisms(idx, n, true, &optimized, &unknown);
		if (pending == 0)
			break;
		if (pending < 0) {		/* no mechanism in the link info */
			if (optimized != last_opt) {
				last_opt = optimized;
				stable_since = kpx_now_ms();
			} else if (kpx_now_ms() - stable_since >= o->stable_ms) {
				break;
			}
		}
		if (kpx_now_ms() - t1 >= o->settle_ms)
			break;
		usleep(50000);
	}
	/* Small batches (bisection): each site's mechanism, in case the VM dies. */
	for (int k = 0; k < n && n <= 8; k++)
		mark("site 0x%llx %s+0x%lx %s %s", sites[idx[k]].addr, sites[idx[k]].func,
		     sites[idx[k]].off, sites[idx[k]].result == R_ATTACHED ?
		     sites[idx[k]].mech_settle : "refused", sites[idx[k]].bytes);
	t0 = kpx_now_ms();
	settled = t0 - t1;
	t->settle_ms += settled;
	usleep(o->hold_ms * 1000);
	t1 = kpx_now_ms();
	t->hold_ms += t1 - t0;
	/* The class and the debugfs line are read apart: a site whose
	 * mechanism they cannot tell is read again before it fails. */
	batch_mechanisms(idx, n, false, &optimized, &unknown);
	for (int r = 0; r < 3 && unknown; r++) {
		usleep(20000);
		batch_mechanisms(idx, n, false, &optimized, &unknown);
	}
	mark("batch %d/%d detach (settled in %.0f ms, %d pending then, %d unknown)", b, nb,
	     settled, pending, unknown);
	/* Detach. */
	t0 = kpx_now_ms();
	if (nt > 64)
		nt = 64;
	if (multi_mode) {
		multi_detach();
		for (int k = 0; k < n; k++)
			sites[idx[k]].mlink = NULL;
	} else {
		for (int k = 0; k < nt; k++) {
			da[k] = (struct detach_arg){ idx, n, k, nt };
			pthread_create(&th[k], NULL, detach_thread, &da[k]);
		}
		for (int k = 0; k < nt; k++)
			pthread_join(th[k], NULL);
	}
	syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
	t1 = kpx_now_ms();
	t->detach_ms += t1 - t0;
	for (int k = 0; k < n; k++)
		finish_site(&sites[idx[k]], idx[k]);
	/* Drain: the kernel releases detached kprobes shortly after. */
	t0 = kpx_now_ms();
	for (;;) {
		int left = 0;

		kpx_kprobes_read(&kplist);
		for (int k = 0; k < n; k++) {
			struct site *s = &sites[idx[k]];

			if (s->link_addr && s->result != R_REFUSED && kp_find(s->link_addr))
				left++;
		}
		if (!left)
			break;
		if (kpx_now_ms() - t0 >= o->drain_ms) {
			t->drain_timeouts++;
			t->still_listed += left;
			break;
		}
		usleep(20000);
	}
	t->drain_ms += kpx_now_ms() - t0;
	for (int k = 0; k < n; k++) {
		struct site *s = &sites[idx[k]];

		t->attached += s->result == R_ATTACHED;
		t->refused += s->result == R_REFUSED;
		t->failed += s->result == R_FAILED;
		json_site(out, s, idx[k]);
	}
	fflush(out);
	fsync(fileno(out));
	t->batches++;
	mark("batch %d/%d done", b, nb);
	free(idx);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: kpx-sweep --sites FILE [--out FILE] [--summary FILE] [--progress FILE]\n"
"                 [--batch N] [--hold-ms MS] [--settle-ms MS] [--stable-ms MS]\n"
"                 [--drain-ms MS] [--detach-threads N] [--batches FIRST[-LAST]]\n"
"                 [--attach-load N] [--no-workload] [--nice N] [--pause-us US]\n"
"                 [--ignore-build-id] [--multi] [-v]\n"
"  Attaches a BPF kprobe at every site of FILE (scripts/sites/sweep-sites), N at a\n"
"  time (default 200), holds each batch while the workload runs, detaches, and\n"
"  writes one JSON object per site. See the head of kpx_sweep.c.\n"
"  --multi: each batch as kprobe_multi links with offsets (function + offset,\n"
"  split in two while the kernel refuses one, down to single sites).\n"
"kpx-sweep --exit-code N: exit with status N (the workload execs this).\n");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "sites", required_argument, NULL, 's' },
		{ "out", required_argument, NULL, 'o' },
		{ "summary", required_argument, NULL, 'S' },
		{ "progress", required_argument, NULL, 'P' },
		{ "batch", required_argument, NULL, 'b' },
		{ "hold-ms", required_argument, NULL, 'H' },
		{ "settle-ms", required_argument, NULL, 'T' },
		{ "stable-ms", required_argument, NULL, 'Z' },
		{ "drain-ms", required_argument, NULL, 'D' },
		{ "detach-threads", required_argument, NULL, 'j' },
		{ "attach-threads", required_argument, NULL, 'J' },
		{ "batches", required_argument, NULL, 'B' },
		{ "no-workload", no_argument, NULL, 'W' },
		{ "nice", required_argument, NULL, 'n' },
		{ "pause-us", required_argument, NULL, 'p' },
		{ "attach-load", required_argument, NULL, 'L' },
		{ "ignore-build-id", no_argument, NULL, 'I' },
		{ "multi", no_argument, NULL, 'M' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct opts o = { .batch = 200, .hold_ms = 400, .settle_ms = 3000, .stable_ms = 600,
			  .drain_ms = 0, .detach_threads = 8, .attach_threads = 1, .attach_load = 4,
			  .first_batch = 0,
			  .last_batch = -1 };
	struct wl_opts wo = { .nice = 5, .pause_us = 200 };
	const char *sites_path = NULL, *out_path = NULL, *summary_path = NULL;
	const char *progress_path = NULL;
	bool workload = true, ignore_id = false;
	char kid[80] = "", self[4096], *outdir = getenv("KPX_OUT");
	struct totals t = {};
	struct wl_shared *wl = NULL;
	struct rlimit rl;
	FILE *out, *sum;
	int c, nb, wl_failed = 0, late = 0, live_err = 0, blisted = 0, ret, left_behind = 0;
	double start, end;

	if (argc == 3 && !strcmp(argv[1], "--exit-code"))
		return atoi(argv[2]);
	while ((c = getopt_long(argc, argv, "s:o:vh", lopts, NULL)) != -1) {
		switch (c) {
		case 's': sites_path = optarg; break;
		case 'o': out_path = optarg; break;
		case 'S': summary_path = optarg; break;
		case 'P': progress_path = optarg; break;
		case 'b': o.batch = atoi(optarg); break;
		case 'H': o.hold_ms = atoi(optarg); break;
		case 'T': o.settle_ms = atoi(optarg); break;
		case 'Z': o.stable_ms = atoi(optarg); break;
		case 'D': o.drain_ms = atoi(optarg); break;
		case 'j': o.detach_threads = atoi(optarg); break;
		case 'J': o.attach_threads = atoi(optarg); break;
		case 'M': multi_mode = true; break;
		case 'B':
			if (sscanf(optarg, "%d-%d", &o.first_batch, &o.last_batch) == 1)
				o.last_batch = o.first_batch;
			break;
		case 'W': workload = false; break;
		case 'n': wo.nice = atoi(optarg); break;
		case 'p': wo.pause_us = atoi(optarg); break;
		case 'L': o.attach_load = atoi(optarg); break;
		case 'I': ignore_id = true; break;
		case 'v': verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!sites_path || optind != argc || o.batch < 1 || o.detach_threads < 1) {
		usage(stderr);
		return 2;
	}
	if (read_sites(sites_path) || !nsites)
		return 2;
	if (kernel_build_id(kid, sizeof(kid)) || strcmp(kid, list_build_id)) {
		fprintf(stderr, "kpx-sweep: %s is for build ID %s, the running kernel is %s\n",
			sites_path, list_build_id[0] ? list_build_id : "(none)", kid[0] ? kid : "(unknown)");
		if (!ignore_id)
			return 2;
	}
	if (relocate_sites())
		return 2;
	if (kaslr_offset)
		fprintf(stderr, "kpx-sweep: KASLR offset 0x%llx applied to the list\n",
			(unsigned long long)kaslr_offset);
	nb = (nsites + o.batch - 1) / o.batch;
	/*
	 * Run order: batch k * step mod NB, so that the batch after batch b is
	 * not b + 1..b + 4, whose sites lie within 5 bytes of b's: a probe of
	 * the batch before may still be registered for a moment (the kernel
	 * releases detached kprobes in a worker).
	 */
	o.step = 1;
	if (nb >= 10)
		for (o.step = 5; kpx_gcd(o.step, nb) != 1; o.step++)
			;
	if (o.last_batch < 0 || o.last_batch >= nb)
		o.last_batch = nb - 1;
	if (!out_path || !summary_path || !progress_path) {
		static char a[4200], b[4200], p[4200];

		if (!outdir)
			outdir = "/tmp";
		snprintf(a, sizeof(a), "%s/sweep-sites.jsonl", outdir);
		snprintf(b, sizeof(b), "%s/sweep-summary.json", outdir);
		snprintf(p, sizeof(p), "%s/sweep-progress", outdir);
		out_path = out_path ?: a;
		summary_path = summary_path ?: b;
		progress_path = progress_path ?: p;
	}
	out = fopen(out_path, "w");
	progress = fopen(progress_path, "w");
	if (!out || !progress) {
		fprintf(stderr, "kpx-sweep: cannot write %s or %s\n", out_path, progress_path);
		return 2;
	}
	kmsg_fd = open("/dev/kmsg", O_WRONLY);
	/* Two descriptors per link, 300 links at a time and more. */
	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	libbpf_set_print(libbpf_print);
	debugfs_only = getenv("KPX_SWEEP_MECH_SOURCE") &&
		       !strcmp(getenv("KPX_SWEEP_MECH_SOURCE"), "debugfs");
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[sl > 0 ? sl : 0] = '\0';
	wo.self_exe = self;
	wo.out_dir = getenv("KPX_OUT");

	skel = kpx_sweep_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "kpx-sweep: load: %s\n", strerror(errno));
		return 1;
	}
	read_blacklist();
	for (int i = 0; i < nsites; i++) {
		struct site *s = &sites[i];
		unsigned char b[SWEEP_TEXT_MAX];
		int len = s->len > SWEEP_TEXT_MAX ? SWEEP_TEXT_MAX : s->len;

		if (len < 1)
			len = 1;
		if (read_live_text(s->addr, b, SWEEP_TEXT_MAX) && read_live_text(s->addr, b, len)) {
			live_err++;
			snprintf(s->live, sizeof(s->live), "?");
			snprintf(s->live16, sizeof(s->live16), "?");
		} else {
			for (int k = 0; k < len; k++)
				sprintf(s->live + 2 * k, "%02x", b[k]);
			for (int k = 0; k < SWEEP_TEXT_MAX; k++)
				sprintf(s->live16 + 2 * k, "%02x", b[k]);
		}
		s->in_blacklist = blacklisted(s->addr);
		blisted += s->in_blacklist;
	}
	printf("kpx-sweep: %d sites in %d batches of up to %d (runs %d-%d), kernel %s, "
	       "%d in the kprobes blacklist\n", nsites, nb, o.batch, o.first_batch,
	       o.last_batch, kid, blisted);
	fflush(stdout);
	if (workload) {
		wl = wl_start(&wo);
		if (!wl) {
			fprintf(stderr, "kpx-sweep: cannot start the workload\n");
			return 1;
		}
		sleep(1);
	}
	mark("start: %d sites, %d batches, runs %d-%d, step %d", nsites, nb, o.first_batch,
	     o.last_batch, o.step);
	start = kpx_now_ms();
	for (int k = o.first_batch; k <= o.last_batch; k++) {
		run_batch(&o, (int)((long)k * o.step % nb), nb, k, &t, out, wl);
		if (k % 10 == 9 || k == o.last_batch) {
			printf("kpx-sweep: %d/%d batches, %.0f s: %d attached, %d refused, %d failed\n",
			       k + 1, nb, (kpx_now_ms() - start) / 1e3, t.attached, t.refused, t.failed);
			fflush(stdout);
		}
	}
	end = kpx_now_ms();
	/* Every kprobe of the run is released in the end. */
	for (double t0 = kpx_now_ms(); ; usleep(100000)) {
		kpx_kprobes_read(&kplist);
		left_behind = (int)kplist.n;
		if (!left_behind || kpx_now_ms() - t0 > 30000)
			break;
	}
	/* Late runs: no count may move after its detach + grace period. */
	usleep(100000);
	syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
	{
		FILE *lf = NULL;

		for (int i = 0; i < nsites; i++) {
			struct site *s = &sites[i];
			unsigned long long h;

			if (s->batch < 0 || s->result == R_REFUSED)
				continue;
			h = __atomic_load_n(&skel->bss->hits[i], __ATOMIC_RELAXED);
			if (h == s->hits)
				continue;
			late++;
			if (!lf) {
				char p[4300];

				snprintf(p, sizeof(p), "%s.late", out_path);
				lf = fopen(p, "w");
			}
			if (lf)
				fprintf(lf, "{\"idx\":%d,\"addr\":\"0x%llx\",\"late_hits\":%llu}\n",
					i, s->addr, h - s->hits);
		}
		if (lf)
			fclose(lf);
	}
	if (wl)
		wl_failed = wl_stop(wl, 60);
	mark("end: %d attached, %d refused, %d failed, %d late, workload %d failed",
	     t.attached, t.refused, t.failed, late, wl_failed);
	ret = (t.failed || late || wl_failed || skel->bss->bad_cookie || left_behind) ? 1 : 0;
	sum = fopen(summary_path, "w");
	if (sum) {
		fprintf(sum, "{\"sites\":%d,\"batches\":%d,\"batch_size\":%d,\"first_batch\":%d,"
			"\"last_batch\":%d,\"batches_run\":%d,\"kernel_build_id\":\"%s\","
			"\"list_build_id\":\"%s\",\"kaslr_offset\":%lld,\"attached\":%d,\"refused\":%d,\"failed\":%d,"
			"\"late\":%d,\"bad_cookie\":%llu,\"live_read_errors\":%d,"
			"\"blacklisted\":%d,\"seconds\":%.1f,\"ms\":{\"attach\":%.0f,"
			"\"settle\":%.0f,\"hold\":%.0f,\"detach\":%.0f,\"drain\":%.0f,"
			"\"attach_under_load\":%.0f},\"batches_attached_under_load\":%d,"
			"\"drain_timeouts\":%ld,\"still_listed\":%d,\"left_behind\":%d,"
			"\"step\":%d,\"hold_ms\":%d,\"settle_ms\":%d,"
			"\"workload_failed\":%d,\"workload\":",
			nsites, nb, o.batch, o.first_batch, o.last_batch, t.batches, kid,
			list_build_id, kaslr_offset, t.attached, t.refused, t.failed, late,
			(unsigned long long)skel->bss->bad_cookie, live_err, blisted,
			(end - start) / 1e3, t.attach_ms, t.settle_ms, t.hold_ms, t.detach_ms,
			t.drain_ms, t.loaded_attach_ms, t.loaded_batches, t.drain_timeouts, t.still_listed, left_behind, o.step, o.hold_ms,
			o.settle_ms,
			wl_failed);
		if (wl)
			wl_json(sum, wl);
		else
			fprintf(sum, "null");
		fprintf(sum, ",\"ok\":%s}\n", ret ? "false" : "true");
		fclose(sum);
	}
	printf("kpx-sweep: %d sites in %.0f s: %d attached, %d refused, %d failed, %d late; "
	       "workload %s\n", t.attached + t.refused + t.failed, (end - start) / 1e3,
	       t.attached, t.refused, t.failed, late,
	       !wl ? "off" : wl_failed ? "FAILED" : "ok");
	fclose(out);
	fclose(progress);
	kpx_sweep_bpf__destroy(skel);
	return ret;
}
