#!/usr/bin/env bash
# kpctl's command line, without a VM: help and version, a unique prefix of a
# command is that command, options after the command and its arguments, the
# exit codes (0 success, 1 check failed, 2 bad usage, 3 cannot run here),
# and the JSON contract: with -j, stdout is exactly one JSON object with
# "schema": 2 for every outcome, errors as {"schema":2,"error":"..."}, even
# for input that is not valid UTF-8 or holds control characters.
# What kpctl checks before it loads anything (issue 36): a SPEC that names
# no kernel function is bad usage, also without root; an offset past the
# function's end (also a module's, in a doctored /proc/kallsyms) is
# refused; an offset with attach --multi on a kernel whose kprobe_multi
# takes none (a stock kernel's BTF) is refused; without root every
# kernel-facing command, links too, exits 3 saying so. kpctl feature: its
# help, its bad usage, its JSON, and other answers for our BTF and stock's.
# Each part is a subtest (lib.sh): all run and report, whichever failed.
. "$(dirname "$0")/../lib.sh"
[ -x "$KPCTL" ] || skip "no $KPCTL (make loader)"
command -v jq > /dev/null || skip "no jq"

# JSON_OK TEXT: 0 when TEXT is exactly one JSON object with "schema": 2.
json_ok() {
	jq -e -s 'length == 1 and (.[0] | type == "object" and .schema == 2)' <<< "$1" \
		> /dev/null 2>&1
}
# Negative controls of the checker: two documents, a cut one, no schema,
# the old schema, and an unescaped control character are not accepted.
json_ok '{"schema":2}' || fail "json_ok refuses a good document"
! json_ok $'{"schema":2}\n{"schema":2}' || fail "json_ok accepts two documents"
! json_ok '{"schema":2,"x":' || fail "json_ok accepts a cut document"
! json_ok '{"x":1}' || fail "json_ok accepts a document without schema"
! json_ok '{"schema":1}' || fail "json_ok accepts schema 1"
! json_ok $'{"schema":2,"x":"a\tb"}' || fail "json_ok accepts a raw tab in a string"

# Help: the commands and the exit codes; the same for help, --help, -h and a
# prefix of help; with -j as {"schema":2,"help":...}.
t_help() {
	assert_rc 0 "$KPCTL" help
	help=$out
	for w in attach explain regs stress links feature help version "--version" "Exit status:" \
		"0  success" "1  a check failed" "2  bad usage" "3  kpctl could not run here"; do
		assert_match "$help" "$w" "help mentions '$w'"
	done
	for a in --help -h he; do
		assert_rc 0 "$KPCTL" $a
		assert_eq "$out" "$help" "kpctl $a"
	done
	json=$(kpctl_j help) || fail "help -j: $json"
	assert_eq "$(jq -r .help <<< "$json")" "$help" "help -j"
	json=$("$KPCTL" help -j) || fail "help with -j after it: $json"
	assert_kpctl_json "$json" 0 "help -j after the command"
	assert_rc 0 "$KPCTL" attach --help
	assert_match "$out" "Usage: kpctl attach" "attach --help"
	json=$("$KPCTL" attach --help -j) || fail "attach --help -j: $json"
	assert_match "$(jq -r .help <<< "$json")" "Usage: kpctl attach" "attach --help -j"
}
subtest help t_help

# Version: text, --version, a prefix, JSON.
t_version() {
	assert_rc 0 "$KPCTL" version
	assert_match "$out" '^kpctl [^ ]+ \(JSON schema 2, libbpf v[0-9]+\.[0-9]+\)$' "version"
	version=$out
	assert_rc 0 "$KPCTL" --version
	assert_eq "$out" "$version" "--version"
	assert_rc 0 "$KPCTL" ver
	assert_eq "$out" "$version" "ver"
	json=$(kpctl_j version) || fail "version -j: $json"
	assert_eq "$(jq -r '.version | type' <<< "$json")" string "version -j: version"
	assert_match "$(jq -r .libbpf <<< "$json")" '^v[0-9]+\.[0-9]+$' "version -j: libbpf"
	assert_eq "$(jq -r 'has("error")' <<< "$json")" false "version -j: no error"
}
subtest version t_version

