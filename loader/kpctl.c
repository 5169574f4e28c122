// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * kpctl: attach BPF kprobes the way tools do (bpf_program__attach_kprobe_opts)
 * and show which mechanism the kernel backs each one with.
 *
 * This file is the command line: the commands' table (bpftool's way: a
 * unique prefix of a command is that command), the options every command
 * takes, help and version, errors, exit codes and the JSON envelope. The
 * probe helpers are in probe.c, each command in a file of its own.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <bpf/libbpf.h>
#include "common.h"

#ifndef KPCTL_VERSION
#define KPCTL_VERSION "unknown"
#endif

struct env env;
volatile sig_atomic_t stop_requested;
static struct kpx_json out;

static void on_signal(int sig)
{
	stop_requested = 1;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (!env.verbose)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static void verrx(const char *fmt, va_list ap)
{
	va_list copy;

	va_copy(copy, ap);
	if (!env.error[0])
		vsnprintf(env.error, sizeof(env.error), fmt, copy);
	va_end(copy);
	fprintf(stderr, "kpctl: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void errx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verrx(fmt, ap);
	va_end(ap);
}

void warnx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "kpctl: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void errx_unavailable(const char *fmt, ...)
{
	va_list ap;

	env.unavailable = true;
	va_start(ap, fmt);
	verrx(fmt, ap);
	va_end(ap);
}

/* Every JSON document kpctl prints starts here: {"schema":2,... */
struct kpx_json *json_begin(void)
{
	jw_init(&out, stdout);
	jw_start_object(&out);
	jw_int_field(&out, "schema", KPCTL_SCHEMA);
	return &out;
}

void json_end(void)
{
	jw_end_object(&out);
}

/* With -j, {"schema":2,"help":"..."}; else the text on stdout. */
int show_help(void (*usage)(FILE *f))
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if (!env.json) {
		usage(stdout);
		return EXIT_OK;
	}
	f = open_memstream(&text, &len);
	if (!f) {
		errx("out of memory");
		return EXIT_FAIL;
	}
	usage(f);
	fclose(f);
	jw_string_field(json_begin(), "help", text);
	json_end();
	free(text);
	return EXIT_OK;
}

/* The options of every command, also after the command and its arguments. */
static const struct option global_opts[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "verbose", no_argument, NULL, 'v' },
	{ "btf", required_argument, NULL, 'B' },
};
#define NGLOBAL (sizeof(global_opts) / sizeof(global_opts[0]))

/*
 * getopt_long() for a command: its options (@shortopts, @longopts) and the
 * global ones, anywhere on its command line (GNU argument permutation; "--"
 * ends the options; a leading "+" in @shortopts: the first argument does).
 * Returns the command's options; '?' on a bad one, with the error said; -1
 * at the end, with optind at the first argument.
 */
