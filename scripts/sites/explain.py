"""explain: how the project's scripts ask the one site decoder.

Every probe site that a script picks from a kernel image is decided by
`kpctl explain --offline --callopt` (loader/explain.c): the kernel's own
x86 instruction decoder and the rules of arch/x86/kernel/kprobes/, on the
image's own tables (exception table, jump labels, static calls, ftrace
sites, ORC data, kprobes blacklist). --callopt decides as our kernel would
also for the stock image, so that both kernels are measured and tested at
the same instructions. Scripts read its JSON and choose among the sites;
they decode nothing themselves.

Each site is a dict with (see docs/kpctl.md):
  offset, addr, boundary, len, bytes, insn (a coarse mnemonic), branch
  (a jump, call or return), target (of a relative jump), rip_target (the
  address of a RIP-relative operand: with %gs, the per-CPU offset), mechanism
  (ftrace, callopt, jmpopt, int3, refused), region (the bytes that callopt
  or jmpopt displaces), reason, callopt_refusals (every check of callopt
  that fails: rule, offset, reason) and callopt_refusal_count
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KPCTL = os.environ.get('KPCTL', os.path.join(ROOT, 'build', 'kpctl'))
BATCH = 2000


def _die(msg):
    sys.exit('%s: %s' % (os.path.basename(sys.argv[0]), msg))


def explain(vmlinux, funcs, mechanisms=None, strict=False):
    """Yields the report (dict) of each of FUNCS, in order. A function that
    kpctl cannot read (its report holds only "error") is left out with a
    warning, or, with STRICT, ends the script."""
    funcs = list(funcs)
    for i in range(0, len(funcs), BATCH):
        batch = funcs[i:i + BATCH]
        cmd = [KPCTL, '-j', 'explain', '--offline', '--callopt', '--vmlinux', vmlinux]
        if mechanisms:
            cmd += ['--mechanism', ','.join(mechanisms)]
        p = subprocess.run(cmd + batch, capture_output=True, text=True)
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            _die('kpctl explain printed no JSON (exit %d): %s' % (p.returncode, p.stderr.strip()))
        reports = doc.get('functions') if len(batch) > 1 else [doc]
        # Exit 1 with reports: some functions could not be read (each says
        # why); anything else is the command failing as a whole.
        if reports is None or p.returncode not in (0, 1) or \
                p.returncode and not all('error' in r or 'sites' in r for r in reports):
            _die('kpctl explain: %s' % doc.get('error', p.stderr.strip()))
        for name, rep in zip(batch, reports):
            if 'sites' in rep:
                yield rep
            elif strict:
                _die('kpctl explain %s: %s' % (name, rep.get('error')))
            else:
                print('%s: left out %s: %s' % (os.path.basename(sys.argv[0]), name,
                                               rep.get('error')), file=sys.stderr)


def explain_one(vmlinux, func, mechanisms=None):
    return next(explain(vmlinux, [func], mechanisms, strict=True))


def fentry_offset(report):
    """The offset of FUNC's fentry call, or None (a notrace function)."""
    for s in report['sites']:
        if s['mechanism'] == 'ftrace' and \
                int(s['addr'], 16) == int(report['addr'], 16) + s['offset']:
            return s['offset']
    return None


def single(site):
    """A callopt site of one instruction (5 bytes or more)."""
    return site['mechanism'] == 'callopt' and site['region'] == site['len']


def multi(site):
    """A callopt site whose 5 bytes span several instructions."""
    return site['mechanism'] == 'callopt' and site['region'] > site['len']
