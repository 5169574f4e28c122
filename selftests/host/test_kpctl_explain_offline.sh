#!/usr/bin/env bash
# kpctl explain --offline, the one decoder that picks every test and
# benchmark site (scripts/sites/explain.py), on the host: it reads only the
# image. It must agree with the sites the tests use (build/sites.env,
# build/callopt-sites.env), refuse what the kernel refuses (a notrace and a
# blacklisted function), list every callopt refusal of a site (the RE_*
# classes are refused by exactly the rule they test), filter by mechanism,
# report several functions in one document, and reject bad input with a
# clear error and nothing else printed.
. "$(dirname "$0")/../lib.sh"
[ -x "$KPCTL" ] || skip "no $KPCTL (make loader)"
command -v jq > /dev/null || skip "no jq"
VM=$BUILD/vmlinux
[ -r "$VM" ] || fail "no $VM (make kernel)"
. "$BUILD/sites.env"
. "$BUILD/callopt-sites.env"
off() { kpctl_j explain --offline --vmlinux "$VM" "$@"; }
# site JSON OFFSET EXPR: EXPR (jq) of the site at OFFSET (hex or decimal).
site() {
	local v
	v=$(jq -r "[.sites[] | select(.offset == $(($2)))] | if length == 1 then .[0] | $3 else error end" \
		<<< "$1") || fail "not one site at offset $2"
	[ -n "$v" ] && [ "$v" != null ] || fail "no $3 at offset $2"
	printf '%s\n' "$v"
}

# The getpgid function: the fentry site, the single- and multi-instruction
# callopt sites that gen-sites picked.
j=$(off "$GETPGID_FUNC") || fail "explain --offline $GETPGID_FUNC: $j"
assert_eq "$(json_bool "$j" .offline)" true "offline flag"
assert_eq "$(json_str "$j" .func)" "$GETPGID_FUNC" "func"
assert_eq "$(json_str "$j" .vmlinux.build_id)" unknown "build id (not compared offline)"
assert_eq "$(site "$j" "$GETPGID_FENTRY" .mechanism)" ftrace "GETPGID_FENTRY"
assert_eq "$(site "$j" "$GETPGID_SINGLE" .mechanism)" callopt "GETPGID_SINGLE"
assert_eq "$(site "$j" "$GETPGID_SINGLE" '.region == .len')" true "GETPGID_SINGLE is one instruction"
assert_eq "$(site "$j" "$GETPGID_SINGLE" '.callopt_refusals | length')" 0 "no refusal at a callopt site"
a=$(off --all "$GETPGID_FUNC") || fail "explain --offline --all: $a"
assert_eq "$(site "$a" "$GETPGID_MIDINSN" .boundary)" false "GETPGID_MIDINSN is inside an instruction"
assert_eq "$(site "$a" "$GETPGID_MIDINSN" .mechanism)" refused "GETPGID_MIDINSN"
m=$(off "$GETPGID_MULTI_FUNC") || fail "explain --offline $GETPGID_MULTI_FUNC: $m"
assert_eq "$(site "$m" "$GETPGID_MULTI" .mechanism)" callopt "GETPGID_MULTI"
assert_eq "$(site "$m" "$GETPGID_MULTI" '.region > .len')" true "GETPGID_MULTI spans several instructions"