# Bad usage: exit 2, the reason on stderr and nothing on stdout; with -j
# (before or after the command) the reason as JSON.
bad() { # REGEX ARGS...: kpctl ARGS is bad usage, said as REGEX
	local re=$1 json rc; shift
	assert_rc 2 "$KPCTL" "$@"
	assert_match "$out" "$re" "message of kpctl $*"
	[ -z "$("$KPCTL" "$@" 2> /dev/null)" ] || fail "kpctl $*: text mode wrote to stdout"
	json=$(kpctl_j "$@" 2> /dev/null); rc=$?
	assert_eq $rc 2 "exit status of kpctl -j $*"
	assert_match "$(jq -r .error <<< "$json")" "$re" "JSON error of kpctl -j $*"
	json=$("$KPCTL" "$@" -j 2> /dev/null); rc=$?
	assert_eq $rc 2 "exit status of kpctl $* -j"
	assert_kpctl_json "$json" $rc "kpctl $* -j"
}
t_bad_usage() {
	bad "no command given"
	bad "unknown command 'no-such-command'" no-such-command
	bad "ambiguous command '' \(attach, explain" ""
	bad "unknown option '--no-such-option'" --no-such-option
	bad "attach: no probe given" attach
	bad "attach: unknown option '--no-such-option'" attach --no-such-option do_getpgid
	bad "bad value 'x' for -c" attach --cost x do_getpgid
	bad "bad probe 'bad spec'" attach "bad spec"
	bad "bad probe" attach $'ctl\x01"quote\xff'
	bad "links: unexpected argument 'extra'" links extra
	bad "bad value '0' for -n" links -n 0
	bad "links: --rounds needs --multi" links --rounds 2
	bad "one link is either all entries or all returns" attach --multi do_getpgid do_getpgid%return
	bad "attach --multi: not with --cost" attach --multi --cost 5 do_getpgid
	bad "attach --multi: not with --legacy" attach --multi --legacy do_getpgid
	bad "bad value '0' for -R" links --multi --rounds 0
	bad "bad value '1.5' for -R" links --multi -R 1.5
	bad "stress: unexpected argument 'extra'" stress extra
	bad "regs: want exactly one SPEC" regs
	bad "explain: want a FUNC" explain
	bad "version: unexpected argument 'x'" version x
}
subtest bad-usage t_bad_usage

# A unique prefix is the command: 'att' is attach, 'e' explain, 'st' stress.
t_prefixes() {
	bad "attach: no probe given" att
	bad "explain: want a FUNC" e
	bad "stress: unexpected argument 'extra'" st extra
	bad "unknown command 'attachx'" attachx
}
subtest prefixes t_prefixes

# Options after the specs: --cost after the spec is an option (a bad value
# here), not a probe; after "--" it is a probe (a bad one).
t_options_after() {
	bad "bad value 'x' for -c" attach do_getpgid --cost x
	assert_rc 2 "$KPCTL" attach do_getpgid -- --cost x
	assert_match "$out" "bad probe '--cost'" "an option after --"
	json=$(kpctl_j attach do_getpgid -- --cost x 2> /dev/null)
	assert_match "$(jq -r .error <<< "$json")" "bad probe '--cost'" "an option after --, -j"
	# After "--" even -j is a probe: no JSON then.
	assert_rc 2 "$KPCTL" attach do_getpgid -- -j
	assert_match "$out" "bad probe '-j'" "-j after --"
}
subtest options-after-arguments t_options_after

# -j among other short flags ("-vj") makes an error found before getopt
# reaches it JSON too; with POSIXLY_CORRECT set, options still count after
# the arguments.
t_json_flags() {
	json=$("$KPCTL" -vj explain --no-such-option 2> /dev/null); rc=$?
	assert_eq $rc 2 "exit status of kpctl -vj explain --no-such-option"
	assert_kpctl_json "$json" $rc "kpctl -vj explain --no-such-option"
	assert_match "$(jq -r .error <<< "$json")" "unknown option '--no-such-option'" "-vj error"
	json=$(POSIXLY_CORRECT=1 "$KPCTL" explain x --offline -j 2> /dev/null); rc=$?
	assert_eq $rc 2 "exit status with POSIXLY_CORRECT"
	assert_match "$(jq -r .error <<< "$json")" "--offline needs --vmlinux" \
		"options after the argument with POSIXLY_CORRECT"
	# Output that cannot be written is a failure, not a success.
	assert_rc 1 sh -c '"$1" version > /dev/full' sh "$KPCTL"
	assert_match "$out" "cannot write the output" "kpctl version > /dev/full"
	assert_rc 0 sh -c '"$1" version > /dev/null' sh "$KPCTL"
}
subtest json-flags-and-output t_json_flags

