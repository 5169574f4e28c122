#!/usr/bin/env bash
# kpctl's command line, without a VM: help and version, a unique prefix of a
# command is that command, options after the command and its arguments, the
# exit codes (0 success, 1 check failed, 2 bad usage, 3 cannot run here),
# and the JSON contract: with -j, stdout is exactly one JSON object with
# "schema": 1 for every outcome, errors as {"schema":1,"error":"..."}, even
# for input that is not valid UTF-8 or holds control characters.
. "$(dirname "$0")/../lib.sh"
[ -x "$KPCTL" ] || skip "no $KPCTL (make loader)"
command -v jq > /dev/null || skip "no jq"

# JSON_OK TEXT: 0 when TEXT is exactly one JSON object with "schema": 1.
json_ok() {
	jq -e -s 'length == 1 and (.[0] | type == "object" and .schema == 1)' <<< "$1" \
		> /dev/null 2>&1
}
# Negative controls of the checker: two documents, a cut one, no schema,
# and an unescaped control character are not accepted.
json_ok '{"schema":1}' || fail "json_ok refuses a good document"
! json_ok $'{"schema":1}\n{"schema":1}' || fail "json_ok accepts two documents"
! json_ok '{"schema":1,"x":' || fail "json_ok accepts a cut document"
! json_ok '{"x":1}' || fail "json_ok accepts a document without schema"
! json_ok $'{"schema":1,"x":"a\tb"}' || fail "json_ok accepts a raw tab in a string"

# Help: the commands and the exit codes; the same for help, --help, -h and a
# prefix of help; with -j as {"schema":1,"help":...}.
assert_rc 0 "$KPCTL" help
help=$out
for w in attach explain regs stress links help version "--version" "Exit status:" \
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

# Version: text, --version, a prefix, JSON.
assert_rc 0 "$KPCTL" version
assert_match "$out" '^kpctl [^ ]+ \(JSON schema 1, libbpf v[0-9]+\.[0-9]+\)$' "version"
version=$out
assert_rc 0 "$KPCTL" --version
assert_eq "$out" "$version" "--version"
assert_rc 0 "$KPCTL" ver
assert_eq "$out" "$version" "ver"
json=$(kpctl_j version) || fail "version -j: $json"
assert_eq "$(jq -r '.version | type' <<< "$json")" string "version -j: version"
assert_match "$(jq -r .libbpf <<< "$json")" '^v[0-9]+\.[0-9]+$' "version -j: libbpf"
assert_eq "$(jq -r 'has("error")' <<< "$json")" false "version -j: no error"

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

# A unique prefix is the command: 'att' is attach, 'e' explain, 'st' stress.
bad "attach: no probe given" att
bad "explain: want a FUNC" e
bad "stress: unexpected argument 'extra'" st extra
bad "unknown command 'attachx'" attachx

# Options after the specs: --cost after the spec is an option (a bad value
# here), not a probe; after "--" it is a probe (a bad one).
bad "bad value 'x' for -c" attach do_getpgid --cost x
assert_rc 2 "$KPCTL" attach do_getpgid -- --cost x
assert_match "$out" "bad probe '--cost'" "an option after --"
json=$(kpctl_j attach do_getpgid -- --cost x 2> /dev/null)
assert_match "$(jq -r .error <<< "$json")" "bad probe '--cost'" "an option after --, -j"
# After "--" even -j is a probe: no JSON then.
assert_rc 2 "$KPCTL" attach do_getpgid -- -j
assert_match "$out" "bad probe '-j'" "-j after --"

# -j among other short flags ("-vj") makes an error found before getopt
# reaches it JSON too; with POSIXLY_CORRECT set, options still count after
# the arguments.
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

# Exit 3: kpctl cannot run here. Without the BTF it is told to use (no
# kprobe PMU on this machine says the same code earlier), nothing loads.
for cmd in "attach do_getpgid" "stress -n 1 -s do_getpgid" "regs do_getpgid"; do
	# shellcheck disable=SC2086
	assert_rc 3 env KPCTL_BTF=/nonexistent/vmlinux "$KPCTL" $cmd
	assert_match "$out" "kernel has no BTF|no kprobe" "message of kpctl $cmd without BTF"
	# shellcheck disable=SC2086
	json=$(KPCTL_BTF=/nonexistent/vmlinux kpctl_j $cmd 2> /dev/null); rc=$?
	assert_eq $rc 3 "exit status of kpctl -j $cmd without BTF"
	assert_match "$(jq -r .error <<< "$json")" "kernel has no BTF|no kprobe" \
		"JSON error of kpctl -j $cmd without BTF"
done
echo "PASS: kpctl help, version, prefixes, options after arguments, exit codes, -j errors"
