#!/usr/bin/env python3
"""Does the simulator predict the measured step? stagecraft-run --train on
2 MPI ranks (one process per core, one thread each), the reference
transformer (4 stages of 2 layers, hidden 128, sequence 64, batch 2, 8
microbatches), 8 steps a run. For each kind: measured / simulated (the
median of steps 1..7 against the simulated makespan) with the
costs --profile measured (each stage alone, sequentially), then with the
costs --calibrate fitted from the run just before (the run's own
computes, link latency and overhead per compute; dualpipev, whose
overlapped F&B --calibrate cannot take apart, from zb-v's latest run on the
same V placement). RUNS pairs of runs of each kind: a run with the profiled
costs, calibrated from, then a run with the calibrated costs; the median
and the range of each.

    python3 bench/calibrate-bench.py [BUILD_DIR] [RUNS]    (default: build 3)
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
run = os.path.join(build, "bin", "stagecraft-run")
if not os.access(run, os.X_OK):
    sys.exit(f"error: {run} not found; build first")

MODEL = ["--hidden=128", "--heads=4", "--seq=64", "--batch=2"]
CALIBRATE_FROM = {"dualpipev": "zb-v"}
# The median step after the first (which carries one-time work: buffers,
# first touches) against the simulated makespan (a barrier between steps).
STEADY = re.compile(r"median step ([0-9.]+) ms over steps .*makespan "
                    r"([0-9.]+) ms")


def ratio(output):
    median, makespan = STEADY.search(output).groups()
    return float(median) / float(makespan)


def mpirun(args):
    return subprocess.run(
        ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
         "--bind-to", "core", "-x", "OPENBLAS_NUM_THREADS=1", run] + args,
        check=True, capture_output=True, text=True).stdout


def cell(values):
    return (f"{statistics.median(values):.3f} "
            f"({min(values):.3f}..{max(values):.3f})")


with tempfile.TemporaryDirectory() as work:
    spec = os.path.join(work, "spec.mlir")
    with open(spec, "w") as f:
        f.write("pipe.pipeline @cpu ranks(2) microbatches(8) {\n")
        for s in range(4):
            f.write(f"  pipe.stage @s{s} layers(2) cost(forward = 1.0, "
                    "backward_input = 1.0, backward_weight = 1.0)\n")
        f.write("}\n")
    profiled = os.path.join(work, "profiled.mlir")
    subprocess.run([run, spec, "--train", f"--profile={profiled}",
                    "--steps=3"] + MODEL, check=True, capture_output=True,
                   env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    print("| kind | measured / simulated, profiled costs | measured / "
          "simulated, calibrated costs |")
    print("|---|---|---|")
    for kind in ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2",
                 "zb-v", "dualpipev", "auto"]:
        # Overlapped F&B cannot be taken apart: calibrate from zb-v's run.
        source = CALIBRATE_FROM.get(kind, kind)
        calibrated = os.path.join(work, f"calibrated-{source}.mlir")
        common = ["--backend=mpi", f"--schedule={kind}", "--train",
                  "--steps=8", "--time-unit=1ms"] + MODEL
        # Each calibrated run right after the run it is calibrated from (a
        # pair per run): this machine's speed drifts over minutes, and the
        # loop a user runs (trace, calibrate, run) is that close in time.
        before, after = [], []
        for r in range(runs):
            extra = [f"--calibrate={calibrated}"] if source == kind else []
            before.append(ratio(mpirun([profiled] + common + extra)))
            after.append(ratio(mpirun([calibrated] + common)))
        print(f"| {kind} | {cell(before)} | {cell(after)} |")
