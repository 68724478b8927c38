#!/usr/bin/env python3
"""summarize.py RAW.csv OUTDIR -- medians of the shared-memory benchmarks.

RAW.csv lines: bench,transport,size,value,unit,rep (as run_shm_bench.sh
writes them).  Writes OUTDIR/shm_bench.md (Markdown tables: medians over
the repetitions, ratios against the MPIs, the targets) and the data files
plot.gp reads (lat.dat, bw.dat).
"""
import statistics
import sys
from collections import defaultdict

raw, out = sys.argv[1], sys.argv[2]
vals = defaultdict(list)  # (bench, transport, size) -> [values]
for line in open(raw):
    f = line.strip().split(',')
    if len(f) < 6 or f[0] == 'bench':
        continue
    try:
        vals[(f[0], f[1], int(f[2]))].append(float(f[3]))
    except ValueError:
        continue

COLS = ['pcor-shm', 'pcor-ofi-shm', 'fi_pingpong-shm', 'ompi-vader', 'mpich']


def med(bench, tr, size):
    v = vals.get((bench, tr, size))
    return statistics.median(v) if v else None


def sizes(bench):
    return sorted({s for (b, _, s) in vals if b == bench})


def fmt(v, digits):
    return '–' if v is None else f'{v:.{digits}f}'


def nrep(bench, tr, size):
    return len(vals.get((bench, tr, size), []))


lines = []
w = lines.append
present = [c for c in COLS if any(t == c for (_, t, _) in vals)]


def table(bench, digits, unit, ratio_name, ratio_of):
    cols = [c for c in present if any((bench, c, s) in vals for s in sizes(bench))]
    w(f'| size (B) | ' + ' | '.join(f'{c} ({unit})' for c in cols) +
      f' | {ratio_name} |')
    w('|---:' * (len(cols) + 2) + '|')
    for s in sizes(bench):
        r = ratio_of(s)
        w(f'| {s} | ' + ' | '.join(fmt(med(bench, c, s), digits) for c in cols) +
          f' | {fmt(r, 2)} |')
    w('')


def ratio(a, b):
    return a / b if a is not None and b else None


def best_mpi_bw(s):
    v = [x for x in (med('bw', 'ompi-vader', s), med('bw', 'mpich', s)) if x]
    return max(v) if v else None


reps = max((len(v) for v in vals.values()), default=0)
w(f'Medians of {reps} repetitions.')
w('')
w('**One-way latency** (RTT/2, µs; lower is better; ratio = pcor-shm / Open MPI vader):')
w('')
table('latency', 2, 'µs', 'pcor-shm / vader',
      lambda s: ratio(med('latency', 'pcor-shm', s), med('latency', 'ompi-vader', s)))
w('**Streaming bandwidth** (window of 64, MB/s = 10^6 B/s; ratio = pcor-shm / best of Open MPI and MPICH):')
w('')
table('bw', 0, 'MB/s', 'pcor-shm / best MPI',
      lambda s: ratio(med('bw', 'pcor-shm', s), best_mpi_bw(s)))
w('**Message rate**, 1-byte messages, one pair, window of 64 (messages/s; ratio = pcor-shm / Open MPI vader):')
w('')
table('rate', 0, 'msg/s', 'pcor-shm / vader',
      lambda s: ratio(med('rate', 'pcor-shm', s), med('rate', 'ompi-vader', s)))

# Memory (Chai et al., Figure 6).
mem = {}
for line in open(raw):
    f = line.strip().split(',')
    if f[0] == 'shmmem' and len(f) >= 5:
        mem[int(f[2])] = (int(f[3]), int(f[4]))
if mem:
    ring, pool = 32 << 10, 2 << 20
    w('**Shared memory per host** after every process exchanged 64 B, 9000 B and '
      '60000 B messages with every other (MiB = 2^20 B). "Allocated" are the pages '
      'the kernel really gave the segments; "reserved" their address space. The '
      'per-pair design gives each of the P(P−1) pairs its own buffer of a ring and '
      'what our per-process cell pool holds (32 KiB + 2 MiB):')
    w('')
    w('| P | allocated (MiB) | reserved (MiB) | P(P−1) × 2.03 MiB (per-pair buffers) | allocated / per-pair |')
    w('|---:|---:|---:|---:|---:|')
    for p in sorted(mem):
        a, r = mem[p]
        pp = p * (p - 1) * (ring + pool)
        w(f'| {p} | {a / 2**20:.1f} | {r / 2**20:.1f} | {pp / 2**20:.1f} | {a / pp:.3f} |')
    w('')

# Targets.
w('**Targets** (medians of this run):')
w('')
for s in (1, 2, 4, 8):
    r = ratio(med('latency', 'pcor-shm', s), med('latency', 'ompi-vader', s))
    if r is not None:
        w(f'- {s} B latency: pcor-shm / vader = {r:.2f} (target ≤ 0.80): '
          f'{"met" if r <= 0.8 else "missed"}')
for s in (512 << 10, 4 << 20):
    r = ratio(med('bw', 'pcor-shm', s), best_mpi_bw(s))
    if r is not None:
        w(f'- bandwidth at {s >> 10} KiB: pcor-shm / best MPI = {r:.2f} (target ≥ 1.0): '
          f'{"met" if r >= 1.0 else "missed"}')
r = ratio(med('rate', 'pcor-shm', 1), med('rate', 'ompi-vader', 1))
if r is not None:
    w(f'- 1-byte message rate: pcor-shm / vader = {r:.2f} (target ≥ 1.0): '
      f'{"met" if r >= 1.0 else "missed"}')
open(f'{out}/shm_bench.md', 'w').write('\n'.join(lines) + '\n')
print('\n'.join(lines))

for bench, fname in (('latency', 'lat.dat'), ('bw', 'bw.dat')):
    with open(f'{out}/{fname}', 'w') as f:
        f.write('# size ' + ' '.join(COLS) + '\n')
        for s in sizes(bench):
            if s == 0:
                continue
            f.write(f'{s} ' + ' '.join(
                fmt(med(bench, c, s), 4).replace('–', 'NaN') for c in COLS) + '\n')
