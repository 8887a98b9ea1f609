#!/usr/bin/env python3
"""Does the simulator predict a step of torch's runtime? Each Stagecraft
kind's plan (uniform costs) runs on torch's runtime through
stagecraft.torch on 2 gloo processes (one per core, one thread each), the
small transformer of python/tests/torch_worker.py (one block per stage),
8 microbatches. Its makespan is simulated on the costs `sct.profile`
measures, and on the costs `sct.calibrate` fits to 5 traced steps (after
10 warm-up steps); both against the median of 20 further steps, barrier to
barrier, and against the traced steps' time from the first compute to the
last (what the makespan models; the rest is step()'s own work before and
after). RUNS launches per kind; the table gives the median and range of
the launches' ratios.

    build-python/venv/bin/python bench/torch-calibrate-bench.py [RUNS] [KIND,...]
"""

import statistics
import sys

from torch_launch import launch

KINDS = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
         "dualpipev"]
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
kinds = sys.argv[2].split(",") if len(sys.argv) > 2 else KINDS


def cell(values, digits=3):
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}..{max(values):.{digits}f})")


print("| kind | measured step ms | measured / simulated, profiled costs | "
      "measured / simulated, calibrated costs | the same, overhead spread "
      "evenly over the rank's computes | traced first-to-last compute / "
      "simulated, calibrated |")
print("|---|---|---|---|---|---|")
for kind in kinds:
    results = [launch("calibration", kind) for _ in range(runs)]
    measured = [r["measured"] for r in results]
    print(f"| {kind} | {cell(measured, 2)} | "
          f"{cell([r['measured'] / r['profiled'] for r in results])} | "
          f"{cell([r['measured'] / r['calibrated'] for r in results])} | "
          f"{cell([r['measured'] / r['evenly'] for r in results])} | "
          f"{cell([r['window'] / r['calibrated'] for r in results])} |",
          flush=True)
