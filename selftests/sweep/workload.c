// SPDX-License-Identifier: GPL-2.0
/*
 * The sweep's workload: one process per worker (some fork helpers of their
 * own), running until told to stop, each checking its own results:
 *
 *  getpgid   getpgid(0), getppid() and getpid() return the known values
 *  forkexec  fork; the child exits with a chosen code, or execs the sweep
 *            binary with --exit-code N; the parent checks the exit status
 *  fileio/N  files in a nested tmpfs folder, written in random chunks with
 *            a checksum, read back whole and at random offsets, renamed,
 *            listed, stat'ed; all verified again when the run ends
 *  hostio    a file in the run folder on the host (9p, uncached: every read
 *            goes through virtio and its interrupts), and a system binary
 *            on the host's root with its page cache dropped: checksums must
 *            not change
 *  timers    timerfd, setitimer/SIGALRM, nanosleep, clock_nanosleep,
 *            poll and select timeouts: no early return, time never goes back
 *  pipe      ping-pong over two pipes with a child, sequence numbers and
 *            checksummed 256 KiB payloads (the writer blocks: switches)
 *  unix      the same over a unix stream socket pair and datagrams
 *  mem       anonymous memory faulted in, verified, dropped (MADV_DONTNEED
 *            reads zeros), write-protected, and copied on write by a child
 *            (the parent's copy must not change)
 *  append    three children append checksummed records to one file, under
 *            flock() now and then; every record intact and in order
 *  futex     two processes hand a counter back and forth with futexes
 *
 * Softirqs come from what the VM has: the tick and timer wheel (timers,
 * sleeps), RCU callbacks (every exit, close and unlink frees through RCU),
 * the scheduler's load balancing (4 busy vCPUs), and virtio interrupts.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kpx.h"
#include "workload.h"

static struct wl_shared *S;
static const struct wl_opts *O;

static void wl_err(struct wl_worker *w, const char *fmt, ...)
{
	va_list ap;

	if (!w->errors++) {
		va_start(ap, fmt);
		vsnprintf(w->first_error, sizeof(w->first_error), fmt, ap);
		va_end(ap);
	}
}

static long futex(uint32_t *a, int op, uint32_t v);

static void gate(void)
{
	struct timespec ts = { 0, 100000000 };

	while (S->gate && !S->stop)
		syscall(SYS_futex, &S->gate, FUTEX_WAIT, 1, &ts, NULL, 0);
}

static void pace(void)
{
	if (O->pause_us > 0)
		usleep(O->pause_us);
	gate();
}

void wl_gate(struct wl_shared *s, int on)
{
	if (!s)
		return;
	__atomic_store_n(&s->gate, on, __ATOMIC_SEQ_CST);
	if (!on)
		syscall(SYS_futex, &s->gate, FUTEX_WAKE, 1 << 30, NULL, NULL, 0);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ULL;
	return h;
}
#define FNV0 0xcbf29ce484222325ULL

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* Byte @i of the content with seed @seed: random access, so any range can
 * be checked without keeping the content. */
static unsigned char content(uint64_t seed, uint64_t i)
{
	return (unsigned char)(mix(seed ^ (i >> 3)) >> (8 * (i & 7)));
}

static void fill(uint64_t seed, uint64_t off, unsigned char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = content(seed, off + i);
}

static uint64_t rnd_state;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t r = write(fd, c, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= r;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= r;
	}
	return 0;
}

static double now_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* --- workers ---------------------------------------------------------- */

static void w_getpgid(struct wl_worker *w)
{
	pid_t me, parent = getppid();

	setpgid(0, 0);
	me = getpid();
	do {
		for (int i = 0; i < 500; i++) {
			long g = syscall(SYS_getpgid, 0);

			if (g != me)
				wl_err(w, "getpgid(0) = %ld, want %d", g, me);
			if (getppid() != parent)
				wl_err(w, "getppid() = %d, want %d", getppid(), parent);
			if (syscall(SYS_getpid) != me)
				wl_err(w, "getpid() changed");
			w->checks++;
		}
		w->iters++;
		pace();
	} while (!S->stop);
}

