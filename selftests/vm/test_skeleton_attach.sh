#!/usr/bin/env bash
# The walking skeleton: a BPF kprobe at the getpgid function's entry and one mid-function
# count exactly the getpgid() calls that trigger them; the entry probe is on
# ftrace, the mid-function one is callopt, jmpopt or int3.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
N=1000
json=$("$KPCTL" -j attach --trigger $N --wait-opt 10 "$GETPGID_FUNC" "$GETPGID_FUNC+$GETPGID_MID") ||
	fail "kpctl attach failed: $json"
note "$json"
jq -e . <<< "$json" > /dev/null || fail "kpctl output is not JSON"
assert_eq "$(jq -r '.probes | length' <<< "$json")" 2 "probe count"
assert_eq "$(jq -r '.probes[0].mechanism' <<< "$json")" ftrace "entry mechanism"
assert_match "$(jq -r '.probes[1].mechanism' <<< "$json")" '^(callopt|jmpopt|int3)$' "mid-function mechanism"
for i in 0 1; do
	assert_eq "$(jq -r ".probes[$i].hits" <<< "$json")" $N "hits of probe $i"
	assert_eq "$(jq -r ".probes[$i].missed" <<< "$json")" 0 "missed of probe $i"
	assert_match "$(jq -r ".probes[$i].addr" <<< "$json")" '^0xffffffff8' "address of probe $i"
done
# The entry probe sits on the fentry site (after the ENDBR, if there is one).
entry=$(jq -r '.probes[0].addr' <<< "$json")
sym=$(awk -v f="$GETPGID_FUNC" '$3 == f { print $1; exit }' /proc/kallsyms)
assert_eq "$entry" "$(printf '0x%x' $((0x$sym + GETPGID_FENTRY)))" "entry probe address (the fentry site)"
assert_no_kprobes