int cmd_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	static const char *cached;
	static char shorts[64];
	static struct option longs[32];
	/* The command, in messages ("" before it). */
	const char *who = strcmp(argv[0], "kpctl") ? argv[0] : "";
	int c;

	if (cached != shortopts) {
		size_t n = 0;

		bool stop = *shortopts == '+';

		snprintf(shorts, sizeof(shorts), "%s:jv%s", stop ? "+" : "", shortopts + stop);
		for (; longopts && longopts[n].name && n < 32 - NGLOBAL - 1; n++)
			longs[n] = longopts[n];
		for (size_t i = 0; i < NGLOBAL; i++)
			longs[n++] = global_opts[i];
		memset(&longs[n], 0, sizeof(longs[n]));
		cached = shortopts;
	}
	opterr = 0;
	for (;;) {
		c = getopt_long(argc, argv, shorts, longs, NULL);
		switch (c) {
		case 'j':
			env.json = true;
			break;
		case 'v':
			env.verbose = true;
			break;
		case 'B':
			env.btf_path = optarg;
			break;
		case '?':
			if (optopt)
				errx("%s%sunknown option '-%c' (see --help)", who, *who ? ": " : "",
				     optopt);
			else
				errx("%s%sunknown option '%s' (see --help)", who, *who ? ": " : "",
				     argv[optind - 1]);
			return '?';
		case ':':
			errx("%s%soption '%s' needs a value", who, *who ? ": " : "",
			     argv[optind - 1]);
			return '?';
		default:
			return c;
		}
	}
}

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const struct cmd {
	const char *name;
	int (*func)(int argc, char **argv);
	const char *help;
} cmds[] = {
	{ "attach", cmd_attach,
	  "attach SPEC...   attach counting BPF kprobes, show mechanism, hits, cost" },
	{ "explain", cmd_explain,
	  "explain FUNC     which mechanism a probe at each offset of FUNC gets, and why" },
	{ "regs", cmd_regs,
	  "regs SPEC        capture the pt_regs a handler sees at SPEC (--compare: with\n"
	  "                   the current mechanism and with int3, and check they agree)" },
	{ "stress", cmd_stress,
	  "stress           attach/detach probes in a loop while threads hit them;\n"
	  "                   latency percentiles and exact hit accounting" },
	{ "links", cmd_links,
	  "links            attach one BPF kprobe link to each of N kernel functions,\n"
	  "                   time attach and detach per link, check that no program\n"
	  "                   runs after detach and a grace period" },
	{ "feature", cmd_feature,
	  "feature          what the running kernel has: kprobes, the kprobe PMU, BTF,\n"
	  "                   the kprobes series' knobs and UAPI (no root needed)" },
	{ "help", cmd_help, "help             this help" },
	{ "version", cmd_version, "version          kpctl's version, schema and libbpf version" },
};
#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static void usage(FILE *f)
{
	fprintf(f,
"Usage: kpctl [OPTIONS] COMMAND [ARGS] [OPTIONS]\n"
"\n"
"Commands (a unique prefix will do: 'kpctl att', 'kpctl e'):\n");
	for (size_t i = 0; i < NCMDS; i++)
		fprintf(f, "  %s\n", cmds[i].help);
	fprintf(f,
"\n"
"Options, before or after the command and its arguments:\n"
"  -j, --json       machine-readable output: one JSON object on stdout, with\n"
"                   \"schema\": %d, also for errors ({\"schema\":%d,\"error\":\"...\"})\n"
"  -v, --verbose    libbpf debug output\n"
"  --btf FILE       kernel BTF for CO-RE (default: /sys/kernel/btf/vmlinux;\n"
"                   also $KPCTL_BTF); kpctl refuses to run without it\n"
"  -h, --help       this help; 'kpctl COMMAND --help' for a command\n"
"  --version        the version (before the command; also 'kpctl version')\n"
"\n"
"Exit status:\n"
"  0  success\n"
"  1  a check failed, or the kernel refused (a probe, a site), or Ctrl-C while\n"
"     attaching or during a check (attach --duration 0, which waits for Ctrl-C,\n"
"     exits 0 with its result)\n"
"  2  bad usage, also a SPEC or FUNC that names no function of the kernel\n"
"     (checked before anything is loaded)\n"
"  3  kpctl could not run here: no BTF, no kprobes or kprobe PMU, the BPF\n"
"     program does not load, or not root (no CAP_BPF and CAP_PERFMON)\n"
"\n"
"Examples:\n"
"  kpctl attach __x64_sys_getpgid+0x20 --trigger 1000\n"
"  kpctl explain __x64_sys_getpgid\n"
"  kpctl regs --compare __x64_sys_getpgid+0x20\n"
"  kpctl stress --iterations 100 --workers 2 -j\n"
"  kpctl -j links -n 200\n"
"  kpctl feature\n", KPCTL_SCHEMA, KPCTL_SCHEMA);
}

/* No arguments; the global options only. */
static int no_args(int argc, char **argv)
{
	optind = 0;
	if (cmd_getopt(argc, argv, "", NULL) != -1)
		return EXIT_USAGE;
	if (optind < argc) {
		errx("%s: unexpected argument '%s'", argv[0], argv[optind]);
		return EXIT_USAGE;
	}
	return -1;
}