static void w_forkexec(struct wl_worker *w)
{
	for (long k = 0; !k || !S->stop; k++) {
		int code = (int)(k % 251), st;
		char arg[16];
		pid_t p;

		snprintf(arg, sizeof(arg), "%d", code);
		p = fork();
		if (p < 0) {
			wl_err(w, "fork: %s", strerror(errno));
			sleep(1);
			continue;
		}
		if (!p) {
			if (k & 1) {
				execl(O->self_exe, "kpx-sweep", "--exit-code", arg, (char *)NULL);
				_exit(255);
			}
			_exit(code ^ (getpid() == getppid()));
		}
		if (waitpid(p, &st, 0) != p)
			wl_err(w, "waitpid: %s", strerror(errno));
		else if (!WIFEXITED(st) || WEXITSTATUS(st) != code)
			wl_err(w, "child %s exited with status 0x%x, want code %d",
			       k & 1 ? "(exec)" : "(fork)", st, code);
		w->checks++;
		w->iters++;
		pace();
	}
}

#define IO_SLOTS 12
struct io_slot {
	int used;
	uint64_t seed, size, sum;
};

static int verify_file(const char *path, const struct io_slot *s, unsigned char *buf,
		       size_t cap, char *why, size_t whylen)
{
	uint64_t sum = FNV0, got = 0;
	int fd = open(path, O_RDONLY);
	ssize_t r;

	if (fd < 0) {
		snprintf(why, whylen, "open %s: %s", path, strerror(errno));
		return -1;
	}
	while ((r = read(fd, buf, 1 + rnd() % cap)) > 0) {
		sum = fnv(sum, buf, r);
		got += r;
	}
	close(fd);
	if (r < 0 || got != s->size || sum != s->sum) {
		snprintf(why, whylen, "%s: %llu bytes, checksum %016llx; want %llu, %016llx",
			 path, (unsigned long long)got, (unsigned long long)sum,
			 (unsigned long long)s->size, (unsigned long long)s->sum);
		return -1;
	}
	return 0;
}

