#!/usr/bin/env bash
# Which mitigations this boot really chose, in the log of every run (the
# mitigation rows of check-configs compare them): each file of
# /sys/devices/system/cpu/vulnerabilities/, the active return thunk, and
# the kernel's own boot lines about them. What the command line asked for
# must be what the kernel did:
#   retbleed=stuff       retbleed "Mitigation: Stuffing" and the return
#                        thunk call_depth_return_thunk (call depth tracking)
#   mitigations=off      spectre_v2 and retbleed not "Mitigation: ...",
#                        no return thunk named
# and on a kernel built with return thunks and no such option, the
# retbleed and spec_rstack_overflow files must exist (a kernel that lacks
# them would make these rows say nothing).
# KASLR: where the kernel image runs. Booted without nokaslr (vm-run
# --kaslr) on a kernel with RANDOMIZE_BASE, the image must have moved: its
# virtual (_text against the link address) or its physical load address
# (iomem's "Kernel code" against PHYSICAL_START) differs. Both unmoved by
# chance is about one boot in 500,000 (some 500 virtual by 1,000 physical
# 2 MiB slots in this VM's memory).
. "$(dirname "$0")/../lib.sh"
vd=/sys/devices/system/cpu/vulnerabilities
[ -d "$vd" ] || fail "no $vd"
for f in "$vd"/*; do
	echo "# vulnerability $(basename "$f"): $(cat "$f")"
done
echo "# cpu: $(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //')"
thunk=$(dmesg | sed -n 's/.*active return thunk: //p' | tail -n1)
echo "# active return thunk: ${thunk:-none named}"
dmesg | grep -E 'Spectre V2 :|RETBleed:|Speculative Return Stack Overflow:|ITS:' | sed 's/^/# boot: /'
cmd=$(cat /proc/cmdline)
echo "# command line: $cmd"
[ -r "$vd/retbleed" ] || fail "no $vd/retbleed"
[ -r "$vd/spectre_v2" ] || fail "no $vd/spectre_v2"
cfg=$(kernel_config)
text=$(awk '$3 == "_text" { print $1; exit }' /proc/kallsyms)
code=$(awk -F'[- :]+' '/Kernel code$/ { sub(/^ +/, ""); print $1; exit }' /proc/iomem)
phys=$(sed -n 's/^CONFIG_PHYSICAL_START=//p' "$cfg")
[ -n "$text" ] && [ -n "$code" ] && [ -n "$phys" ] ||
	fail "cannot tell where the image runs (_text '$text', Kernel code '$code', PHYSICAL_START '$phys')"
voff=$(( 0x$text - (0xffffffff80000000 + phys) ))
poff=$(( 0x$code - phys ))
case " $cmd " in
*" nokaslr "*) kaslr=off ;;
*) kaslr=on ;;
esac
grep -q '^CONFIG_RANDOMIZE_BASE=y' "$cfg" || kaslr="off (no RANDOMIZE_BASE)"
printf '# kaslr: %s (virtual offset %#x, physical %#x)\n' "$kaslr" "$voff" "$poff"
case $kaslr in
on)	[ "$voff" != 0 ] || [ "$poff" != 0 ] ||
		fail "booted without nokaslr, but the image runs at its link address, virtual and physical" ;;
off*)	assert_eq "$voff" 0 "virtual KASLR offset ($kaslr)" ;;
esac
case " $cmd " in
*" mitigations=off "*)
	grep -q '^Mitigation' "$vd/spectre_v2" && fail "mitigations=off, but spectre_v2: $(cat "$vd/spectre_v2")"
	grep -q '^Mitigation' "$vd/retbleed" && fail "mitigations=off, but retbleed: $(cat "$vd/retbleed")"
	[ -z "$thunk" ] || fail "mitigations=off, but the return thunk is $thunk"
	;;
*" retbleed=stuff "*)
	assert_eq "$(cat "$vd/retbleed")" "Mitigation: Stuffing" "retbleed with retbleed=stuff"
	assert_eq "$thunk" call_depth_return_thunk "active return thunk with retbleed=stuff"
	;;
esac
exit 0
