#!/usr/bin/env python3
"""Does the simulator predict a step of torch's runtime? Each Stagecraft
kind's plan (uniform costs) runs on torch's runtime through
stagecraft.torch on 2 gloo processes (one per core, one thread each), the
small transformer of python/tests/torch_worker.py (one block per stage),
8 microbatches. After 10 warm-up steps (and the trial of
lowering="auto" and transport="auto", whose choice the last column
gives), STEPS rounds: a traced step (its own trace), then a
measured step (untraced; from the first rank's step() call to the last
rank's return, as a trace times a step, the batch made before it) and a
control step (untraced, timed the same way), those two swapped so that
each follows the traced step and the other equally often, and runs as an
even and as an odd step of the runner equally often; all see the machine
in the same state. Measured / control is the A/A of the measurement, the
noise a ratio to the measured step carries. A series of steps counts as
its trimmed mean (the middle 80 %): a launch's steps may fall into two
modes some 15 % apart (GPipe's here), where the median of such a series
lands in either (the last column: the measured steps' median over their
trimmed mean). The plan's makespan is simulated on the costs
`sct.profile` measures, on the costs `sct.calibrate` fits to the traced
steps without its stretch (the parts alone), and with it (the default:
the median traced step); each against the measured step. Then the
measured step over the traced ones (their trimmed mean: what tracing
itself costs) and the same untraced steps timed barrier to barrier (the
barrier after each step included) over the measured step.
RUNS launches per kind; the table gives the median and range of the
launches' ratios. After it, every launch whose calibrated ratio falls
outside 1 +- 0.07: its step times (measured, control, traced, simulated)
and its last traced step's report against the calibrated simulation.

    build-python/venv/bin/python bench/torch-calibrate-bench.py [RUNS] [KIND,...] [STEPS]

(STEPS: 60 by default.)
"""

import statistics
import sys

from torch_launch import launch

KINDS = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
         "dualpipev"]
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
kinds = sys.argv[2].split(",") if len(sys.argv) > 2 else KINDS
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 60


def cell(values, digits=3):
    return (f"{statistics.median(values):.{digits}f} "
            f"({min(values):.{digits}f}..{max(values):.{digits}f})")


def kept(results):
    """What the runners ran, launches each: the lowering, "+quiet" where
    gloo's transport ran quiet (`schedule`'s trial)."""
    names = [r["kept"] for r in results]
    return ", ".join(f"{n} {names.count(n)}" for n in sorted(set(names)))


print("| kind | measured step ms | measured / simulated, profiled costs | "
      "measured / simulated, calibrated parts (no stretch) | "
      "measured / simulated, calibrated | the stretch | measured / traced "
      "step | barrier to barrier / measured | A/A: measured / control | "
      "measured: median / trimmed mean | kept (launches) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
misses = []
for kind in kinds:
    results = [launch("calibration", kind, steps=steps) for _ in range(runs)]
    ratio = lambda key: cell([r["measured"] / r[key] for r in results])
    print(f"| {kind} | {cell([r['measured'] for r in results], 2)} | "
          f"{ratio('profiled')} | {ratio('parts')} | {ratio('calibrated')} | "
          f"{cell([r['stretch'] for r in results])} | "
          f"{ratio('traced')} | "
          f"{cell([r['barrier_to_barrier'] / r['measured'] for r in results])}"
          f" | {ratio('control')} | "
          f"{cell([r['measured_median'] / r['measured'] for r in results])} | "
          f"{kept(results)} |", flush=True)
    misses += [(kind, k, r) for k, r in enumerate(results)
               if abs(r["measured"] / r["calibrated"] - 1) > 0.07]

# A launch outside 1 +- 0.07 after calibration: where its step went. The
# calibrated simulation reproduces the traced steps (calibrated / traced);
# the untraced steps measured (measured / traced) and their control
# (control / traced) say whether the untraced steps ran as the traced ones.
for kind, k, r in misses:
    print(f"\n{kind}, launch {k + 1}: measured / simulated, calibrated "
          f"{r['measured'] / r['calibrated']:.3f}; step ms: measured "
          f"{r['measured']:.2f}, control {r['control']:.2f}, traced "
          f"{r['traced']:.2f}, simulated (calibrated) "
          f"{r['calibrated']:.2f}; calibrated / traced "
          f"{r['calibrated'] / r['traced']:.3f}, measured / traced "
          f"{r['measured'] / r['traced']:.3f}, control / traced "
          f"{r['control'] / r['traced']:.3f}. Its last traced step "
          f"against the calibrated simulation:\n\n```\n{r['report']}\n```")