static void w_fileio(struct wl_worker *w)
{
	struct io_slot slot[IO_SLOTS] = {};
	static unsigned char buf[65536], ref[256];
	char dir[128], deep[200], path[256], tmp[256], why[400];
	int nfiles = 0;

	snprintf(dir, sizeof(dir), "/tmp/kpx-sweep-io.%d", getpid());
	snprintf(deep, sizeof(deep), "%s/a/b/c/d", dir);
	for (char *p = deep + strlen(dir); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		mkdir(deep, 0755);
		*p = '/';
	}
	mkdir(deep, 0755);
	snprintf(path, sizeof(path), "%s/link", dir);
	if (symlink("a/b/c/d", path))
		wl_err(w, "symlink: %s", strerror(errno));
	for (long k = 0; !k || !S->stop; k++) {
		struct io_slot *s = &slot[k % IO_SLOTS];
		uint64_t off, sum = FNV0;
		struct stat st;
		int fd;

		/* Through the symlink half of the time: a longer walk. */
		snprintf(path, sizeof(path), "%s/%s/f%ld", dir, k & 1 ? "link" : "a/b/c/d",
			 k % IO_SLOTS);
		if (s->used) {
			if (verify_file(path, s, buf, sizeof(buf), why, sizeof(why)))
				wl_err(w, "reread: %s", why);
			w->checks++;
		}
		s->seed = mix(k * 2654435761ULL ^ getpid());
		s->size = 1 + rnd() % 200000;
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			wl_err(w, "create %s: %s", path, strerror(errno));
			s->used = 0;
			continue;
		}
		for (off = 0; off < s->size;) {
			size_t n = 1 + rnd() % sizeof(buf);

			if (n > s->size - off)
				n = s->size - off;
			fill(s->seed, off, buf, n);
			sum = fnv(sum, buf, n);
			if (write_all(fd, buf, n)) {
				wl_err(w, "write %s: %s", path, strerror(errno));
				break;
			}
			off += n;
		}
		if (fsync(fd))
			wl_err(w, "fsync: %s", strerror(errno));
		close(fd);
		s->sum = sum;
		s->used = 1;
		if (verify_file(path, s, buf, sizeof(buf), why, sizeof(why)))
			wl_err(w, "readback: %s", why);
		w->checks++;
		/* A random range, with pread. */
		fd = open(path, O_RDONLY);
		if (fd >= 0) {
			off = rnd() % s->size;
			size_t n = s->size - off < sizeof(ref) ? s->size - off : sizeof(ref);
			unsigned char want[sizeof(ref)];

			fill(s->seed, off, want, n);
			if (pread(fd, ref, n, off) != (ssize_t)n || memcmp(ref, want, n))
				wl_err(w, "pread %s at %llu differs", path, (unsigned long long)off);
			if (fstat(fd, &st) || (uint64_t)st.st_size != s->size)
				wl_err(w, "fstat %s: size %lld, want %llu", path,
				       (long long)st.st_size, (unsigned long long)s->size);
			close(fd);
			w->checks++;
		} else {
			wl_err(w, "open %s: %s", path, strerror(errno));
		}
		/* Rename away and back; every 5th file goes away. */
		snprintf(tmp, sizeof(tmp), "%s/moved", dir);
		if (rename(path, tmp) || rename(tmp, path))
			wl_err(w, "rename %s: %s", path, strerror(errno));
		if (k % 5 == 4) {
			if (unlink(path))
				wl_err(w, "unlink %s: %s", path, strerror(errno));
			s->used = 0;
		}
		/* The folder lists exactly the files we have. */
		nfiles = 0;
		for (int i = 0; i < IO_SLOTS; i++)
			nfiles += slot[i].used;
		{
			DIR *d = opendir(deep);
			struct dirent *de;
			int n = 0;

			while (d && (de = readdir(d)))
				n += de->d_name[0] == 'f';
			if (d)
				closedir(d);
			if (!d || n != nfiles)
				wl_err(w, "%s lists %d files, want %d", deep, n, nfiles);
			w->checks++;
		}
		/* seq_file and procfs. */
		fd = open("/proc/self/status", O_RDONLY);
		if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
			wl_err(w, "/proc/self/status: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		w->iters++;
		pace();
	}
	/* Verify after: every file still holds what was written. */
	for (int i = 0; i < IO_SLOTS; i++) {
		if (!slot[i].used)
			continue;
		snprintf(path, sizeof(path), "%s/a/b/c/d/f%d", dir, i);
		if (verify_file(path, &slot[i], buf, sizeof(buf), why, sizeof(why)))
			wl_err(w, "final: %s", why);
		w->checks++;
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/link", dir);
	unlink(path);
	for (char *p = deep + strlen(deep); p > deep + strlen(dir); p--) {
		if (*p == '/' || !*p) {
			*p = '\0';
			rmdir(deep);
		}
	}
	rmdir(dir);
}

static void w_hostio(struct wl_worker *w)
{
	static unsigned char buf[65536];
	char path[512], why[400];
	struct io_slot host = {}, self = {};
	uint64_t sum = FNV0;
	int fd;

	if (O->out_dir) {
		snprintf(path, sizeof(path), "%s/workload-hostio.%d", O->out_dir, getpid());
		host.seed = mix(getpid());
		host.size = 1 << 20;
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		for (uint64_t off = 0; fd >= 0 && off < host.size; off += sizeof(buf)) {
			fill(host.seed, off, buf, sizeof(buf));
			sum = fnv(sum, buf, sizeof(buf));
			if (write_all(fd, buf, sizeof(buf)))
				wl_err(w, "write %s: %s", path, strerror(errno));
		}
		if (fd < 0)
			wl_err(w, "create %s: %s", path, strerror(errno));
		else
			close(fd);
		host.sum = sum;
		host.used = fd >= 0;
	}
	/*
	 * A system binary on the host's root (cached 9p: its pages are dropped
	 * before each read). Not the sweep binary, which a build in the shared
	 * checkout may replace meanwhile.
	 */
	const char *bin = access("/bin/busybox", R_OK) ? "/bin/bash" : "/bin/busybox";

	self.size = 0;
	sum = FNV0;
	fd = open(bin, O_RDONLY);
	if (fd >= 0) {
		ssize_t r;

		while ((r = read(fd, buf, sizeof(buf))) > 0) {
			sum = fnv(sum, buf, r);
			self.size += r;
		}
		close(fd);
		self.sum = sum;
		self.used = 1;
	} else {
		wl_err(w, "open %s: %s", bin, strerror(errno));
	}
	do {
		if (host.used) {
			if (verify_file(path, &host, buf, sizeof(buf), why, sizeof(why)))
				wl_err(w, "%s", why);
			w->checks++;
		}
		if (self.used) {
			fd = open(bin, O_RDONLY);
			if (fd >= 0) {
				posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
				close(fd);
			}
			if (verify_file(bin, &self, buf, sizeof(buf), why, sizeof(why)))
				wl_err(w, "%s", why);
			w->checks++;
		}
		w->iters++;
		pace();
	} while (!S->stop);
	if (host.used)
		unlink(path);
}

static volatile long alarms;
static void on_alarm(int sig)
{
	alarms++;
}

static void w_timers(struct wl_worker *w)
{
	struct itimerspec its = { { 0, 2000000 }, { 0, 2000000 } };
	struct itimerval itv = { { 0, 5000 }, { 0, 5000 } };
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
	long expirations = 0;
	double last = 0;

	if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL)) {
		wl_err(w, "timerfd: %s", strerror(errno));
		return;
	}
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &itv, NULL);
	for (long k = 0; !k || !S->stop; k++) {
		struct timespec req = { 0, 300000 }, abs;
		struct pollfd pfd = { .fd = -1 };
		struct timeval tv = { 0, 500 };
		uint64_t exp;
		double t0, t1;
		long a0;
		int r;

		if (read(tfd, &exp, sizeof(exp)) == sizeof(exp)) {
			expirations += exp;
			if (!exp)
				wl_err(w, "timerfd read 0 expirations");
		} else if (errno != EINTR) {
			wl_err(w, "timerfd read: %s", strerror(errno));
		}
		t0 = now_s(CLOCK_MONOTONIC);
		if (t0 < last)
			wl_err(w, "CLOCK_MONOTONIC went back by %g s", last - t0);
		while (nanosleep(&req, &req) && errno == EINTR)
			;
		t1 = now_s(CLOCK_MONOTONIC);
		if (t1 - t0 < 300e-6 - 1e-9)
			wl_err(w, "nanosleep(300 us) returned after %g s", t1 - t0);
		clock_gettime(CLOCK_MONOTONIC, &abs);
		abs.tv_nsec += 200000;
		if (abs.tv_nsec >= 1000000000) {
			abs.tv_sec++;
			abs.tv_nsec -= 1000000000;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL) == EINTR)
			;
		t0 = now_s(CLOCK_MONOTONIC);
		if (t0 < abs.tv_sec + abs.tv_nsec / 1e9 - 1e-9)
			wl_err(w, "clock_nanosleep(ABSTIME) returned %g s early",
			       abs.tv_sec + abs.tv_nsec / 1e9 - t0);
		a0 = alarms;
		t1 = now_s(CLOCK_MONOTONIC);
		r = poll(&pfd, 1, 1);
		if (r < 0 && errno != EINTR)
			wl_err(w, "poll: %s", strerror(errno));
		if (!r && alarms == a0 && now_s(CLOCK_MONOTONIC) - t1 < 1e-3 - 1e-9)
			wl_err(w, "poll(1 ms) returned after %g s", now_s(CLOCK_MONOTONIC) - t1);
		if (select(0, NULL, NULL, NULL, &tv) < 0 && errno != EINTR)
			wl_err(w, "select: %s", strerror(errno));
		w->checks++;
		w->iters++;
		gate();
		last = now_s(CLOCK_MONOTONIC);
	}
	memset(&itv, 0, sizeof(itv));
	setitimer(ITIMER_REAL, &itv, NULL);
	close(tfd);
	if (!expirations)
		wl_err(w, "the timerfd never expired");
	if (!alarms)
		wl_err(w, "no SIGALRM arrived");
}