# The getpgid function of the kernel that runs the test: kpctl checks a
# SPEC's function in its /proc/kallsyms.
F=
for f in do_getpgid __x64_sys_getpgid; do
	grep -q " $f$" /proc/kallsyms 2> /dev/null && { F=$f; break; }
done
[ -n "$F" ] || fail "neither do_getpgid nor __x64_sys_getpgid in /proc/kallsyms"
nofunc="no such function in the kernel: 'kpx_no_such_function_xyz'"

# Exit 3: kpctl cannot run here. Without the BTF it is told to use (no
# kprobe PMU on this machine, or no root, says the same code earlier),
# nothing loads.
t_no_btf() {
	for cmd in "attach $F" "stress -n 1 -s $F" "regs $F"; do
		# shellcheck disable=SC2086
		assert_rc 3 env KPCTL_BTF=/nonexistent/vmlinux "$KPCTL" $cmd
		assert_match "$out" "kernel has no BTF|no kprobe|not root" "message of kpctl $cmd without BTF"
		# shellcheck disable=SC2086
		json=$(KPCTL_BTF=/nonexistent/vmlinux kpctl_j $cmd 2> /dev/null); rc=$?
		assert_eq $rc 3 "exit status of kpctl -j $cmd without BTF"
		assert_match "$(jq -r .error <<< "$json")" "kernel has no BTF|no kprobe|not root" \
			"JSON error of kpctl -j $cmd without BTF"
	done
}
subtest no-btf t_no_btf

# A SPEC (or FUNC) that names no function of the kernel is bad usage, found
# in kallsyms before anything is loaded or any kernel support is asked for
# (it was exit 3 on a machine without kprobes, and stress loaded its
# programs first); so is one that does not parse, also in stress.
t_spec_checks() {
	bad "$nofunc" attach kpx_no_such_function_xyz
	bad "$nofunc" attach "$F" kpx_no_such_function_xyz
	bad "$nofunc" attach --multi "$F" kpx_no_such_function_xyz
	bad "$nofunc" stress --site kpx_no_such_function_xyz
	bad "$nofunc" stress -n 1 -s "$F,kpx_no_such_function_xyz"
	bad "$nofunc" regs kpx_no_such_function_xyz
	bad "no such function in the kernel: 'kpx_no_such_function_xyz'" explain kpx_no_such_function_xyz
	bad "no such function in the kernel: 'kpx_no_such_mod:f' \(or its module is not loaded\)" \
		attach kpx_no_such_mod:f
	bad "bad site '$F\+0xzz'" stress --site "$F+0xzz"
	bad "bad site '$F%return'" stress --site "$F%return"
}
subtest spec-checks-before-loading t_spec_checks

# Without root (no CAP_BPF and CAP_PERFMON) every kernel-facing command
# exits 3 and says so; links said tracefs was missing and exited 1. A bad
# SPEC is still bad usage: checked first, nothing loaded.
if [ "$(id -u)" != 0 ]; then
	nobody=()
elif setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$KPCTL" 2> /dev/null; then
	nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
else
	nobody=(none)
fi
t_without_root() {
	[ "${nobody[*]}" != none ] || skip "root without setpriv(1): cannot drop root"
	for cmd in "links -n 1" "links --multi -n 1" "attach $F" "stress -n 1 -s $F" "regs $F" \
		"explain $F"; do
		# shellcheck disable=SC2086
		assert_rc 3 "${nobody[@]}" "$KPCTL" $cmd
		assert_match "$out" "not root \(no CAP_BPF and CAP_PERFMON\)" "kpctl $cmd without root"
		# shellcheck disable=SC2086
		json=$("${nobody[@]}" "$KPCTL" -j $cmd 2> /dev/null); rc=$?
		assert_eq $rc 3 "exit status of kpctl -j $cmd without root"
		assert_kpctl_json "$json" $rc "kpctl -j $cmd without root"
		assert_match "$(jq -r .error <<< "$json")" "not root" "JSON error of kpctl -j $cmd without root"
	done
	assert_rc 2 "${nobody[@]}" "$KPCTL" stress --site kpx_no_such_function_xyz
	assert_match "$out" "^kpctl: $nofunc$" "stress --site TYPO without root"
	assert_rc 2 "${nobody[@]}" "$KPCTL" stress --site "$F+0xzz"
	assert_match "$out" "^kpctl: bad site" "stress --site with a bad offset without root"
	assert_rc 2 "${nobody[@]}" "$KPCTL" attach kpx_no_such_function_xyz
	assert_match "$out" "^kpctl: $nofunc$" "attach TYPO without root"
}
subtest without-root t_without_root

