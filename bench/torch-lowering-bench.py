#!/usr/bin/env python3
"""Who should lower a Stagecraft plan for torch's runtime? The same plan
(uniform costs) run by stagecraft.torch.schedule with lowering="stagecraft"
(the communication Stagecraft verified with the plan) and with
lowering="torch" (torch's own passes over the compute-only order), the two
alternating step by step, 20 steps each after a warm-up, on 2 gloo
processes (one per core, one thread each), the small transformer of
python/tests/torch_worker.py (one block per stage), 8 microbatches. RUNS
launches per kind; each gives a median step, the table their median and
range.

    build-python/venv/bin/python bench/torch-lowering-bench.py [RUNS]
"""

import statistics
import sys

from torch_launch import launch
KINDS = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
         "dualpipev"]
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def cell(values):
    return (f"{1e3 * statistics.median(values):.2f} "
            f"({1e3 * min(values):.2f}..{1e3 * max(values):.2f})")


print("| kind | Stagecraft's lowering ms (range) | torch's lowering ms "
      "(range) | torch / Stagecraft |")
print("|---|---|---|---|")
for kind in KINDS:
    ours, theirs = [], []
    for _ in range(runs):
        result = launch("lowering", kind)
        ours.append(result["stagecraft"])
        theirs.append(result["torch"])
    ratio = statistics.median(theirs) / statistics.median(ours)
    print(f"| {kind} | {cell(ours)} | {cell(theirs)} | {ratio:.3f} |")