#define BIG (256 * 1024)

/* The other end of pipe and unix: echo sequence numbers + 1, checksum payloads. */
static int echo_child(int in, int out, int dgram)
{
	static unsigned char buf[65536];
	uint64_t want = 0, v[2];
	int bad = 0;

	for (;;) {
		if (read_all(in, v, sizeof(v)))
			return bad;
		if (v[0] != want)
			bad++;
		want = v[0] + 1;
		if (v[1]) {		/* a payload of v[1] bytes follows: reply its checksum */
			uint64_t sum = FNV0, left = v[1];

			while (left) {
				size_t n = left < sizeof(buf) ? left : sizeof(buf);

				if (read_all(in, buf, n))
					return bad + 1;
				sum = fnv(sum, buf, n);
				left -= n;
			}
			v[1] = sum;
		}
		v[0]++;
		if (write_all(out, v, sizeof(v)))
			return bad + 1;
		if (dgram >= 0) {
			uint64_t d;

			if (recv(dgram, &d, sizeof(d), 0) != sizeof(d))
				return bad + 1;
			d = ~d;
			if (send(dgram, &d, sizeof(d), 0) != sizeof(d))
				return bad + 1;
		}
	}
}

static void ping_pong(struct wl_worker *w, int to, int from, int dgram, pid_t child)
{
	static unsigned char buf[65536];
	int st;

	for (uint64_t k = 0; !k || !S->stop; k++) {
		uint64_t v[2] = { k, k % 32 == 31 ? BIG : 0 }, sum = FNV0, seed = mix(k);

		if (write_all(to, v, sizeof(v))) {
			wl_err(w, "write: %s", strerror(errno));
			break;
		}
		for (uint64_t off = 0; off < v[1]; off += sizeof(buf)) {
			fill(seed, off, buf, sizeof(buf));
			sum = fnv(sum, buf, sizeof(buf));
			if (write_all(to, buf, sizeof(buf))) {
				wl_err(w, "write payload: %s", strerror(errno));
				break;
			}
		}
		if (read_all(from, v, sizeof(v))) {
			wl_err(w, "read: %s", strerror(errno));
			break;
		}
		if (v[0] != k + 1)
			wl_err(w, "reply %llu, want %llu", (unsigned long long)v[0],
			       (unsigned long long)k + 1);
		if (k % 32 == 31 && v[1] != sum)
			wl_err(w, "payload checksum %016llx, want %016llx",
			       (unsigned long long)v[1], (unsigned long long)sum);
		if (dgram >= 0) {
			uint64_t d = mix(k), r = 0;

			if (send(dgram, &d, sizeof(d), 0) != sizeof(d) ||
			    recv(dgram, &r, sizeof(r), 0) != sizeof(r) || r != ~d)
				wl_err(w, "datagram %llu: got %016llx", (unsigned long long)k,
				       (unsigned long long)r);
		}
		w->checks++;
		w->iters++;
		pace();
	}
	close(to);
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st))
		wl_err(w, "echo child ended with status 0x%x (its errors)", st);
	w->checks++;
}