# An offset at or past the function's end (kallsyms' size, up to the next
# symbol) is refused before anything is loaded: it needs kallsyms'
# addresses (root), else the kernel decides.
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
addrs_visible() { [ "$(awk -v f="$F" '$3 == f { print $1; exit }' /proc/kallsyms)" != 0000000000000000 ]; }
t_past_end() {
	addrs_visible || skip "kallsyms hides addresses (not root)"
	for cmd in "attach $F+0x100000" "attach $F $F+0x100000" "stress -n 1 -s $F+0x100000" \
		"regs $F+0x100000"; do
		# shellcheck disable=SC2086
		assert_rc 1 "$KPCTL" $cmd
		assert_match "$out" "offset 0x100000 is past the end of $F \(0x[0-9a-f]+ bytes; the address is " \
			"kpctl $cmd"
		# shellcheck disable=SC2086
		json=$(kpctl_j $cmd 2> /dev/null); rc=$?
		assert_eq $rc 1 "exit status of kpctl -j $cmd"
		assert_match "$(jq -r .error <<< "$json")" "past the end of $F" "JSON error of kpctl -j $cmd"
	done
}
subtest past-the-end t_past_end

# A module's function: its size is up to the next symbol of its module.
# A doctored /proc/kallsyms (a private mount namespace) adds a module.
# kpx_fake_a's size is 0x30, up to the next symbol of its module (the
# other module's symbol in between does not count).
t_module_past_end() {
	addrs_visible || skip "kallsyms hides addresses (not root)"
	{ cat /proc/kallsyms; printf '%s\n' 'ffffffffc0001000 t kpx_fake_a	[kpx_fake]' \
		'ffffffffc0001010 T kpx_fake_data	[kpx_other]' \
		'ffffffffc0001030 t __pfx_kpx_fake_b	[kpx_fake]' \
		'ffffffffc0001040 t kpx_fake_b	[kpx_fake]'; } > "$t/kallsyms"
	in_ns() { unshare -m --propagation private sh -c 'mount --bind "$1" /proc/kallsyms && shift && exec "$@"' \
		ns "$t/kallsyms" "$@"; }
	in_ns true 2> /dev/null || skip "no private mount namespace here"
	for spec in kpx_fake:kpx_fake_a+0x30 kpx_fake:kpx_fake_a+0x1000 kpx_fake_a+0x30; do
		assert_rc 1 in_ns "$KPCTL" attach "$spec"
		assert_match "$out" "'${spec//+/\\+}': offset 0x[0-9a-f]+ is past the end of ${spec%+*} \(0x30 bytes; the address is __pfx_kpx_fake_b\+0x" \
			"attach $spec (module)"
	done
	assert_rc 2 in_ns "$KPCTL" attach kpx_fake:kpx_fake_data
	assert_match "$out" "no such function in the kernel: 'kpx_fake:kpx_fake_data' \(or its module is not loaded\)" \
		"a symbol of another module"
}
subtest module-past-the-end t_module_past_end

