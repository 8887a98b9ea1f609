#!/usr/bin/env python3
"""Is auto, planned from calibrated costs, at least as fast as the fastest
of torch's built-in schedules, measured, and at what memory? And is every
Stagecraft kind as fast as its torch namesake?

2 gloo processes (one per core, one thread each), on every configuration
of MODELS x SHAPES x MICROBATCHES:
- MODELS: `blocks` (the tests' transformer block per stage), `encoder`
  (torch's own nn.TransformerEncoderLayer per stage), `uneven` (two of
  the tests' blocks on stages of even index, one on the others); every
  model has the embedding on its first stage and the final norm and
  vocabulary head on its last;
- SHAPES: `v` (4 stages in the V: ZBVZeroBubble, DualPipeV), `loop` (4
  stages in a loop: Interleaved1F1B, InterleavedZeroBubble), `two` (2
  stages: GPipe, 1F1B);
- MICROBATCHES: m per step.

One launch runs python/tests/torch_worker.py's `grid` mode: costs
profiled; auto and every Stagecraft kind that plans on the shape's
placement planned and traced (3 steps each, after 10 warm-up steps)
beside the built-ins; the costs calibrated from all the traces; every
kind planned again, and auto once within the simulated peak memory of
each built-in ("auto within X's memory"); each of those plans (a plan
whose order repeats another's runs once, for both) runs the trial of
`lowering="auto"` out (TRIAL_LENGTH steps: its measured choice between
early receives and torch's lowering, each with gloo's transport shared
or quiet, in brackets after its name; a plan with the order of torch's
Schedule1F1B runs on that class's own step loop, shared or quiet); they
and the built-ins then alternate step by step, STEPS each after a
warm-up step, then in blocks of 5 steps back to back (4 blocks each,
taking turns block by block: as a training loop runs its steps, a rank
starting its next step while the others finish theirs; seconds per step
of a block, their median), and one more step
of each measures its peak activation memory per rank
(`stagecraft.torch.activation_memory`: the bytes autograd saves for
backward). RUNS launches per configuration; a schedule's figure is the
median over launches of each launch's median step, with the range of
those medians. Every ratio is paired: within each launch, a schedule's
median step over the other's (their steps alternated, so both saw the
machine in the same state), and the median over launches of those
ratios, with their range; the A/A control is paired the same way.

    build-python/venv/bin/python bench/torch-auto-bench.py [RUNS] [MODELS] [SHAPES] [MICROBATCHES] [STEPS]

e.g. `... 3 blocks,encoder,uneven v,loop,two 4,8,16 40` (the defaults;
STEPS: measured steps per schedule and launch).
Prints one table per model and a summary of the goals.
"""

import os
import statistics
import sys

from stagecraft.torch import NAMESAKES
from torch_launch import launch

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
models = sys.argv[2].split(",") if len(sys.argv) > 2 else \
    ["blocks", "encoder", "uneven"]
shapes = sys.argv[3].split(",") if len(sys.argv) > 3 else ["v", "loop", "two"]
counts = [int(m) for m in sys.argv[4].split(",")] if len(sys.argv) > 4 \
    else [4, 8, 16]
steps = int(sys.argv[5]) if len(sys.argv) > 5 else 40



def kib(peaks):
    return "/".join(f"{p / 1024:.0f}" for p in peaks)