static void w_pipe(struct wl_worker *w)
{
	int a[2], b[2];
	pid_t p;

	if (pipe(a) || pipe(b)) {
		wl_err(w, "pipe: %s", strerror(errno));
		return;
	}
	p = fork();
	if (!p) {
		close(a[1]);
		close(b[0]);
		_exit(echo_child(a[0], b[1], -1));
	}
	close(a[0]);
	close(b[1]);
	ping_pong(w, a[1], b[0], -1, p);
	close(b[0]);
}

static void w_unix(struct wl_worker *w)
{
	int s[2], d[2];
	pid_t p;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, s) || socketpair(AF_UNIX, SOCK_DGRAM, 0, d)) {
		wl_err(w, "socketpair: %s", strerror(errno));
		return;
	}
	p = fork();
	if (!p) {
		close(s[0]);
		close(d[0]);
		_exit(echo_child(s[1], s[1], d[1]));
	}
	close(s[1]);
	close(d[1]);
	ping_pong(w, s[0], s[0], d[0], p);
	close(d[0]);
}

static void w_mem(struct wl_worker *w)
{
	const size_t len = 4 << 20, pg = 4096;

	for (uint64_t k = 0; !k || !S->stop; k++) {
		unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int st;
		pid_t p;

		if (m == MAP_FAILED) {
			wl_err(w, "mmap: %s", strerror(errno));
			sleep(1);
			continue;
		}
		for (size_t o = 0; o < len; o += pg)
			*(uint64_t *)(m + o) = mix(k ^ o);
		for (size_t o = 0; o < len; o += pg)
			if (*(uint64_t *)(m + o) != mix(k ^ o))
				wl_err(w, "page at %zu lost its value", o);
		/* Copy on write: the child scribbles, the parent's copy stays. */
		p = fork();
		if (!p) {
			for (size_t o = 0; o < len; o += pg)
				*(uint64_t *)(m + o) = ~0ULL;
			_exit(0);
		}
		if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
			wl_err(w, "cow child failed");
		for (size_t o = 0; o < len; o += pg)
			if (*(uint64_t *)(m + o) != mix(k ^ o)) {
				wl_err(w, "page at %zu changed after the child wrote its copy", o);
				break;
			}
		if (madvise(m, len / 2, MADV_DONTNEED))
			wl_err(w, "madvise: %s", strerror(errno));
		for (size_t o = 0; o < len / 2; o += pg)
			if (*(uint64_t *)(m + o)) {
				wl_err(w, "page at %zu not zero after MADV_DONTNEED", o);
				break;
			}
		if (mprotect(m, len, PROT_READ) || mprotect(m, len, PROT_READ | PROT_WRITE))
			wl_err(w, "mprotect: %s", strerror(errno));
		for (size_t o = len / 2; o < len; o += pg)
			if (*(uint64_t *)(m + o) != mix(k ^ o)) {
				wl_err(w, "page at %zu changed by mprotect", o);
				break;
			}
		munmap(m, len);
		w->checks++;
		w->iters++;
		pace();
	}
}