# kpctl feature: what the kernel has, for everyone; JSON keys and types.
feature_types() { # JSON WHAT
	jq -e '(.release | type == "string") and (.btf_path | type == "string") and
		(.series | type == "boolean" or type == "null") and
		(.requirements | keys == ["btf", "kprobe_pmu", "kprobes", "kprobes_list", "privileged"]) and
		(.requirements | [.[] | type] - ["boolean", "null"] == []) and
		(.knobs | keys == ["kprobes-optimization", "kprobes/callopt", "kprobes/fast_detach"]) and
		(.knobs | [.[] | type] - ["number", "null"] == []) and
		(.bpf | keys == ["kprobe_multi", "kprobe_multi_offsets", "kprobe_multi_probe_flags",
			"link_info_probe"]) and
		(.bpf | [.[] | type] - ["boolean", "null"] == [])' <<< "$1" > /dev/null ||
		fail "$2: keys or types: $1"
}
t_feature() {
	assert_rc 0 "$KPCTL" feature --help
	assert_match "$out" "^Usage: kpctl feature" "feature --help"
	json=$("$KPCTL" feature --help -j) || fail "feature --help -j: $json"
	assert_match "$(jq -r .help <<< "$json")" "Usage: kpctl feature" "feature --help -j"
	bad "feature: unexpected argument 'extra'" feature extra
	bad "feature: unexpected argument 'extra'" f extra
	bad "feature: unknown option '--no-such-option'" feature --no-such-option
	assert_rc 0 "$KPCTL" feature
	assert_match "$out" "kprobes/callopt" "feature: the callopt knob"
	assert_match "$out" "kprobe_multi links take offsets" "feature: kprobe_multi offsets"
	json=$(kpctl_j feature) || fail "feature -j: $json"
	feature_types "$json" "feature -j"
	json=$(KPCTL_BTF=/nonexistent/vmlinux kpctl_j feature) || fail "feature -j without BTF: $json"
	feature_types "$json" "feature -j without BTF"
	assert_eq "$(jq -c '[.requirements.btf, .bpf[]]' <<< "$json")" "[false,null,null,null,null]" \
		"feature -j without BTF: the BPF answers"
}
subtest feature t_feature

# Our kernel's BTF and a stock one's give other answers (--btf stands in
# for the running kernel's): the series' UAPI is in ours only.
t_feature_btf() {
	[ -r "$BUILD/vmlinux" ] || fail "no $BUILD/vmlinux: make kernel"
	json=$(kpctl_j feature --btf "$BUILD/vmlinux") || fail "feature --btf vmlinux: $json"
	assert_eq "$(jq -c '[.series, .bpf.kprobe_multi, .bpf.link_info_probe,
		.bpf.kprobe_multi_probe_flags, .bpf.kprobe_multi_offsets]' <<< "$json")" \
		"[true,true,true,true,true]" "feature with our kernel's BTF"
	# A stock kernel's BTF: make check builds none; check-stock and the
	# Debian rows of check-configs leave one (vmlinux-*-stock).
	stock=$(ls "$BUILD"/vmlinux-*-stock 2> /dev/null | head -n1)
	if [ -n "$stock" ]; then
		json=$(kpctl_j feature --btf "$stock") || fail "feature --btf $stock: $json"
		assert_eq "$(jq -c '[.bpf.kprobe_multi, .bpf.link_info_probe,
			.bpf.kprobe_multi_probe_flags, .bpf.kprobe_multi_offsets]' <<< "$json")" \
			"[true,false,false,false]" "feature with a stock kernel's BTF ($stock)"
		if [ "$(jq -c '[.knobs["kprobes/callopt"], .knobs["kprobes/fast_detach"]]' <<< "$json")" = "[null,null]" ]; then
			assert_eq "$(jq -c .series <<< "$json")" false "feature with stock's BTF: series"
		fi
		# attach --multi with an offset: such a kernel refuses it (EINVAL for
		# the unknown BPF_F_KPROBE_MULTI_OFFSETS); kpctl says so before loading.
		assert_rc 1 "$KPCTL" --btf "$stock" attach --multi "$F" "$F+4"
		assert_match "$out" "'$F\+4': this kernel's kprobe_multi takes no offsets .*0030" \
			"attach --multi with an offset on stock"
		json=$(kpctl_j --btf "$stock" attach --multi "$F" "$F+4" 2> /dev/null); rc=$?
		assert_eq $rc 1 "exit status of attach --multi with an offset on stock, -j"
		assert_match "$(jq -r .error <<< "$json")" "takes no offsets" \
			"JSON error of attach --multi with an offset on stock"
	else
		note "no $BUILD/vmlinux-*-stock: feature with a stock BTF not checked"
	fi
}
subtest feature-our-and-stock-btf t_feature_btf

subtests_end
