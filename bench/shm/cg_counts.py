#!/usr/bin/env python3
"""cg_counts.py -- instructions and locked instructions per round trip,
from callgrind profiles (valgrind --tool=callgrind --dump-instr=yes) of a
ping-pong run twice, with a short and a long timed loop.

    cg_counts.py LIB SEND POLL DELIVER SHORT_FILES... -- LONG_FILES...

LIB names the library in the output; SEND, POLL and DELIVER are function
names, as callgrind gives them:
the call made once per message sent, the poll the waiter repeats while
it spins, and the call that hands one arrived message up (called from
within the poll).  Each run's files are its processes' profiles.

Start-up and shutdown cost the same in both runs, so the difference
between them (all processes summed), divided by the messages sent in the
extra round trips, is the steady state.  Per process and round trip it
prints, as CSV rows (lib,counter,value):
  msgs             messages each process sent in the extra round trips
  ir               instructions
  polls            polls (calls of POLL), in the long run
  poll_ir          instructions of an empty poll: POLL's inclusive cost
                   less DELIVER's, per call
  ir_no_spin       ir less the empty polls (all polls but one a message)
  send_ir          SEND's inclusive cost per call
  deliver_ir       DELIVER's inclusive cost per call
  locked           instructions with a lock prefix, and xchg with memory
                   (implicitly locked), executed
  poll_locked      of those, in POLL's own body, per call
  locked_no_spin   locked less poll_locked for the empty polls
Locked instructions are found by disassembling each object with objdump
and matching the addresses callgrind counted.
"""
import collections
import re
import subprocess
import sys

POS = re.compile(r'^[0-9+\-*]')
NAMED = re.compile(r'^(c?(?:ob|fn))=\((\d+)\)(?: (.*))?$')


def step(tok, prev):
    """A callgrind position, possibly relative to the previous one."""
    if tok == '*':
        return prev
    if tok[0] == '+':
        return prev + int(tok[1:], 0)
    if tok[0] == '-':
        return prev - int(tok[1:], 0)
    return int(tok, 0)


class Profile:
    """One process's profile: per-instruction self cost, calls and
    inclusive cost per callee name, the functions instructions belong
    to."""

    def __init__(self, path):
        self.objs, self.fns = {}, {}
        self.self_ir = collections.Counter()   # (ob path, addr) -> Ir
        self.fn_of = {}                        # (ob path, addr) -> fn
        self.calls = collections.Counter()     # callee -> calls
        self.incl = collections.Counter()      # callee -> inclusive Ir
        self.total = 0
        ob = fn = callee = None
        addr = 0
        after_call = False
        with open(path) as f:
            for line in f:
                line = line.rstrip('\n')
                m = NAMED.match(line)
                if m:
                    kind, key, name = m.groups()
                    table = self.objs if kind.endswith('ob') else self.fns
                    if name:
                        table[key] = name
                    if kind == 'ob':
                        ob = table[key]
                    elif kind == 'fn':
                        fn = table[key]
                    elif kind == 'cfn':
                        callee = table[key]
                    continue
                if line.startswith('totals:') or line.startswith('summary:'):
                    self.total = int(line.split()[1])
                    continue
                if line.startswith('calls='):
                    self.calls[callee] += int(line[6:].split()[0])
                    after_call = True
                    continue
                if not line or not POS.match(line):
                    continue
                parts = line.split()
                addr = step(parts[0], addr)
                cost = int(parts[2]) if len(parts) > 2 else 0
                if after_call:
                    self.incl[callee] += cost
                    after_call = False
                    continue
                self.self_ir[(ob, addr)] += cost
                self.fn_of[(ob, addr)] = fn


_locked_cache = {}


def locked_addrs(obj):
    """Addresses of locked instructions in object obj (objdump)."""
    if obj not in _locked_cache:
        out = subprocess.run(['objdump', '-d', '--no-show-raw-insn', obj],
                             capture_output=True, text=True).stdout
        addrs = set()
        for line in out.splitlines():
            m = re.match(r'^\s*([0-9a-f]+):\s+(\S+)(.*)$', line)
            if not m:
                continue
            op, rest = m.group(2), m.group(3)
            if op == 'lock' or (op.startswith('xchg') and '(' in rest):
                addrs.add(int(m.group(1), 16))
        _locked_cache[obj] = addrs
    return _locked_cache[obj]


def counts(profile, send, poll, deliver):
    locked = poll_locked = 0
    for (ob, addr), ir in profile.self_ir.items():
        if ob and addr in locked_addrs(ob):
            locked += ir
            if profile.fn_of.get((ob, addr)) == poll:
                poll_locked += ir
    return {
        'ir': profile.total,
        'msgs': profile.calls.get(send, 0),
        'send_incl': profile.incl.get(send, 0),
        'polls': profile.calls.get(poll, 0),
        'poll_incl': profile.incl.get(poll, 0),
        'deliver_calls': profile.calls.get(deliver, 0),
        'deliver_incl': profile.incl.get(deliver, 0),
        'locked': locked,
        'poll_locked': poll_locked,
    }


def run_counts(files, send, poll, deliver):
    """counts() summed over the processes of one run."""
    total = collections.Counter()
    for f in files:
        total.update(counts(Profile(f), send, poll, deliver))
    return total


def main(argv):
    if '--' not in argv or len(argv) < 7:
        sys.exit(__doc__)
    lib, send, poll, deliver = argv[1:5]
    cut = argv.index('--')
    short, long_ = argv[5:cut], argv[cut + 1:]
    if not short or len(short) != len(long_):
        sys.exit('cg_counts: the same number of profiles in each run')
    ca = run_counts(short, send, poll, deliver)
    cb = run_counts(long_, send, poll, deliver)
    d = {k: cb[k] - ca[k] for k in cb}
    n = d['msgs']
    if n <= 0:
        sys.exit('cg_counts: the long run sent no more messages')
    # Each message received needs a poll and a delivery: a name that
    # matches nothing (a function inlined away) must not pass as 0.
    if cb['polls'] < cb['msgs'] or cb['deliver_calls'] < cb['msgs'] // 2:
        sys.exit(f'cg_counts: {poll} or {deliver} not called for every '
                 'message (renamed or inlined?)')
    # Which process spins more changes from run to run, so the runs are
    # compared whole; each process sends one message a round trip.
    poll_ir = (cb['poll_incl'] - cb['deliver_incl']) / cb['polls']
    poll_locked = cb['poll_locked'] / cb['polls']
    empty = (d['polls'] - n) / n  # may be < 0: the short run spun more
    out = {
        'msgs': n / len(long_),
        'ir': d['ir'] / n,
        'polls': cb['polls'] / cb['msgs'],
        'poll_ir': poll_ir,
        'ir_no_spin': d['ir'] / n - empty * poll_ir,
        'send_ir': cb['send_incl'] / cb['msgs'],
        'deliver_ir': cb['deliver_incl'] / cb['deliver_calls'],
        'locked': d['locked'] / n,
        'poll_locked': poll_locked,
        'locked_no_spin': d['locked'] / n - empty * poll_locked,
    }
    for k, v in out.items():
        print(f'{lib},{k},{v:.1f}')


if __name__ == '__main__':
    main(sys.argv)
