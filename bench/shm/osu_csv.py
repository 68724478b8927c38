#!/usr/bin/env python3
"""osu_csv.py KIND LABEL REP MIN MAX -- OSU micro-benchmark text to CSV.

Reads what osu_latency (KIND lat), osu_bw (bw) or osu_mbw_mr (mr) printed
on stdin and writes the lines run_small.sh keeps in raw.csv, for sizes
MIN to MAX (an OSU too old for -m sweeps every size):
  latency,LABEL,SIZE,MEAN,us,REP      (and lat-p50 / lat-p99 when the
                                       OSU printed tail latencies, -z)
  bw,LABEL,SIZE,MBPS,MB/s,REP         (MB = 10^6 B, as OSU counts)
  rate,LABEL,SIZE,MSGS,msg/s,REP
Columns are found by their names in OSU's "# Size ..." header, so the
layouts of the OSU versions (with or without tail latencies, MB/s next
to Messages/s) all read.  Exits 1 if no line was found.
"""
import re
import sys

kind, label, rep = sys.argv[1], sys.argv[2], sys.argv[3]
lo, hi = int(sys.argv[4]), int(sys.argv[5])


def column(name):
    """CSV bench and unit for an OSU column name, or None."""
    n = name.lower()
    if kind == 'lat':
        if 'p50' in n:
            return 'lat-p50', 'us'
        if 'p99' in n:
            return 'lat-p99', 'us'
        if 'lat' in n and 'tail' not in n:
            return 'latency', 'us'
    elif kind == 'bw' and 'bandwidth' in n:
        return 'bw', 'MB/s'
    elif kind == 'mr' and 'messages/s' in n:
        return 'rate', 'msg/s'
    return None


cols = None
out = []
for line in sys.stdin:
    if line.startswith('# Size'):
        cols = [column(c) for c in re.split(r'\s{2,}', line[1:].strip())]
        continue
    f = line.split()
    if cols is None or len(f) != len(cols) or not f[0].isdigit():
        continue
    size = int(f[0])
    if not lo <= size <= hi:
        continue
    for c, v in zip(cols, f):
        if c:
            try:
                out.append(f'{c[0]},{label},{size},{float(v)},{c[1]},{rep}')
            except ValueError:
                pass
if out:
    print('\n'.join(out))
sys.exit(0 if out else 1)