# Every callopt refusal of a site, not only the first: the reproducer of the
# preempt-count bug is refused by the %gs rule and nothing else.
f=${RE_SOFTIRQ%%+*} o=${RE_SOFTIRQ##*+}
s=$(off "$f") || fail "explain --offline $f: $s"
assert_eq "$(site "$s" "$o" '[.callopt_refusals[].rule] | join(",")')" gs "rules refusing $RE_SOFTIRQ"
assert_eq "$(site "$s" "$o" .callopt_refusal_count)" 1 "refusals counted at $RE_SOFTIRQ"
for cls in RE_REP:rep RE_FRAME_MULTI:orc; do
	v=${cls%%:*} rule=${cls##*:} spec=${!v%% *}
	s=$(off "${spec%%+*}") || fail "explain --offline ${spec%%+*}: $s"
	assert_eq "$(site "$s" "${spec##*+}" "[.callopt_refusals[].rule] | contains([\"$rule\"])")" \
		true "$v $spec refused by the $rule rule"
done

# What the kernel refuses: a notrace function (clear_page_rep, assembler:
# no fentry site) and a NOKPROBE_SYMBOL() one, at every offset.
for fr in "clear_page_rep:notrace" "kprobe_int3_handler:blacklisted"; do
	fn=${fr%%:*} why=${fr##*:}
	r=$(off "$fn") || fail "explain --offline $fn: $r"
	assert_eq "$(jq '[.sites[] | select(.mechanism != "refused")] | length' <<< "$r")" 0 \
		"$fn: sites not refused"
	assert_eq "$(jq --arg w "$why" '.size as $n | [.sites[] | select(.offset < $n) |
		select(.reason | contains($w) | not)] | length' <<< "$r")" 0 \
		"$fn: every refusal before the end says $why"
done

# --mechanism: exactly the unfiltered sites of those mechanisms.
all=$(jq -c '[.sites[] | select(.mechanism == "callopt" or .mechanism == "ftrace") | .offset]' <<< "$j")
[ "$all" != "[]" ] || fail "no callopt or ftrace site in $GETPGID_FUNC"
got=$(off --mechanism callopt,ftrace "$GETPGID_FUNC" | jq -c '[.sites[].offset]')
assert_eq "$got" "$all" "--mechanism callopt,ftrace"

# Several functions: one document, the reports in order.
two=$(off "$GETPGID_FUNC" "$GETPGID_MULTI_FUNC") || fail "two functions: $two"
assert_eq "$(jq -r '[.functions[].func] | join(" ")' <<< "$two")" \
	"$GETPGID_FUNC $GETPGID_MULTI_FUNC" "functions in order"
assert_eq "$(jq -c '.functions[0].sites' <<< "$two")" "$(jq -c .sites <<< "$j")" \
	"the first report is the single one"

# 0xADDR: the function that starts there, also one of several static
# functions that share a name (which a name alone cannot reach).
addr=$(json_str "$j" .addr)
assert_eq "$(off "$addr" | jq -c .sites)" "$(jq -c .sites <<< "$j")" "$GETPGID_FUNC by its address"
dup=$(nm "$VM" | awk '$2 == "t" { n[$3]++; a[$3] = $1 } END { for (f in n) if (n[f] > 1) { print a[f], f; exit } }')
[ -n "$dup" ] || fail "no static function name shared by several functions in $VM"
d=$(off "0x${dup%% *}") || fail "explain --offline 0x${dup%% *}: $d"
assert_eq "$(json_str "$d" .func) $(json_str "$d" .addr)" "${dup##* } 0x${dup%% *}" \
	"a shared name by its address"
assert_match "$(jq -r '.sites[0].reason' <<< "$d")" "kernel symbols are named" \
	"a shared name is refused by name"

# Bad input: a clear error, exit 1 or 2, and no report.
bad() { # RC WHAT ARGS...
	local rc=$1 what=$2 o got; shift 2
	o=$("$KPCTL" -j explain "$@" 2> /dev/null); got=$?
	assert_eq "$got" "$rc" "$what: exit"
	assert_kpctl_json "$o" "$got" "$what"
	jq -e '(.error | type == "string" and length > 0) and (has("sites") or has("functions") | not)' \
		<<< "$o" > /dev/null || fail "$what: want only an error, got ${o:0:200}"
}
bad 2 "--offline without --vmlinux" --offline "$GETPGID_FUNC"
bad 2 "--verify with --offline" --offline --verify --vmlinux "$VM" "$GETPGID_FUNC"
bad 2 "--callopt without --offline" --callopt "$GETPGID_FUNC"
bad 2 "an unknown mechanism" --offline --vmlinux "$VM" --mechanism callopt,fast "$GETPGID_FUNC"
bad 2 "MODULE:FUNC" --offline --vmlinux "$VM" "kpx_targets:kpx_target_single"
bad 2 "a function not in the image" --offline --vmlinux "$VM" no_such_function_kpx
bad 2 "an address where no function starts" --offline --vmlinux "$VM" 0x1234
bad 2 "an address that does not parse" --offline --vmlinux "$VM" 0x12zz
bad 2 "one of two not in the image" --offline --vmlinux "$VM" "$GETPGID_FUNC" no_such_function_kpx
bad 1 "an image that is no ELF file" --offline --vmlinux "$KPX_ROOT/README.md" "$GETPGID_FUNC"
echo "PASS"
