#!/usr/bin/env python3
"""Is auto, planned from calibrated costs, at least as fast as the fastest
of torch's built-in schedules when measured? 2 gloo processes (one per
core, one thread each), the small transformer of
python/tests/torch_worker.py in 4 one-block stages, MICROBATCHES per step.
auto goes through the whole loop (profile, plan, trace 3 steps,
calibrate, plan again; it may return one of torch's own orders), then its
steps alternate with those of torch's Interleaved1F1B,
InterleavedZeroBubble, ZBVZeroBubble and DualPipeV on the same model, 20
each after a warm-up. RUNS launches; medians (range) of each launch's
median step, beside each plan's simulated makespan and peak activation
memory on the calibrated costs (memory is simulated: the CPU allocator
gives no per-rank peak).

    build-python/venv/bin/python bench/torch-auto-bench.py [RUNS] [MICROBATCHES,...] [blocks|encoder]

MODEL `encoder` puts torch's own nn.TransformerEncoderLayer in each stage
instead of the tests' block (the embedding on the first stage and the
norm and vocabulary head on the last, in both).
"""

import os
import statistics
import sys

from torch_launch import launch

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
counts = [int(m) for m in sys.argv[2].split(",")] if len(sys.argv) > 2 \
    else [4, 8, 16]
if len(sys.argv) > 3:  # blocks (the default) or encoder
    os.environ["STAGECRAFT_TORCH_MODEL"] = sys.argv[3]
print(f"model: {os.environ.get('STAGECRAFT_TORCH_MODEL', 'blocks')}\n")

print("| m | schedule | measured step ms (range) | / fastest torch built-in "
      "| simulated ms, calibrated | simulated peak activation |")
print("|---|---|---|---|---|---|")
for n_mb in counts:
    results = [launch("auto-vs-torch", "auto", 2, n_mb) for _ in range(runs)]
    names = list(results[0]["median"])
    med = {who: [1e3 * r["median"][who] for r in results] for who in names}
    fastest = min((statistics.median(v) for who, v in med.items()
                   if who != "auto"))
    for who in names:
        values = med[who]
        sim = results[0]["simulated"].get(who)
        label = (f"auto ({', '.join(sorted({r['choice'] for r in results}))})"
                 if who == "auto" else f"torch {who}")
        print(f"| {n_mb} | {label} | {statistics.median(values):.2f} "
              f"({min(values):.2f}..{max(values):.2f}) | "
              f"{statistics.median(values) / fastest:.3f} | "
              f"{sim[0]:.2f} | {sim[1]:.3g} |" if sim else
              f"| {n_mb} | {label} | {statistics.median(values):.2f} "
              f"({min(values):.2f}..{max(values):.2f}) | "
              f"{statistics.median(values) / fastest:.3f} | - | - |",
              flush=True)
