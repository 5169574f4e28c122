#!/usr/bin/env python3
"""x86sites: decode functions of a vmlinux (objdump) and its ORC data
(objtool --dump=orc), and tell which instruction boundaries a callopt probe
can take.

The rules mirror the kernel's callopt_prepare() (arch/x86/kernel/kprobes/
opt.c) closely enough to *pick* sites for the tests; the tests then check
what the running kernel really chose. Used by scripts/sites/gen-sites and
scripts/sites/callopt-sites.
"""
import bisect
import signal
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Legacy prefixes, in any order, then REX.
LEGACY = {0xf0, 0xf2, 0xf3, 0x2e, 0x36, 0x3e, 0x26, 0x64, 0x65, 0x66, 0x67}
STRING_MN = re.compile(r'^(rep[a-z]* )?(movs|stos|lods|cmps|scas|ins|outs)[bwlq]?$')
# Instructions the kernel never displaces (control flow, flags, system,
# traps): can_boost() and callopt_insn_ok().
BAD_MN = re.compile(
    r'^(j[a-z]+|call|ret|retf|lret|iret[lqw]?|loop[a-z]*|int[0-9a-z]*|into|'
    r'syscall|sysret[lq]?|sysenter|sysexit|hlt|cli|sti|in|out|ins[bwl]?|outs[bwl]?|'
    r'pushf[qw]?|popf[qw]?|ud[0-2]|lgdt|lidt|lldt|ltr|sgdt|sidt|sldt|str|'
    r'smsw|lmsw|invlpg|swapgs|rdtscp|monitor|mwait|stac|clac|xgetbv|xsetbv|'
    r'vmcall|vmlaunch|vmresume|vmxoff|wrmsr|wbinvd|invd|clts|enter|bound|'
    r'lss|lfs|lgs|xbegin|xabort|getsec|vmread|vmwrite|rsm|'
    r'wrfsbase|wrgsbase|rdfsbase|rdgsbase|vmptrld|vmptrst|vmclear|vmxon|'
    r'f[a-z0-9]*|fwait|wait|int3|endbr(32|64)|xabort|xbegin|xend|'
    r'notrack)$')


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


class Insn:
    __slots__ = ('addr', 'raw', 'mn', 'ops', 'text')

    def __init__(self, addr, raw, mn, ops, text):
        self.addr, self.raw, self.mn, self.ops, self.text = addr, raw, mn, ops, text

    @property
    def length(self):
        return len(self.raw)

    def prefixes(self):
        p = []
        for b in self.raw:
            if b in LEGACY:
                p.append(b)
            else:
                break
        return p


def decode(vmlinux, func):
    """Instructions of FUNC: list of Insn, or [] if it is not found."""
    out = run(['objdump', '-d', '-w', '--no-addresses' if False else '-w',
               '--disassemble=' + func, vmlinux])
    insns, on = [], False
    for line in out.splitlines():
        if re.match(r'^[0-9a-f]+ <%s>:$' % re.escape(func), line):
            on = True
            continue
        if on and not line.strip():
            if insns:
                break
            continue
        if not on:
            continue
        m = re.match(r'^\s*([0-9a-f]+):\t([0-9a-f ]+)\t?(.*)$', line)
        if not m:
            continue
        raw = bytes(int(b, 16) for b in m.group(2).split())
        text = m.group(3).strip()
        parts = text.split(None, 1)
        mn = parts[0] if parts else ''
        ops = parts[1] if len(parts) > 1 else ''
        # "rep stos ..." / "lock add ...": keep the prefix word in mn
        if mn in ('rep', 'repz', 'repnz', 'repe', 'repne', 'lock', 'notrack', 'bnd', 'ds', 'cs', 'gs', 'fs'):
            sub = ops.split(None, 1)
            mn = mn + ' ' + (sub[0] if sub else '')
            ops = sub[1] if len(sub) > 1 else ''
        insns.append(Insn(int(m.group(1), 16), raw, mn, ops, text))
    return insns


