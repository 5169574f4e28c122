// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* libkpx: time, the kprobes knobs, percentiles, kernel text. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include "kpx.h"

double kpx_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

unsigned long kpx_gcd(unsigned long a, unsigned long b)
{
	while (b) {
		unsigned long t = a % b;

		a = b;
		b = t;
	}
	return a;
}

int kpx_sysctl_read(const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[16];
	int v = -1;

	if (!f)
		return -1;
	/* A sysctl's integer, or a debugfs bool's Y or N. */
	if (fscanf(f, "%15s", buf) == 1) {
		if (!strcmp(buf, "Y") || !strcmp(buf, "N"))
			v = buf[0] == 'Y';
		else if (sscanf(buf, "%d", &v) != 1 || v < 0)
			v = -1;
	}
	fclose(f);
	return v;
}

long kpx_enabled_functions(void)
{
	FILE *f = fopen("/sys/kernel/tracing/enabled_functions", "r");
	long n = 0;
	int c;

	if (!f)
		return -1;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

int kpx_sysctl_write(const char *path, int val)
{
	FILE *f = fopen(path, "w");
	int err = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%d\n", val) < 0)
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	return err;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double kpx_percentile(const double *v, size_t n, unsigned int permille)
{
	size_t rank;

	if (!n)
		return 0;
	rank = (n * permille + 999) / 1000;	/* ceil(q * n), in integers */
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

struct kpx_pct kpx_percentiles(double *v, size_t n)
{
	struct kpx_pct p = { .n = n };

	if (!n)
		return p;
	for (size_t i = 0; i < n; i++)
		p.total += v[i];
	qsort(v, n, sizeof(*v), cmp_double);
	p.p50 = kpx_percentile(v, n, 500);
	p.p99 = kpx_percentile(v, n, 990);
	p.max = v[n - 1];
	return p;
}

int kpx_read_text(int prog_fd, const void *text_buf, size_t max, unsigned long long addr,
		  void *buf, size_t len)
{
	struct kpx_text_args args = { .addr = addr, .len = len };
	LIBBPF_OPTS(bpf_test_run_opts, opts,
		.ctx_in = &args,
		.ctx_size_in = sizeof(args));	/* copied back in place */
	int err;

	if (prog_fd < 0 || len > max)
		return -EINVAL;
	err = bpf_prog_test_run_opts(prog_fd, &opts);
	if (err)
		return err;
	if (args.ret)
		return args.ret;
	memcpy(buf, text_buf, len);
	return 0;
}
