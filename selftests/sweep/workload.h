/* SPDX-License-Identifier: GPL-2.0 */
/* The sweep's workload: processes that drive kernel paths and check their
 * own results (workload.c). */
#ifndef KPX_SWEEP_WORKLOAD_H
#define KPX_SWEEP_WORKLOAD_H

#include <stdio.h>
#include <sys/types.h>

#define WL_MAX 16

struct wl_worker {
	char name[24];
	pid_t pid;
	long iters;		/* iterations done */
	long checks;		/* results verified (checksums, exit codes, ...) */
	long errors;		/* results that differed */
	char first_error[200];
	int status;		/* waitpid() status; -1: did not exit in time */
	int started;
};

struct wl_shared {
	volatile int stop;
	volatile int gate;	/* set: workers wait at their next pause */
	int nworkers;
	struct wl_worker w[WL_MAX];
};

struct wl_opts {
	const char *self_exe;	/* exec'ed with --exit-code N by forkexec */
	const char *out_dir;	/* a folder on the host (9p), or NULL */
	int nice;		/* niceness of the workers */
	int pause_us;		/* sleep after each iteration */
};

/* Starts the workers; NULL on failure. */
struct wl_shared *wl_start(const struct wl_opts *o);
/* Stops them, waits up to @timeout_s; returns the number of failed ones. */
int wl_stop(struct wl_shared *s, int timeout_s);
/* While @on, the workers wait at their next pause (and their helpers,
 * which wait for them): attaching runs about 4 times faster on an idle
 * TCG guest. */
void wl_gate(struct wl_shared *s, int on);
/* Progress of all workers (iterations so far), for logs. */
long wl_iters(const struct wl_shared *s);
/* One JSON array of the workers' results. */
void wl_json(FILE *f, const struct wl_shared *s);

#endif
