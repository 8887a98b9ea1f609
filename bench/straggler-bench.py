#!/usr/bin/env python3
"""Straggler benchmark: the reference transformer as 8 equal layers on 2
ranks (1f1b, 8 microbatches, hidden 128, sequence 64, AdamW, 16 steps, a
checkpoint every 4), rank 1 made FACTOR times slower from step 0 with
--inject-slowdown (as a slower device would be), on each backend:

- no straggler: the 4 + 4 cut at full speed (measured step time);
- left alone: the straggler on the 4 + 4 cut for every step (what a run
  without straggler handling gets);
- --elastic --straggler-threshold=1.5 --straggler-steps=2: the rank is
  judged at each checkpoint (an attempt's first step is a warm-up and not
  judged), the run stops at the checkpoint of step 4, the spec is
  re-planned with the measured speed (--speed-factors) and resumed;
  figures: the measured speed, the re-plan time, the cut before and
  after, and the step time before (attempt 1) and after (attempt 2);
- simulated: the simulator's step time for the 4 + 4 cut with rank 1 at
  the measured speed (a stage spec of that cut with --speed-factors) and
  for the re-planned cut, in cost units (1 unit = one layer's F, I or W);
  the after/before ratios are compared.

Usage: bench/straggler-bench.py [BUILD_DIR] [FACTOR]   (defaults: build, 3)
BACKENDS="local mpi" (default) picks the backends.
"""
import os
import re
import subprocess
import sys
import tempfile

build = sys.argv[1] if len(sys.argv) > 1 else "build"
factor = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
run = os.path.join(build, "bin", "stagecraft-run")
if not os.access(run, os.X_OK):
    sys.exit(f"error: {run} not found; build first")
MPIRUN = "mpirun --allow-run-as-root --oversubscribe -np {ranks}"
MODEL = ["--train", "--hidden=128", "--seq=64", "--optimizer=adamw",
         "--lr=0.01"]
STEPS, EVERY = 16, 4
work = tempfile.mkdtemp()
LAYERS = "cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)"
spec = os.path.join(work, "layers.mlir")
with open(spec, "w") as f:
    f.write("pipe.pipeline @train ranks(2) microbatches(8) {\n"
            f"  pipe.layer @block count(8) {LAYERS}\n}}\n")


def stage_spec(cut):
    """The same model as a stage spec with the given layers per rank."""
    path = os.path.join(work, "cut-" + "-".join(map(str, cut)) + ".mlir")
    with open(path, "w") as f:
        f.write("pipe.pipeline @train ranks(2) microbatches(8) {\n")
        for s, n in enumerate(cut):
            f.write(f"  pipe.stage @s{s} layers({n}) cost(forward = {n}.0, "
                    f"backward_input = {n}.0, backward_weight = {n}.0)\n")
        f.write("}\n")
    return path


def sh(args, ok=(0,)):
    done = subprocess.run(args, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    if done.returncode not in ok:
        sys.exit(f"error: {' '.join(args)} failed ({done.returncode}):\n"
                 f"{done.stdout}")
    return done.stdout


def find_all(pattern, text, what):
    found = re.findall(pattern, text, re.M)
    if not found:
        sys.exit(f"error: no {what} in:\n{text}")
    return found


def step_ms(text):
    return [float(x) for x in find_all(
        r"^per step \(mean of \d+\): measured ([0-9.]+) ms", text,
        "step time")]


def simulated(args):
    """The simulated step time (units) of a spec planned as args say."""
    out = sh([run] + args + ["--schedule=1f1b", "--time-unit=1ms"])
    return float(find_all(r"simulated ([0-9.]+) ms", out, "simulation")[0])


def launcher(backend):
    return [] if backend == "local" else ["--launcher=" + MPIRUN]


rows = []
for backend in os.environ.get("BACKENDS", "local mpi").split():
    base = [spec, "--schedule=1f1b", f"--steps={STEPS}"] + MODEL
    where = ["--backend=mpi"] if backend == "mpi" else []
    mpi = MPIRUN.format(ranks=2).split() if backend == "mpi" else []
    healthy = step_ms(sh(mpi + [run] + base + where))[0]
    alone = step_ms(sh(mpi + [run] + base + where +
                       [f"--inject-slowdown=1:0:{factor}"]))[0]
    ck = os.path.join(work, f"ck-{backend}")
    out = sh([run, "--elastic"] + base + launcher(backend) + [
        f"--checkpoint-dir={ck}", f"--checkpoint-every={EVERY}",
        "--straggler-threshold=1.5", "--straggler-steps=2",
        f"--inject-slowdown=1:0:{factor}"])
    speed = float(find_all(r"its measured speed is ([0-9.]+) of", out,
                           "measured speed")[0])
    stopped = int(find_all(r"stopped at the checkpoint of step (\d+) to",
                           out, "stop")[0])
    replan = float(find_all(r"with the measured speeds and verified in "
                            r"([0-9.]+) ms", out, "re-plan time")[0])
    before, after = step_ms(out)[:2]
    # The cut the re-plan chose: the stage layers of attempt 2's plan.
    plan = sh([run, spec, "--schedule=1f1b", "--ranks=2",
               f"--speed-factors=1,{speed}", "--time-unit=1ms"])
    busy = [float(x) for x in find_all(r"^\s+\d+\s+[0-9.]+\s+([0-9.]+)",
                                       plan, "busy")]
    # Each layer costs 3 units per microbatch (F, I, W), 8 microbatches.
    cut = [round(busy[0] / 24), round(busy[1] * speed / 24)]
    sim_before = simulated([stage_spec([4, 4]), f"--speed-factors=1,{speed}"])
    sim_after = simulated([spec, "--ranks=2", f"--speed-factors=1,{speed}"])
    sim_healthy = simulated([stage_spec([4, 4])])
    rows.append((backend, healthy, alone, speed, stopped, replan, cut,
                 before, after, sim_healthy, sim_before, sim_after))

print(f"2 ranks, 8 layers, 1f1b, 8 microbatches, {STEPS} steps (checkpoint "
      f"every {EVERY}); rank 1 slowed x{factor:g} from step 0; "
      "--straggler-threshold=1.5 --straggler-steps=2\n")
print("| backend | no straggler ms | left alone ms | measured speed | "
      "stopped at step | re-plan ms | cut after | before ms | after ms | "
      "after/before measured | after/before simulated | after / no "
      "straggler measured | simulated |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for (backend, healthy, alone, speed, stopped, replan, cut, before, after,
     sim_healthy, sim_before, sim_after) in rows:
    print(f"| {backend} | {healthy:.1f} | {alone:.1f} | {speed:.3f} | "
          f"{stopped} | {replan:.1f} | {cut[0]} + {cut[1]} | {before:.1f} | "
          f"{after:.1f} | {after / before:.3f} | {sim_after / sim_before:.3f} "
          f"| {after / healthy:.3f} | {sim_after / sim_healthy:.3f} |")