class Orc:
    """The ORC table of a vmlinux, from objtool --dump=orc."""

    def __init__(self, vmlinux, objtool=None):
        # build/vmlinux-NAME was built in build/kobj-NAME
        sfx = os.path.basename(vmlinux)[len('vmlinux'):]
        objtool = objtool or os.path.join(os.path.dirname(vmlinux), 'kobj' + sfx,
                                          'tools/objtool/objtool')
        out = run([objtool, '--dump=orc', vmlinux])
        self.ips, self.ent = [], []
        for line in out.splitlines():
            ip, _, rest = line.partition(':')
            self.ips.append(int(ip, 16))
            self.ent.append(rest)

    def at(self, addr):
        i = bisect.bisect_right(self.ips, addr) - 1
        return self.ent[i] if i >= 0 else None


def insn_ok(insn):
    """callopt_insn_ok() and can_boost(), on one instruction: None or why not."""
    pfx = insn.prefixes()
    mn = insn.mn
    base = mn.split()[-1] if mn else ''
    if 0x64 in pfx or 0x65 in pfx or '%gs:' in insn.ops or '%fs:' in insn.ops:
        return 'segment-relative (%gs/%fs) operand'
    if (0xf2 in pfx or 0xf3 in pfx) and STRING_MN.match(base):
        return 'REP string instruction'
    if 0x67 in pfx or 0x2e in pfx:
        return 'address-size or CS prefix (can_boost)'
    if BAD_MN.match(base) or base.startswith('cmov') is False and base in ('mov',) and re.search(r'%(cr|dr)[0-9]', insn.ops):
        return 'never displaced: ' + base
    if re.search(r',%(cs|ds|es|ss|fs|gs)$', insn.ops):
        return 'move to a segment register'
    if base.startswith('xchg') and '%rsp' in insn.ops:
        return 'changes %rsp'
    return None


def region(insns, idx):
    """The instructions a 5-byte call at insns[idx] overwrites, or None."""
    out, n = [], 0
    for j in range(idx, len(insns)):
        out.append(insns[j])
        n += insns[j].length
        if n >= 5:
            return out
    return None


def callopt_why_not(insns, idx, orc, ftrace_sites=()):
    """Why a callopt probe at insns[idx] would be refused, or None."""
    reg = region(insns, idx)
    if reg is None:
        return 'past the end of the function'
    start = insns[idx].addr
    end = reg[-1].addr + reg[-1].length
    for s in ftrace_sites:
        if s < end and start < s + 5:
            return 'ftrace site'
    for k, i in enumerate(reg):
        why = insn_ok(i)
        if why:
            return why
        if k and i.raw[:4] == b'\xf3\x0f\x1e\xfa':
            return 'ENDBR inside the region'
    if len(reg) > 1:
        # can_optimize(): no branch in the function lands after the first byte
        for i in insns:
            if i.mn.split()[-1].startswith('j') or i.mn.split()[-1].startswith('loop'):
                m = re.match(r'^([0-9a-f]+)\b', i.ops)
                if m:
                    t = int(m.group(1), 16)
                    if start + 1 <= t <= start + 5:
                        return 'a branch targets the region'
    if orc is not None:
        # every byte after the site, up to and including the end
        o = orc.at(start)
        if any(orc.at(a) != o for a in range(start + 1, end + 1)):
            return 'the ORC frame changes in the region'
    return None


def fentry_sites(insns):
    return [i.addr for i in insns if i.mn == 'call' and '<__fentry__>' in i.ops]


if __name__ == '__main__':
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    vm, func = sys.argv[1], sys.argv[2]
    orc = Orc(vm)
    ins = decode(vm, func)
    fs = fentry_sites(ins)
    base = ins[0].addr
    for k, i in enumerate(ins):
        why = callopt_why_not(ins, k, orc, fs)
        n = len(region(ins, k) or [])
        print('+0x%x\t%d\t%s\t%s' % (i.addr - base, n, why or 'CALLOPT', i.text))
