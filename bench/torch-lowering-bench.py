#!/usr/bin/env python3
"""Who should lower a Stagecraft plan for torch's runtime, and how does it
compare with torch's own schedule of the kind? The same plan (uniform
costs) run by stagecraft.torch.schedule with lowering="torch" (torch's own
passes over the compute-only order; GPipe's and 1F1B's orders on torch's
single-stage classes; for those two, "multi" is torch's lowering of the
same order on the multi-stage runtime), lowering="early" (torch's lowering
with every receive posted as early as it may be) and lowering="stagecraft"
(the communication Stagecraft verified with the plan), and torch's own
class of the kind where it has one, all alternating step by step, 20 steps
each after a warm-up, on 2 gloo processes (one per core, one thread each),
the small transformer of python/tests/torch_worker.py (one block per
stage), 8 microbatches. RUNS launches per kind; each gives a median step,
the table their median and range; early / torch and early / builtin are
the ratios of the two medians of one launch (the steps alternate, so the
pair saw the same machine), their median over launches and range; last,
the CPU ms per step of the threads other than the one that calls step()
(gloo's transport thread), the median over launches and ranks.

    build-python/venv/bin/python bench/torch-lowering-bench.py [RUNS]
"""

import statistics
import sys

from torch_launch import launch

KINDS = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
         "dualpipev"]
HOW = ["torch", "multi", "early", "stagecraft", "builtin"]
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3


def cell(values, digits=2):
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}..{max(values):.{digits}f})")


def ratios(results, num, den):
    """NUM's median step over DEN's, launch by launch."""
    pairs = [r[0][num] / r[0][den] for r in results
             if num in r[0] and den in r[0]]
    return cell(pairs, 3) if pairs else "-"


print("| kind | " + " | ".join(
    f"{h} ms (range)" for h in HOW) + " | early / torch | early / builtin | "
    "early / multi | transport CPU ms per step: " + ", ".join(HOW) + " |")
print("|---|" + "---|" * (len(HOW) + 4))
for kind in KINDS:
    results = [launch("lowering", kind, all_ranks=True) for _ in range(runs)]
    steps = {h: [r[0][h] for r in results if h in r[0]] for h in HOW}
    cpu = {h: statistics.median(x["others"][h] for r in results for x in r)
           if steps[h] else None for h in HOW}
    print(f"| {kind} | " + " | ".join(
        cell(steps[h]) if steps[h] else "-" for h in HOW)
        + f" | {ratios(results, 'early', 'torch')}"
        + f" | {ratios(results, 'early', 'builtin')}"
        + f" | {ratios(results, 'early', 'multi')} | "
        + ", ".join(f"{cpu[h]:.2f}" if cpu[h] is not None else "-"
                    for h in HOW) + " |", flush=True)