#define APPENDERS 3
#define APPEND_MAX 100000	/* records per writer at most (3.2 MB each) */
struct rec {
	uint32_t writer, seq;
	uint64_t pad[2];
	uint64_t sum;
};

static uint64_t rec_sum(const struct rec *r)
{
	return fnv(FNV0, r, offsetof(struct rec, sum));
}

static void w_append(struct wl_worker *w)
{
	char path[128];
	pid_t kids[APPENDERS];
	uint32_t written[APPENDERS] = {};
	uint32_t *count = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			       -1, 0);
	uint32_t next[APPENDERS] = {};
	struct rec r;
	int fd, st;

	snprintf(path, sizeof(path), "/tmp/kpx-sweep-append.%d", getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd < 0 || count == MAP_FAILED) {
		wl_err(w, "create %s: %s", path, strerror(errno));
		return;
	}
	for (int i = 0; i < APPENDERS; i++) {
		kids[i] = fork();
		if (!kids[i]) {
			for (uint32_t s = 0; !s || !S->stop; s++) {
				if (s >= APPEND_MAX) {
					usleep(10000);
					continue;
				}
				memset(&r, 0, sizeof(r));
				r.writer = i;
				r.seq = s;
				r.pad[0] = mix(s);
				r.sum = rec_sum(&r);
				if (s % 4 == 0)
					flock(fd, LOCK_EX);
				if (write_all(fd, &r, sizeof(r)))
					_exit(1);
				if (s % 4 == 0)
					flock(fd, LOCK_UN);
				__atomic_store_n(&count[i], s + 1, __ATOMIC_RELAXED);
				pace();
			}
			_exit(0);
		}
	}
	do {
		usleep(100000);
		w->iters++;
	} while (!S->stop);
	for (int i = 0; i < APPENDERS; i++) {
		if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st))
			wl_err(w, "appender %d ended with status 0x%x", i, st);
		written[i] = count[i];
	}
	close(fd);
	fd = open(path, O_RDONLY);
	while (fd >= 0 && read_all(fd, &r, sizeof(r)) == 0) {
		if (r.writer >= APPENDERS || r.sum != rec_sum(&r) || r.seq != next[r.writer]) {
			wl_err(w, "record %u/%u broken or out of order", r.writer, r.seq);
			break;
		}
		next[r.writer]++;
		w->checks++;
	}
	for (int i = 0; i < APPENDERS; i++)
		if (next[i] != written[i])
			wl_err(w, "appender %d wrote %u records, file has %u", i, written[i], next[i]);
	if (fd >= 0)
		close(fd);
	unlink(path);
}

static long futex(uint32_t *a, int op, uint32_t v)
{
	return syscall(SYS_futex, a, op, v, NULL, NULL, 0);
}

static void w_futex(struct wl_worker *w)
{
	uint32_t *f = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint32_t rounds = 0;
	int st;
	pid_t p;

	if (f == MAP_FAILED) {
		wl_err(w, "mmap: %s", strerror(errno));
		return;
	}
	f[0] = 0;		/* even: the parent's turn; odd: the child's */
	f[1] = 0;		/* stop */
	p = fork();
	if (!p) {
		for (;;) {
			uint32_t v = __atomic_load_n(&f[0], __ATOMIC_ACQUIRE);

			if (__atomic_load_n(&f[1], __ATOMIC_ACQUIRE))
				_exit(0);
			if (!(v & 1)) {
				futex(&f[0], FUTEX_WAIT, v);
				continue;
			}
			__atomic_store_n(&f[0], v + 1, __ATOMIC_RELEASE);
			futex(&f[0], FUTEX_WAKE, 1);
		}
	}
	while (!rounds || !S->stop) {
		uint32_t v = __atomic_load_n(&f[0], __ATOMIC_ACQUIRE);

		if (v & 1) {
			futex(&f[0], FUTEX_WAIT, v);
			continue;
		}
		if (v != 2 * rounds)
			wl_err(w, "counter %u, want %u", v, 2 * rounds);
		rounds++;
		__atomic_store_n(&f[0], v + 1, __ATOMIC_RELEASE);
		futex(&f[0], FUTEX_WAKE, 1);
		w->checks++;
		w->iters++;
		if (rounds % 64 == 0)
			pace();
	}
	__atomic_store_n(&f[1], 1, __ATOMIC_RELEASE);
	__atomic_store_n(&f[0], f[0] | 1, __ATOMIC_RELEASE);
	futex(&f[0], FUTEX_WAKE, 1);
	if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st))
		wl_err(w, "futex child ended with status 0x%x", st);
}

