#!/usr/bin/env python3
"""Overlapped training steps, measured: stagecraft-run --train on 2 MPI
ranks (one process per core, one thread each), the reference transformer
(8 layers in 2 stages of 4, or for zb-v 4 stages of 2; hidden 128,
sequence 64, batch 2, 8 microbatches) with costs measured by --profile, 20
steps a run. For each kind, the plan
minimizing the span (--objective=span) runs with a barrier between steps
and with --overlap-steps, the two alternating, RUNS times each. Each run
reports its steady-state step (the median step-to-step time over steps
1..19); the table gives the median over runs and the range, against the
simulated makespan and span of the same plan.

    python3 bench/overlap-bench.py [BUILD_DIR] [RUNS]    (default: build 5)
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
run = os.path.join(build, "bin", "stagecraft-run")
if not os.access(run, os.X_OK):
    sys.exit(f"error: {run} not found; build first")

MODEL = ["--hidden=128", "--heads=4", "--seq=64", "--batch=2"]
STEADY = re.compile(r"steady state \(([^;]+); the plan minimizes the (\w+)\): "
                    r"median step ([0-9.]+) ms .*simulated span ([0-9.]+) ms, "
                    r"makespan ([0-9.]+) ms")
LOSS = re.compile(r"^step 19 loss (\S+)$", re.M)


def mpirun(args):
    return subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
         "--bind-to", "core", "-x", "OMP_NUM_THREADS=1",
         "-x", "OPENBLAS_NUM_THREADS=1", run] + args,
        check=True, capture_output=True, text=True).stdout


def profiled_spec(work, stages, layers):
    """A spec of `stages` stages of `layers` layers with --profile's costs."""
    spec = os.path.join(work, f"spec{stages}.mlir")
    with open(spec, "w") as f:
        f.write("pipe.pipeline @cpu ranks(2) microbatches(8) {\n")
        for s in range(stages):
            f.write(f"  pipe.stage @s{s} layers({layers}) cost(forward = 1.0, "
                    "backward_input = 1.0, backward_weight = 1.0)\n")
        f.write("}\n")
    profiled = os.path.join(work, f"profiled{stages}.mlir")
    subprocess.run([run, spec, "--train", f"--profile={profiled}",
                    "--steps=3"] + MODEL, check=True, capture_output=True,
                   env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    return profiled


with tempfile.TemporaryDirectory() as work:
    specs = {2: profiled_spec(work, 2, 4), 4: profiled_spec(work, 4, 2)}
    print("| kind | stages | simulated makespan ms | simulated span ms | barrier step ms "
          "(range) | overlap step ms (range) | overlap / barrier | overlap / "
          "span |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, stages in [("1f1b", 2), ("zb-h1", 2), ("zb-h2", 2),
                         ("zb-v", 4)]:
        profiled = specs[stages]
        steps = {"barrier": [], "overlap": []}
        sims = None
        losses = set()
        for r in range(runs):
            order = ["barrier", "overlap"] if r % 2 == 0 else \
                ["overlap", "barrier"]
            for mode in order:
                out = mpirun(
                    ["--backend=mpi", profiled, f"--schedule={kind}",
                     "--objective=span", "--train",
                     "--steps=20", "--time-unit=1ms", "--timeout=120s"] +
                    MODEL + (["--overlap-steps"] if mode == "overlap" else []))
                m = STEADY.search(out)
                if not m:
                    sys.exit(f"error: no steady-state line in:\n{out}")
                steps[mode].append(float(m.group(3)))
                sims = (float(m.group(5)), float(m.group(4)))
                losses.add(LOSS.search(out).group(1))
        if len(losses) != 1:
            sys.exit(f"error: {kind}: the runs ended with different losses "
                     f"{sorted(losses)}")
        b, o = steps["barrier"], steps["overlap"]
        mb, mo = statistics.median(b), statistics.median(o)
        print(f"| {kind} | {stages} | {sims[0]:.2f} | {sims[1]:.2f} | {mb:.2f} "
              f"({min(b):.2f}..{max(b):.2f}) | {mo:.2f} "
              f"({min(o):.2f}..{max(o):.2f}) | {mo / mb:.3f} | "
              f"{mo / sims[1]:.3f} |")
