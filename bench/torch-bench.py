#!/usr/bin/env python3
"""Stagecraft schedules on torch's pipeline runtime against torch's own.

    build-python/venv/bin/python bench/torch-bench.py [WORLD] [MICROBATCHES] [RUNS] [KIND,...]

1. Step time of the small transformer of python/tests/torch_worker.py (one
   block per stage: 2 x WORLD stages, WORLD for gpipe and 1f1b), gloo on
   the CPU, WORLD processes pinned one per core (default 2, this machine's
   cores), 16 microbatches: Stagecraft's schedule of each kind and torch's
   built-in schedule of the same kind where torch has one with the same
   placement, their steps alternating (20 each after a warm-up), and `auto`
   planned from costs profiled on this machine; RUNS launches (default 3).
2. Schedule construction at 64 ranks x 1024 microbatches, interleaved
   1F1B with 2 stages per rank: torch's ScheduleInterleaved1F1B constructor
   (which builds every rank's order) against stagecraft.schedule
   (generate, verify, simulate) through Python, and with the CSV of every
   rank's compute and communication actions.
"""

import os
import statistics
import sys
import time

from torch_launch import ROOT, launch

sys.path.insert(0, os.path.join(ROOT, "python", "tests"))


KINDS = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
         "dualpipev", "auto", "auto-profiled"]


def step_table(world, n_mb, runs, kinds=KINDS):
    print(f"Step time, {world} processes (gloo, CPU, one per core), {n_mb} "
          f"microbatches; each launch alternates Stagecraft's and torch's "
          f"steps, 20 each, and gives their medians; {runs} launches, the "
          "median of the medians (range):\n")
    print("| kind | Stagecraft ms | torch built-in ms | Stagecraft / torch |")
    print("|---|---|---|---|")

    def cell(values):
        values = [1e3 * v for v in values]
        return (f"{statistics.median(values):.1f} "
                f"({min(values):.1f}..{max(values):.1f})")

    for kind in kinds:
        results = [launch("bench", kind, world, n_mb) for _ in range(runs)]
        ours = [r["stagecraft"] for r in results]
        theirs = [r["torch"] for r in results if "torch" in r]
        label = "auto (from profile)" if kind == "auto-profiled" else kind
        if not theirs:
            print(f"| {label} | {cell(ours)} | - | - |")
        else:
            ratio = statistics.median(ours) / statistics.median(theirs)
            print(f"| {label} | {cell(ours)} | {cell(theirs)} | "
                  f"{ratio:.3f} |")
        sys.stdout.flush()


def construction():
    import torch
    from torch.distributed.pipelining import schedules as ts

    import stagecraft as sc
    from test_torch import FakeStage

    ranks, n_mb, v = 64, 1024, 2
    stages = [FakeStage(i, ranks * v, 0, ranks) for i in (0, ranks)]
    t0 = time.perf_counter()
    ts.ScheduleInterleaved1F1B(stages, n_mb)
    torch_s = time.perf_counter() - t0
    problem = sc.Problem(ranks=ranks, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(ranks * v)])
    ours, with_csv = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        s = sc.schedule(problem, kind="interleaved-1f1b", chunks=v)
        ours.append(time.perf_counter() - t0)
        s.to_csv(comms=True)
        with_csv.append(time.perf_counter() - t0)
    print(f"\nConstruction, {ranks} ranks x {n_mb} microbatches, "
          f"interleaved-1f1b, {v} stages per rank:\n")
    print("| what | seconds | torch / this |")
    print("|---|---|---|")
    print(f"| torch ScheduleInterleaved1F1B constructor | {torch_s:.2f} | 1 |")
    best = min(ours)
    print(f"| stagecraft.schedule (generate + verify + simulate) | {best:.3f} | "
          f"{torch_s / best:.0f} |")
    best_csv = min(with_csv)
    print(f"| ... and every rank's CSV with comms | {best_csv:.3f} | "
          f"{torch_s / best_csv:.0f} |")


def main():
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    n_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    if len(sys.argv) > 4:  # only these kinds' rows, no construction table
        step_table(world, n_mb, runs, sys.argv[4].split(","))
        return
    step_table(world, n_mb, runs)
    construction()


if __name__ == "__main__":
    main()
