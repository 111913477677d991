#!/usr/bin/env python3
"""One decode step's kernels as the GPU ran them inside the captured graph, from
`nsys stats --report cuda_gpu_trace --format csv` (nsys profile --cuda-graph-trace=node):
kernels are split into runs at host gaps over GAP_US; the most common run length is the
decode step; the median-span run of that length is printed kernel by kernel (duration, gap
before it), then per kernel name totals over all such runs."""
import csv, sys, statistics, collections

GAP_US = 15.0
rows, copies = [], []
with open(sys.argv[1], newline="") as f:
    lines = [l for l in f if "," in l]
for r in csv.DictReader(lines):
    name = r.get("Name", "")
    try:
        s = float(r["Start (ns)"]); d = float(r["Duration (ns)"])
    except (KeyError, ValueError):
        continue
    if "[CUDA mem" in name or "memcpy" in name.lower() or "memset" in name.lower():
        copies.append((s, d, name))
        continue
    rows.append((s, d, name))
rows.sort()
runs, cur = [], []
for s, d, n in rows:
    if cur and s - (cur[-1][0] + cur[-1][1]) > GAP_US * 1e3:
        runs.append(cur); cur = []
    cur.append((s, d, n))
if cur:
    runs.append(cur)
lens = collections.Counter(len(r) for r in runs)
print("runs by kernel count (top 5):", lens.most_common(5))
want = int(sys.argv[2]) if len(sys.argv) > 2 else lens.most_common(1)[0][0]
steps = [r for r in runs if len(r) == want]
span = lambda r: r[-1][0] + r[-1][1] - r[0][0]
ends = {id(r): i for i, r in enumerate(runs)}
# Between one step's last kernel and the next one's first: the host's share of a token
# (logits copied back, sampling, the next inputs uploaded, the graph launched).
between = []
for i in range(1, len(runs)):
    if len(runs[i]) == want and len(runs[i - 1]) == want:
        a = runs[i - 1][-1][0] + runs[i - 1][-1][1]
        between.append((runs[i][0][0] - a, [c for c in copies if a <= c[0] < runs[i][0][0]]))
if between:
    gaps = sorted(b[0] for b in between)
    print(f"between steps: median {gaps[len(gaps)//2]/1e3:.1f} us over {len(gaps)}; copies in one:",
          [(f"{c[1]/1e3:.1f}us", c[2][:30]) for c in between[len(between)//2][1]])
steps.sort(key=span)
med = steps[len(steps) // 2]
busy = sum(d for _, d, _ in med)
print(f"{len(steps)} runs of {want} kernels; median span {span(med)/1e3:.1f} us, "
      f"kernel time {busy/1e3:.1f} us, gaps {(span(med)-busy)/1e3:.1f} us")
prev = None
for s, d, n in med:
    gap = 0.0 if prev is None else (s - prev) / 1e3
    print(f"{d/1e3:8.2f} {gap:7.2f}  {n[:90]}")
    prev = s + d
tot = collections.defaultdict(lambda: [0, 0.0, 0.0])
for r in steps:
    prev = None
    for s, d, n in r:
        t = tot[n[:70]]; t[0] += 1; t[1] += d; t[2] += 0.0 if prev is None else s - prev
        prev = s + d
print("\nper name over all runs: count/run, mean us, mean gap before us")
for n, (c, d, g) in sorted(tot.items(), key=lambda kv: -kv[1][1]):
    print(f"{c/len(steps):6.1f} {d/c/1e3:8.2f} {g/c/1e3:7.2f}  {n}")
