#!/usr/bin/env python3
"""Fault-tolerance benchmark: an 8-rank training run of the reference
transformer (16 one-layer stages, two per rank; 16 microbatches; hidden 64,
sequence 32; 12 steps, a checkpoint every 4) loses a rank at the start of
step 6 and `stagecraft-run --elastic` resumes it on 7 ranks. Per backend
(local: ranks as threads, the attempts as child processes; mpi: each
attempt under mpirun -np P):

- detect: from the injected failure (its time stamp) to every rank of the
  attempt stopped, for a killed rank and a hanging one (--timeout=1s);
- re-plan: compiling and verifying the spec for 7 ranks, against taking the
  precomputed fallback from a plan file (--pipe-to-plan --fallbacks=7);
- reload: loading, checking and restoring the checkpoint on resumption;
- steps lost: steps computed before the failure and computed again (the
  failure step minus the checkpoint's);
- throughput on 8 ranks (a run without a failure) and on 7 (the resumed
  attempt), measured against the simulator's step time for each plan, the
  spec's costs measured first with --profile (milliseconds).

Usage: bench/elastic-bench.py [BUILD_DIR]   (default: build)
BACKENDS="local mpi" (default) picks the backends.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
run = os.path.join(build, "bin", "stagecraft-run")
opt = os.path.join(build, "bin", "stagecraft-opt")
translate = os.path.join(build, "bin", "stagecraft-translate")
for tool in (run, opt, translate):
    if not os.access(tool, os.X_OK):
        sys.exit(f"error: {tool} not found; build first")
MPIRUN = "mpirun --allow-run-as-root --oversubscribe -np {ranks}"
MODEL = ["--train", "--hidden=64", "--seq=32", "--optimizer=adamw",
         "--lr=0.01"]
STEPS, EVERY, FAIL_AT, KIND = 12, 4, 6, "zb-h1"
work = tempfile.mkdtemp()


def sh(args, **kw):
    done = subprocess.run(args, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600,
                          **kw)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(args)} failed:\n{done.stdout}")
    return done.stdout


def find(pattern, text, what):
    m = re.search(pattern, text, re.M)
    if not m:
        sys.exit(f"error: no {what} in:\n{text}")
    return m


spec = os.path.join(work, "spec.mlir")
with open(spec, "w") as f:
    f.write("pipe.pipeline @bench ranks(8) microbatches(16) {\n")
    for s in range(16):
        f.write(f"  pipe.stage @s{s} layers(1) cost(forward = 1.0, "
                "backward_input = 1.0, backward_weight = 1.0)\n")
    f.write("}\n")
profiled = os.path.join(work, "profiled.mlir")
sh([run, spec, *MODEL, "--steps=2", f"--profile={profiled}"])
plan = os.path.join(work, "plan.json")
t0 = time.perf_counter()
scheduled = sh([opt, profiled, f"--pipe-schedule=kind={KIND}"])
with open(os.path.join(work, "scheduled.mlir"), "w") as f:
    f.write(scheduled)
sh([translate, os.path.join(work, "scheduled.mlir"), "--pipe-to-plan",
    "--message-bytes=65536", "--fallbacks=7", "-o", plan])
fallback_write_s = time.perf_counter() - t0
auto_plan = os.path.join(work, "auto-plan.json")
with open(os.path.join(work, "auto.mlir"), "w") as f:
    f.write(sh([opt, profiled, "--pipe-schedule=kind=auto"]))
sh([translate, os.path.join(work, "auto.mlir"), "--pipe-to-plan",
    "--message-bytes=65536", "--fallbacks=1", "-o", auto_plan])


CORES = os.cpu_count() or 1


def per_step(text):
    """Measured and simulated ms per step, and the step time the simulator
    implies on this machine's cores: the makespan, or the busy time of all
    ranks shared by the cores when the ranks outnumber them."""
    m = find(r"^per step \(mean of \d+\): measured ([0-9.]+) ms, simulated "
             r"([0-9.]+) ms", text, "per-step figures")
    busy = sum(float(b) for b in re.findall(
        r"^ +\d+ +[0-9.]+ +([0-9.]+) +[0-9.]+ +\d+ +[0-9.]+$", text, re.M))
    simulated = float(m.group(2))
    return float(m.group(1)), simulated, max(simulated, busy / CORES)


rows, throughput = [], []
for backend in os.environ.get("BACKENDS", "local mpi").split():
    launcher = [f"--launcher={MPIRUN}"] if backend == "mpi" else []
    if backend == "mpi":
        clean = sh(MPIRUN.format(ranks=8).split() +
                   [run, "--backend=mpi", profiled, f"--schedule={KIND}",
                    *MODEL, f"--steps={STEPS}"])
    else:
        clean = sh([run, profiled, f"--schedule={KIND}", *MODEL,
                    f"--steps={STEPS}"])
    before = per_step(clean)
    results = {}
    for source in ("spec", "fallbacks"):
        for mode in ("kill", "hang"):
            ckpt = os.path.join(work, f"{backend}-{source}-{mode}")
            head = ([profiled, f"--schedule={KIND}"] if source == "spec"
                    else [plan])
            out = sh([run, "--elastic", *head, *MODEL, f"--steps={STEPS}",
                      f"--checkpoint-dir={ckpt}",
                      f"--checkpoint-every={EVERY}",
                      f"--inject-failure=3:{FAIL_AT}:{mode}", "--timeout=1s",
                      *launcher])
            detect = float(find(r"every rank stopped ([0-9.]+) s after", out,
                                "detection time").group(1))
            replan = float(find(r"(?:verified|written\)) in ([0-9.]+) ms", out,
                                "re-planning time").group(1))
            resumed = find(r"^resumed at step (\d+): .* in ([0-9.]+) ms", out,
                           "reload time")
            results[source, mode] = (detect, replan, int(resumed.group(1)),
                                     float(resumed.group(2)), per_step(out))
    for mode in ("kill", "hang"):
        detect, replan, at, reload_ms, _ = results["spec", mode]
        rows.append(f"| {backend} | {mode} | {detect:.2f} | {replan:.1f} | "
                    f"{results['fallbacks', mode][1]:.1f} | {reload_ms:.1f} | "
                    f"{FAIL_AT - at} |")
    # auto searches until its time limit: what fallbacks save.
    ckpt = os.path.join(work, f"{backend}-auto")
    out = sh([run, "--elastic", profiled, "--schedule=auto", *MODEL,
              f"--steps={STEPS}", f"--checkpoint-dir={ckpt}",
              f"--checkpoint-every={EVERY}",
              f"--inject-failure=3:{FAIL_AT}", "--timeout=1s", *launcher])
    auto_ms = float(find(r"verified in ([0-9.]+) ms", out,
                         "re-planning time").group(1))
    out = sh([run, "--elastic", auto_plan, *MODEL, f"--steps={STEPS}",
              f"--checkpoint-dir={ckpt}-plan", f"--checkpoint-every={EVERY}",
              f"--inject-failure=3:{FAIL_AT}", "--timeout=1s", *launcher])
    auto_fallback_ms = float(find(r"written\) in ([0-9.]+) ms", out,
                                  "re-planning time").group(1))
    rows.append(f"| {backend} | kill, kind auto | | {auto_ms:.1f} | "
                f"{auto_fallback_ms:.1f} | | |")
    after = results["spec", "kill"][4]
    throughput.append(
        f"| {backend} | {before[0]:.1f} | {before[1]:.1f} | {before[2]:.1f} | "
        f"{after[0]:.1f} | {after[1]:.1f} | {after[2]:.1f} | "
        f"{after[0] / before[0]:.3f} | {after[1] / before[1]:.3f} | "
        f"{after[2] / before[2]:.3f} |")

print(f"{KIND}, 16 stages x 16 microbatches, 8 ranks -> 7 after rank 3 is "
      f"lost at step {FAIL_AT} of {STEPS} (checkpoint every {EVERY}); "
      f"writing the plan with 7 fallbacks took {fallback_write_s:.2f} s\n")
print("| backend | failure | detect s | re-plan ms (compile) | re-plan ms "
      "(fallback) | reload ms | steps lost |")
print("|---|---|---|---|---|---|---|")
print("\n".join(rows))
print("\nStep time (ms) before (8 ranks, no failure) and after (7 ranks, "
      "resumed): measured; simulated from the profiled costs (one core per "
      f"rank); and simulated on this machine's {CORES} cores (the ranks' "
      "simulated busy time shared by the cores, when above the makespan):\n")
print("| backend | 8 ranks measured | simulated | on the cores | 7 ranks "
      "measured | simulated | on the cores | after/before measured | "
      "after/before simulated | after/before on the cores |")
print("|---|---|---|---|---|---|---|---|---|---|")
print("\n".join(throughput))