static const struct {
	const char *name;
	void (*fn)(struct wl_worker *w);
} workers[] = {
	{ "getpgid", w_getpgid },
	{ "forkexec", w_forkexec },
	{ "fileio/0", w_fileio },
	{ "fileio/1", w_fileio },
	{ "hostio", w_hostio },
	{ "timers", w_timers },
	{ "pipe", w_pipe },
	{ "unix", w_unix },
	{ "mem", w_mem },
	{ "append", w_append },
	{ "futex", w_futex },
};

struct wl_shared *wl_start(const struct wl_opts *o)
{
	int n = sizeof(workers) / sizeof(workers[0]);

	S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (S == MAP_FAILED)
		return NULL;
	O = o;
	memset(S, 0, sizeof(*S));
	S->nworkers = n;
	for (int i = 0; i < n; i++) {
		struct wl_worker *w = &S->w[i];
		pid_t p;

		snprintf(w->name, sizeof(w->name), "%s", workers[i].name);
		w->status = -1;
		p = fork();
		if (p < 0)
			return NULL;
		if (!p) {
			rnd_state = mix(getpid() ^ (uint64_t)time(NULL)) | 1;
			if (o->nice)
				setpriority(PRIO_PROCESS, 0, o->nice);
			signal(SIGINT, SIG_IGN);
			w->started = 1;
			workers[i].fn(w);
			_exit(w->errors ? 1 : 0);
		}
		w->pid = p;
	}
	return S;
}

long wl_iters(const struct wl_shared *s)
{
	long n = 0;

	for (int i = 0; i < s->nworkers; i++)
		n += s->w[i].iters;
	return n;
}

int wl_stop(struct wl_shared *s, int timeout_s)
{
	int failed = 0, left = s->nworkers;
	double end = now_s(CLOCK_MONOTONIC) + timeout_s;

	s->stop = 1;
	while (left && now_s(CLOCK_MONOTONIC) < end) {
		left = 0;
		for (int i = 0; i < s->nworkers; i++) {
			struct wl_worker *w = &s->w[i];
			int st;

			if (w->status != -1)
				continue;
			if (waitpid(w->pid, &st, WNOHANG) == w->pid)
				w->status = st;
			else
				left++;
		}
		if (left)
			usleep(50000);
	}
	for (int i = 0; i < s->nworkers; i++) {
		struct wl_worker *w = &s->w[i];

		if (w->status == -1) {
			kill(w->pid, SIGKILL);
			waitpid(w->pid, NULL, 0);
			wl_err(w, "did not stop within %d s", timeout_s);
		}
		if (w->status == -1 || !WIFEXITED(w->status) || WEXITSTATUS(w->status) ||
		    w->errors || !w->iters || !w->checks)
			failed++;
	}
	return failed;
}

void wl_json(FILE *f, const struct wl_shared *s)
{
	fputc('[', f);
	for (int i = 0; i < s->nworkers; i++) {
		const struct wl_worker *w = &s->w[i];
		int ok = w->status != -1 && WIFEXITED(w->status) && !WEXITSTATUS(w->status) &&
			 !w->errors && w->iters && w->checks;

		fprintf(f, "%s{\"name\":", i ? "," : "");
		kpx_json_fputs(f, w->name);
		fprintf(f, ",\"iters\":%ld,\"checks\":%ld,\"errors\":%ld,\"exit\":%d,\"ok\":%s,"
			"\"first_error\":", w->iters, w->checks, w->errors,
			w->status == -1 ? -1 : WIFEXITED(w->status) ? WEXITSTATUS(w->status) :
			128 + WTERMSIG(w->status), ok ? "true" : "false");
		kpx_json_fputs(f, w->first_error);
		fputc('}', f);
	}
	fputc(']', f);
}
