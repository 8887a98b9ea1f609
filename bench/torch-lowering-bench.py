#!/usr/bin/env python3
"""Who should lower a Stagecraft plan for torch's runtime, and how does it
compare with torch's own schedule of the kind? The same plan (uniform
costs) run by stagecraft.torch.schedule with lowering="torch" (torch's own
passes over the compute-only order; GPipe's and 1F1B's orders on torch's
single-stage classes), lowering="early" (torch's lowering with every
receive posted as early as it may be) and lowering="stagecraft" (the
communication Stagecraft verified with the plan), and torch's own class of
the kind where it has one, all alternating step by step, 20 steps each
after a warm-up, on 2 gloo processes (one per core, one thread each), the
small transformer of python/tests/torch_worker.py (one block per stage),
8 microbatches. RUNS launches per kind; each gives a median step, the
table their median and range, and the CPU ms per step of the threads
other than the one that calls step() (gloo's transport thread), the
median over launches and ranks.

    build-python/venv/bin/python bench/torch-lowering-bench.py [RUNS]
"""

import statistics
import sys

from torch_launch import launch

KINDS = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
         "dualpipev"]
HOW = ["torch", "early", "stagecraft", "builtin"]
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def cell(values):
    return (f"{statistics.median(values):.2f} "
            f"({min(values):.2f}..{max(values):.2f})")


print("| kind | " + " | ".join(
    f"{h} ms (range)" for h in HOW) + " | early / torch | early / builtin | "
    "transport CPU ms per step: " + ", ".join(HOW) + " |")
print("|---|" + "---|" * (len(HOW) + 3))
for kind in KINDS:
    results = [launch("lowering", kind, all_ranks=True) for _ in range(runs)]
    steps = {h: [r[0][h] for r in results if h in r[0]] for h in HOW}
    cpu = {h: statistics.median(x["others"][h] for r in results for x in r)
           if steps[h] else None for h in HOW}
    med = {h: statistics.median(v) if v else None for h, v in steps.items()}
    print(f"| {kind} | " + " | ".join(
        cell(steps[h]) if steps[h] else "-" for h in HOW)
        + f" | {med['early'] / med['torch']:.3f} | "
        + (f"{med['early'] / med['builtin']:.3f}" if med["builtin"] else "-")
        + " | " + ", ".join(f"{cpu[h]:.2f}" if cpu[h] is not None else "-"
                            for h in HOW) + " |", flush=True)
