#!/usr/bin/env python3
"""Time lost per failure: a replica that leaves against a checkpoint
restart. stagecraft-run --train --data-parallel=2 on local, one rank per
replica (--ranks=1: two threads on two cores, one OpenBLAS thread each),
the reference transformer (4 layers; hidden 64, sequence 32, batch 2, 4
microbatches a replica), 16 steps, a rank killed at the start of step 10.

- clean: no failure.
- replica drop: the failed replica leaves, step 10 runs again on the
  other, which goes on alone (--inject-failure=1:10).
- checkpoint restart: checkpoints every 4 steps; the job ends at the
  failure (its run to step 10, the checkpoint of step 10 removed as the
  crash never wrote it) and a new process resumes from step 8 with both
  replicas (--resume).

Each variant runs RUNS times, the three alternating; a run is timed from
process start to exit (compile, start-up, checkpoint load included). Time
lost per failure: for the restart, its two runs' total minus clean's
(the same replicas do the same steps); for the drop, what the run itself
reports, the step that ran twice against its median step (its total is not
comparable: one replica trains the later steps, which is less work).

    python3 bench/replica-drop-bench.py [BUILD_DIR] [RUNS]   (default: build 5)
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
run = os.path.join(build, "bin", "stagecraft-run")
if not os.access(run, os.X_OK):
    sys.exit(f"error: {run} not found; build first")

STEPS, FAIL, EVERY = 16, 10, 4
BASE = [run, "examples/train.mlir", "--schedule=1f1b", "--ranks=1", "--train",
        "--data-parallel=2", "--hidden=64", "--heads=4", "--seq=32",
        "--batch=2", "--optimizer=adamw", "--lr=0.01"]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")


def timed(args):
    start = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, env=ENV)
    if out.returncode != 0:
        sys.exit(f"error: {' '.join(args)}:\n{out.stderr}")
    return time.monotonic() - start, out.stdout


def clean():
    return timed(BASE + [f"--steps={STEPS}"])[0]


LOST = re.compile(r"ms: ([0-9.-]+) ms lost to the failure")


def drop():
    seconds, out = timed(BASE + [f"--steps={STEPS}",
                                 f"--inject-failure=1:{FAIL}"])
    lost = LOST.search(out)
    assert lost, out
    dropLost.append(float(lost.group(1)) / 1e3)
    return seconds


def restart():
    with tempfile.TemporaryDirectory() as d:
        first, _ = timed(BASE + [f"--steps={FAIL}", f"--checkpoint-dir={d}",
                                 f"--checkpoint-every={EVERY}"])
        # The crash at step FAIL never wrote that step's checkpoint.
        shutil.rmtree(os.path.join(d, "step-%08d" % FAIL), ignore_errors=True)
        second, out = timed(BASE + [f"--steps={STEPS}", f"--checkpoint-dir={d}",
                                    "--resume"])
        assert "before the checkpoint resumed from" in out, out
        return first + second


times = {"clean": [], "replica drop": [], "checkpoint restart": []}
dropLost = []
for _ in range(runs):
    times["clean"].append(clean())
    times["replica drop"].append(drop())
    times["checkpoint restart"].append(restart())
base = statistics.median(times["clean"])
restartLost = [t - base for t in times["checkpoint restart"]]
step = base / STEPS
print(f"{STEPS} steps, a rank killed at step {FAIL}, checkpoints every "
      f"{EVERY}; {runs} runs each, alternating; seconds from process start "
      "to exit")
print(f"{'variant':<20} {'median s':>9} {'range s':>15} {'lost s':>8} "
      f"{'lost range s':>15}")
for name, values, lost in [("clean", times["clean"], None),
                           ("replica drop", times["replica drop"], dropLost),
                           ("checkpoint restart", times["checkpoint restart"],
                            restartLost)]:
    line = (f"{name:<20} {statistics.median(values):>9.3f} "
            f"{min(values):>7.3f}..{max(values):<7.3f}")
    if lost:
        line += (f" {statistics.median(lost):>8.3f} "
                 f"{min(lost):>7.3f}..{max(lost):<7.3f}")
    print(line)
print(f"(clean: {step * 1e3:.1f} ms a step, start-up included)")
