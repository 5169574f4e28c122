#!/usr/bin/env bash
# kpctl's JSON keys and their types, per command, against the inventory
# checked in beside the man page (loader/Documentation/kpctl-json-keys.txt):
# every key a command prints, with the type of its value, must be listed
# there, and every key listed for a command this test runs must appear.
# A key added, removed or retyped without the inventory (and, when it
# breaks readers, a schema bump) fails here.
#
# Inventory lines: COMMAND PATH TYPES. PATH joins object keys with '.';
# an array's elements are '[]'; a count object keyed by names (a
# mechanism, a source, a reason) has '*' for the name. TYPES are jq's
# (string, number, boolean, null, object, array) joined with '|': the
# types the key may have, of which this run must see at least one. A
# trailing '?' on PATH marks a key only some runs print (it may be absent).
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
SINGLE="$F+$GETPGID_SINGLE"
INV="$KPX_ROOT/loader/Documentation/kpctl-json-keys.txt"
[ -r "$INV" ] || fail "no inventory $INV"
seen=$(mktemp)
trap 'rm -f "$seen"' EXIT

# The count objects keyed by names, whose keys are values.
MAPS='mechanisms|mechanism_sources|failure_reasons|classes'
leaves() { # COMMAND JSON
	jq -r --arg cmd "$1" --arg maps "$MAPS" '
		paths as $p | getpath($p) as $v |
		($p | [foreach .[] as $k (null;
			$k;
			if ($k | type) == "number" then "[]" else $k end)]) as $q |
		[$cmd, ($q | join(".")), ($v | type)] | @tsv' <<< "$2" |
	sed -E "s/\t((.*\.)?($MAPS))\.[^.\t]+/\t\1.*/"
}
run() { # COMMAND ARGS...
	local cmd=$1 json
	shift
	json=$(kpctl_j "$@") || fail "kpctl -j $*: $json"
	leaves "$cmd" "$json" >> "$seen"
}

run version version
run feature feature
run attach attach --trigger 100 "$F" "$SINGLE"
run attach attach --trigger 100 --cost 100 "$F"
run attach-multi attach --multi --trigger 100 "$F" "$SINGLE"
run explain explain "$F"
run regs regs "$SINGLE"
run links links -n 20
run links-multi links --multi -n 20
run stress stress -n 10
assert_no_kprobes

sort -u "$seen" -o "$seen"
note "$(wc -l < "$seen") (command, key, type) seen"
# KPX_JSON_KEYS_DUMP=FILE keeps what this run saw (to write the inventory).
[ -z "${KPX_JSON_KEYS_DUMP:-}" ] || cp "$seen" "$KPX_JSON_KEYS_DUMP"
# compare INVENTORY: 0 when it and what this run saw agree; says why not.
compare() {
	local inv=$1 bad=0 cmd path type types line
	# Every key seen, with its type, is in the inventory.
	while IFS=$'\t' read -r cmd path type; do
		line=$(awk -v c="$cmd" -v p="$path" '$1 == c && ($2 == p || $2 == p "?")' "$inv")
		if [ -z "$line" ]; then
			echo "kpctl $cmd prints $path ($type): not in the inventory"
			bad=1
		elif ! grep -qE "(^|\|)$type(\||$)" <<< "$(awk '{print $3}' <<< "$line")"; then
			echo "kpctl $cmd prints $path as $type: the inventory says $(awk '{print $3}' <<< "$line")"
			bad=1
		fi
	done < "$seen"
	# Every key listed for these commands appears (unless marked '?').
	while read -r cmd path types; do
		case $cmd in ''|'#'*) continue ;; esac
		[[ $path == *'?' ]] && continue
		grep -qP "^\Q$cmd\E\t\Q$path\E\t" "$seen" || {
			echo "kpctl $cmd: the inventory lists $path ($types), which no run printed"
			bad=1
		}
	done < "$inv"
	return $bad
}

why=$(compare "$INV") || { echo "$why" >&2; fail "kpctl's JSON and $INV disagree (see above)"; }

# Negative controls: the check sees a key left out of the inventory, a
# key the inventory lists that kpctl no longer prints, and a retyped key.
ctl=$(mktemp)
trap 'rm -f "$seen" "$ctl"' EXIT
grep -v '^attach probes\.\[\]\.probe_flags ' "$INV" > "$ctl"
why=$(compare "$ctl") && fail "control: a key missing from the inventory went unseen"
assert_match "$why" "attach prints probes\.\[\]\.probe_flags \(number\): not in the inventory" \
	"control: missing key"
{ cat "$INV"; echo "attach probes.[].full_regs boolean"; } > "$ctl"
why=$(compare "$ctl") && fail "control: a key kpctl no longer prints went unseen"
assert_match "$why" "lists probes\.\[\]\.full_regs" "control: removed key"
sed 's/^feature schema number$/feature schema string/' "$INV" > "$ctl"
why=$(compare "$ctl") && fail "control: a retyped key went unseen"
assert_match "$why" "feature prints schema as number: the inventory says string" "control: retyped key"