static int cmd_help(int argc, char **argv)
{
	int ret = no_args(argc, argv);

	return ret >= 0 ? ret : show_help(usage);
}

static int cmd_version(int argc, char **argv)
{
	struct kpx_json *w;
	int ret = no_args(argc, argv);

	if (ret >= 0)
		return ret;
	if (!env.json) {
		printf("kpctl %s (JSON schema %d, libbpf v%u.%u)\n", KPCTL_VERSION, KPCTL_SCHEMA,
		       libbpf_major_version(), libbpf_minor_version());
		return EXIT_OK;
	}
	w = json_begin();
	jw_string_field(w, "version", KPCTL_VERSION);
	jw_name(w, "libbpf");
	jw_stringf(w, "v%u.%u", libbpf_major_version(), libbpf_minor_version());
	json_end();
	return EXIT_OK;
}

/* The command @name names: exactly, or as the prefix of only one. */
static const struct cmd *find_cmd(const char *name)
{
	const struct cmd *found = NULL;
	char list[256] = "";
	int n = 0;

	for (size_t i = 0; i < NCMDS; i++)
		if (!strcmp(name, cmds[i].name))
			return &cmds[i];
	for (size_t i = 0; i < NCMDS; i++) {
		if (strncmp(name, cmds[i].name, strlen(name)))
			continue;
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
			 n++ ? ", " : "", cmds[i].name);
		found = &cmds[i];
	}
	if (n > 1)
		errx("ambiguous command '%s' (%s)", name, list);
	else if (!n)
		errx("unknown command '%s' (see 'kpctl help')", name);
	return n == 1 ? found : NULL;
}

/* -j anywhere (before "--") asks for JSON, also for what goes wrong first. */
/*
 * -j before the options are parsed, so that an error found on the way is
 * JSON too: "-j", "--json", or -j among other short flags ("-vj", "-aj";
 * not after one that takes a value, "-Bj" is --btf j).
 */
static void early_json(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--json")) {
			env.json = true;
			continue;
		}
		if (a[0] != '-' || a[1] == '-')
			continue;
		for (a++; isalpha((unsigned char)*a) && *a != 'B'; a++)
			if (*a == 'j') {
				env.json = true;
				break;
			}
	}
}

static int run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	const struct cmd *cmd;
	int c;

	/* The options before the command ("+": stop at it). */
	optind = 0;
	while ((c = cmd_getopt(argc, argv, "+h", opts)) != -1) {
		if (c == 'h')
			return show_help(usage);
		if (c == 'V')
			return cmd_version(1, (char *[]){ "version", NULL });
		return EXIT_USAGE;
	}
	if (optind >= argc) {
		errx("no command given (see 'kpctl help')");
		if (!env.json)
			usage(stderr);
		return EXIT_USAGE;
	}
	cmd = find_cmd(argv[optind]);
	if (!cmd)
		return EXIT_USAGE;
	argc -= optind;
	argv += optind;
	argv[0] = (char *)cmd->name;
	return cmd->func(argc, argv);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct rlimit rl;
	int ret;

	argv[0] = "kpctl";
	/* Options after the arguments, as documented, whatever the environment. */
	unsetenv("POSIXLY_CORRECT");
	early_json(argc, argv);
	libbpf_set_print(libbpf_print);
	/* Two fds per kprobe link (perf event and link): allow thousands. */
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	ret = run(argc, argv);
	if (ret != EXIT_OK && ret != EXIT_USAGE && env.unavailable)
		ret = EXIT_UNAVAILABLE;
	/* -j: exactly one JSON document on stdout, also when there was none. */
	if (env.json && !out.docs) {
		struct kpx_json *w = json_begin();

		if (ret != EXIT_OK)
			jw_string_field(w, "error", env.error[0] ? env.error :
					ret == EXIT_USAGE ? "bad usage" : "failed");
		json_end();
	}
	/* Output that did not reach its reader (a full disk, a closed pipe) fails. */
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "kpctl: cannot write the output: %s\n", strerror(errno));
		if (ret == EXIT_OK)
			ret = EXIT_FAIL;
	}
	return ret;
}