summary, summary_b = [], []
for model in models:
    os.environ["STAGECRAFT_TORCH_MODEL"] = model
    print(f"\nmodel: {model}\n")
    print("| shape | m | schedule | measured step ms (range) | / fastest "
          "built-in | back to back: / fastest built-in | simulated ms | "
          "measured peak KiB per rank | simulated peak KiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for shape in shapes:
        for n_mb in counts:
            results = []
            for _ in range(runs):
                try:
                    results.append(launch("grid", shape, 2, n_mb,
                                          steps=steps))
                except SystemExit as failed:  # Said, and the others go on.
                    print(f"\n{model} {shape} m={n_mb}: a launch failed: "
                          f"{failed}\n", file=sys.stderr, flush=True)
            if not results:
                continue
            names = [who for who in results[0]["median"]
                     if all(who in r["median"] for r in results)]
            med = {who: [1e3 * r["median"][who] for r in results]
                   for who in names}
            step = {who: statistics.median(v) for who, v in med.items()}
            builtins = [who for who in names if who.startswith("Schedule")
                        and not who.endswith("(again)")]

            def paired(who, base, key="median"):
                """Median and range over launches of who / base."""
                r = [x[key][who] / x[key][base] for x in results]
                return statistics.median(r), min(r), max(r)
            fastest = min(builtins, key=lambda b: paired(b, builtins[0])[0])
            ratio = {who: paired(who, fastest) for who in names}
            # Back to back, the fastest built-in may be another.
            fast_b = min(builtins,
                         key=lambda b: paired(b, builtins[0], "blocks")[0])
            ratio_b = {who: paired(who, fast_b, "blocks") for who in names}
            # The most any rank held, median over launches.
            peak = {who: [statistics.median(r["peaks"][who][k]
                                            for r in results)
                          for k in range(2)] for who in names}
            for who in names:
                sim = results[0]["simulated"].get(who)
                label = who if who.startswith("Schedule") else \
                    f"Stagecraft {who}"
                if who.startswith("auto"):
                    label += (" (" + ", ".join(sorted(
                        {r["choice"][who] or "its own" for r in results}))
                        + ")")
                if who in results[0].get("lowering", {}):
                    # What each launch's trial kept: the lowering, and
                    # "+quiet" where gloo's transport ran quiet.
                    label += (" [" + ", ".join(sorted(
                        {r["lowering"][who] for r in results})) + "]")
                print(f"| {shape} | {n_mb} | {label} | {step[who]:.2f} "
                      f"({min(med[who]):.2f}..{max(med[who]):.2f}) | "
                      f"{ratio[who][0]:.3f} ({ratio[who][1]:.2f}.."
                      f"{ratio[who][2]:.2f}) | "
                      f"{ratio_b[who][0]:.3f} ({ratio_b[who][1]:.2f}.."
                      f"{ratio_b[who][2]:.2f}) | "
                      + (f"{sim[0]:.2f} | {kib(peak[who])} | "
                         f"{sim[1] * 1024:.0f} |" if sim else
                         f"- | {kib(peak[who])} | - |"), flush=True)
            def namesakes(key="median"):
                """Each Stagecraft kind / its torch namesake, paired."""
                return {k: paired(k, t, key)[0] for k, t in NAMESAKES.items()
                        if k in step and t in step}
            auto = f"auto within {fastest}'s memory"
            control = ratio[f"{fastest} (again)"][0]
            summary.append((model, shape, n_mb, fastest, ratio[auto][0],
                            max(peak[auto]),
                            max(peak[fastest]), namesakes(), control))
            auto_b = f"auto within {fast_b}'s memory"
            summary_b.append((model, shape, n_mb, fast_b,
                              ratio_b[auto_b][0],
                              ratio_b[f"{fast_b} (again)"][0],
                              namesakes("blocks")))

print("\nsummary: auto (planned within the simulated peak memory of the "
      "built-in that measured fastest) against that built-in (peaks: the "
      "most any rank held, measured), and each Stagecraft kind against its "
      "torch namesake\n")
print("| model | shape | m | fastest built-in | auto / fastest | auto peak / "
      "its peak | A/A: fastest again / fastest | Stagecraft kind / torch "
      "namesake |")
print("|---|---|---|---|---|---|---|---|")
for model, shape, n_mb, fastest, auto, p_auto, p_fast, names, control \
        in summary:
    print(f"| {model} | {shape} | {n_mb} | {fastest} | {auto:.3f} "
          f"| {p_auto / p_fast:.3f} | {control:.3f} | "
          + ", ".join(f"{k} {v:.3f}" for k, v in names.items()) + " |")
# Each row's auto is already a ratio to its fastest built-in.
wins = sum(row[4] <= 0.97 for row in summary)
ties = sum(row[4] <= 1.0 for row in summary)
spread = [abs(row[8] - 1) for row in summary]
print(f"\nA/A control: the same built-in measured twice differs by "
      f"{statistics.median(spread):.3f} (median), at most {max(spread):.3f}")
print(f"\nauto at or below the fastest built-in on {ties} of {len(summary)} "
      f"configurations, at least 3 % faster on {wins}")
kinds = [v for row in summary for v in row[7].values()]
print(f"\nStagecraft kind / torch namesake at most 1.02 on "
      f"{sum(v <= 1.02 for v in kinds)} of {len(kinds)} (kind, configuration) "
      f"pairs")

print("\nback to back (blocks of 5 steps, as a training loop runs them): auto "
      "within the memory of the built-in fastest back to back, against it; "
      "each kind against its namesake\n")
print("| model | shape | m | fastest built-in | auto / fastest | A/A | "
      "Stagecraft kind / torch namesake |")
print("|---|---|---|---|---|---|---|")
for model, shape, n_mb, fastest, auto, control, names in summary_b:
    print(f"| {model} | {shape} | {n_mb} | {fastest} | {auto:.3f} | "
          f"{control:.3f} | "
          + ", ".join(f"{k} {v:.3f}" for k, v in names.items()) + " |")
spread = [abs(row[5] - 1) for row in summary_b]
print(f"\nback to back: A/A control {statistics.median(spread):.3f} "
      f"(median), at most {max(spread):.3f}; auto at or below the fastest "
      f"built-in on {sum(row[4] <= 1.0 for row in summary_b)} of "
      f"{len(summary_b)}, at least 3 % faster on "
      f"{sum(row[4] <= 0.97 for row in summary_b)}; kind / namesake at most "
      f"1.02 on {sum(v <= 1.02 for row in summary_b for v in row[6].values())}"
      f" of {sum(len(row[6]) for row in summary_b)}")
