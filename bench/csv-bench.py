#!/usr/bin/env python3
"""Schedule plus torch's CSV with communication, through Python, at 64
ranks x 1024 microbatches, interleaved-1f1b with 2 stages per rank (128
uniform stages): stagecraft.schedule (generate + verify + simulate), then
Schedule.to_csv(comms=True) (the lowering with early receives, verified
under blocking receives, and the CSV text). RUNS runs; the median and the
range of each part and of the total.

    build-python/venv/bin/python bench/csv-bench.py [RUNS]   (default 5)
"""

import statistics
import sys
import time

import stagecraft as sc

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
p = sc.Problem(ranks=64, microbatches=1024,
               stages=[sc.Stage(forward=1.0, backward_input=1.0,
                                backward_weight=1.0) for _ in range(128)])
parts = {"schedule": [], "to_csv(comms=True)": [], "total": []}
for _ in range(runs):
    t0 = time.perf_counter()
    s = sc.schedule(p, kind="interleaved-1f1b", chunks=2)
    t1 = time.perf_counter()
    csv = s.to_csv(comms=True)
    t2 = time.perf_counter()
    parts["schedule"].append(t1 - t0)
    parts["to_csv(comms=True)"].append(t2 - t1)
    parts["total"].append(t2 - t0)
print(f"64 ranks x 1024 microbatches x 2 chunks, {runs} runs, "
      f"{len(csv) / 1e6:.1f} MB of CSV")
print("| part | median s | range s |")
print("|---|---|---|")
for name, values in parts.items():
    print(f"| {name} | {statistics.median(values):.3f} | "
          f"{min(values):.3f}..{max(values):.3f} |")
