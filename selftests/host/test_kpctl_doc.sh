#!/usr/bin/env bash
# kpctl's man page (loader/Documentation/kpctl.rst -> build/kpctl.8) and bash
# completion (loader/bash-completion/kpctl) agree with build/kpctl's help
# texts, both ways (scripts/check/kpctl-doc check: commands, options per command
# with and without arguments, the SYNOPSIS, the rendered page, what the
# completion offers); "kpctl at<TAB>" is attach and "kpctl attach --tr<TAB>"
# --trigger. No VM: kpctl --help needs no kernel support.
# Negative controls: an rst without an option, an rst with an option kpctl
# does not have, a stale man page, a completion without an option, a
# completion that takes an option's argument for none, a completion that
# offers --version after a command (kpctl refuses it there), and a kpctl
# whose help has a command and an option the docs lack must each fail the
# check, naming what differs.
. "$(dirname "$0")/../lib.sh"
DOC=$KPX_ROOT/scripts/check/kpctl-doc
RST=$KPX_ROOT/loader/Documentation/kpctl.rst
COMP=$KPX_ROOT/loader/bash-completion/kpctl
MAN=$BUILD/kpctl.8
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

[ -x "$KPCTL" ] || fail "no $KPCTL: make loader"
[ -r "$MAN" ] || fail "no $MAN: make man (scripts/check/kpctl-doc man)"
assert_rc 0 "$DOC" check
note "$out"
assert_match "$out" "agree with kpctl.rst, kpctl.8 and kpctl" "check summary"

# The two completions the docs promise, directly.
comp() { # WORD...: what the completion offers for the last WORD
	( cd "$t" && bash --norc --noprofile -c '. "$1"; shift; COMP_WORDS=("$@")
		COMP_CWORD=$(( $# - 1 )); _kpctl kpctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		echo "${COMPREPLY[*]}"' bash "$COMP" "$@" )
}
assert_eq "$(comp kpctl at)" attach "kpctl at<TAB>"
assert_eq "$(comp kpctl attach --tr)" --trigger "kpctl attach --tr<TAB>"
# --version goes before the command only: kpctl refuses it after one, and
# the completion does not offer it there.
assert_rc 2 "$KPCTL" attach --version
assert_match "$(comp kpctl --v)" "--version" "kpctl --v<TAB>"
assert_eq "$(comp kpctl attach --v)" --verbose "kpctl attach --v<TAB>"

# The man page renders, with its sections.
if command -v man >/dev/null; then
	page=$(MANWIDTH=80 man -l "$MAN" 2>&1) || fail "man -l $MAN: $page"
else
	page=$(groff -man -Tutf8 "$MAN" 2>&1) || fail "groff -man $MAN: $page"
fi
assert_match "$(head -n1 <<< "$page")" '^KPCTL\(8\)' "rendered page header"
assert_match "$page" $'\nCOMMANDS\n   attach\n' "COMMANDS section with attach"
assert_match "$page" $'\nEXIT STATUS\n' "EXIT STATUS section"

# check_fails WHAT REGEX ARGS...: the check must fail, naming REGEX.
check_fails() {
	local what=$1 re=$2
	shift 2
	assert_rc 1 "$DOC" check "$@"
	assert_match "$out" "$re" "negative control '$what'"
	note "negative control '$what': $(grep -m1 -E -- "$re" <<< "$out")"
}
# An rst without attach's --legacy (also the generated page from it).
grep -v -- '^-l, --legacy$' "$RST" > "$t/no-legacy.rst"
[ "$(wc -l < "$t/no-legacy.rst")" -lt "$(wc -l < "$RST")" ] || fail "the doctored rst still has --legacy"
"$DOC" man -o "$t/no-legacy.8" "$t/no-legacy.rst" || fail "rst2man on the doctored rst"
check_fails "rst without --legacy" "options of attach: missing -l, --legacy" --rst "$t/no-legacy.rst" --man "$t/no-legacy.8"
# An rst with an option kpctl does not have (regs --frobnicate N).
sed 's/^-t S, --timeout S$/--frobnicate N\n    Not an option.\n\n&/' "$RST" > "$t/extra.rst"
"$DOC" man -o "$t/extra.8" "$t/extra.rst" || fail "rst2man on the doctored rst"
check_fails "rst with --frobnicate" "options of regs: not in kpctl's help: --frobnicate N" --rst "$t/extra.rst" --man "$t/extra.8"
# The current rst against a man page made from another rst.
check_fails "stale man page" "is not what .* makes now" --man "$t/no-legacy.8"
# A completion without attach's --cost.
sed "/^	attach)/,/;;/ s/ --cost//g" "$COMP" > "$t/no-cost"
! cmp -s "$COMP" "$t/no-cost" || fail "the doctored completion still has --cost"
check_fails "completion without --cost" "kpctl attach --<TAB>: missing --cost" --completion "$t/no-cost"
# A completion that does not know --trigger takes an argument.
sed "/^	attach)/,/;;/ s/args='--trigger /args='/" "$COMP" > "$t/flag-trigger"
! cmp -s "$COMP" "$t/flag-trigger" || fail "the doctored completion still takes --trigger's argument"
check_fails "completion with --trigger as a flag" "'kpctl attach --trigger <TAB>' gives .*, want '' \(--trigger takes N\)" --completion "$t/flag-trigger"
# A completion that offers --version after a command.
sed "s/^\(	local cgopts='.*\)'$/\1 --version'/" "$COMP" > "$t/cmd-version"
! cmp -s "$COMP" "$t/cmd-version" || fail "the doctored completion does not offer --version after a command"
check_fails "completion with --version after a command" "kpctl attach --<TAB>: not in kpctl's help: --version" --completion "$t/cmd-version"
# A kpctl whose help has a command and an attach option the docs lack.
cat > "$t/kpctl" <<EOF
#!/bin/bash
if [ "\$*" = --help ]; then
	"$KPCTL" --help | sed 's/^Commands.*/&\n  frob             a command nobody documented/'
elif [ "\$*" = "attach --help" ]; then
	"$KPCTL" attach --help | sed 's/^  -h, --help .*/  -z, --zap N         an option nobody documented\n&/'
else
	exec "$KPCTL" "\$@"
fi
EOF
chmod +x "$t/kpctl"
check_fails "kpctl with frob" "COMMANDS: missing frob" --kpctl "$t/kpctl"
assert_match "$out" "options of attach: missing -z, --zap N" "negative control 'kpctl with --zap'"
assert_match "$out" "kpctl <TAB>: missing frob" "negative control 'kpctl with frob': completion"
