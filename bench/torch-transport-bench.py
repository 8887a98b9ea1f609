#!/usr/bin/env python3
"""What does gloo's transport thread cost a step, and what does the quiet
transport give back? Per kind, one Stagecraft plan (uniform costs) on 2
gloo processes pinned one per core (one thread each), the small
transformer of python/tests/torch_worker.py: torch's own class of the kind
(`builtin`), the plan with early receives (`early`) and with torch's
lowering (`torch`) on the multi-stage runtime, each once with gloo's
transport threads as torch leaves them and once quiet (`+quiet`: at
SCHED_IDLE for the step, `stagecraft.torch.schedule(transport="quiet")`;
for the builtin, its step() wrapped the same way); then
`stagecraft.torch.schedule` with its defaults (`auto`: its trial of
lowering x transport run out first). All alternate step by step, STEPS
each after a warm-up step, each step alone (barrier to barrier), and then
run 4 blocks of 5 steps back to back each. Per runner: its median step
over the builtin's, paired within each launch, each step alone and back
to back; the CPU ms per step of the gloo transport threads (both ranks'
median); and what auto kept. RUNS launches per kind; the table gives the
median and range over launches.

    build-python/venv/bin/python bench/torch-transport-bench.py [RUNS] [KINDS] [MICROBATCHES] [STEPS]

e.g. `... 3 1f1b,gpipe,interleaved-1f1b,zb-v,dualpipev 8 30` (the
defaults).
"""

import statistics
import sys

from torch_launch import launch

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
kinds = sys.argv[2].split(",") if len(sys.argv) > 2 else \
    ["1f1b", "gpipe", "interleaved-1f1b", "zb-v", "dualpipev"]
n_mb = int(sys.argv[3]) if len(sys.argv) > 3 else 8
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 30
RUNNERS = ["early", "early+quiet", "torch", "torch+quiet", "builtin+quiet",
           "auto"]


def cell(values):
    return (f"{statistics.median(values):.3f} "
            f"({min(values):.2f}..{max(values):.2f})")


print(f"m = {n_mb}, {steps} steps per runner and launch, {runs} launches "
      "per kind\n")
print("| kind | builtin ms | " + " | ".join(f"{w} / builtin" for w in RUNNERS)
      + " | back to back: " + " | ".join(f"{w} / builtin" for w in RUNNERS)
      + " | transport CPU ms per step: builtin, " + ", ".join(RUNNERS)
      + " | auto kept |")
print("|---|---|" + "---|" * (2 * len(RUNNERS) + 2))
for kind in kinds:
    results = [launch("transport", kind, n_mb=n_mb, steps=steps)
               for _ in range(runs)]

    def ratios(key, who):
        return cell([r[key][who] / r[key]["builtin"] for r in results])
    cpu = ", ".join(f"{statistics.median(r['cpu'][w] for r in results):.2f}"
                    for w in ["builtin"] + RUNNERS)
    kept = [r["kept"] for r in results]
    print(f"| {kind} | "
          f"{statistics.median(1e3 * r['median']['builtin'] for r in results):.2f}"
          " | " + " | ".join(ratios("median", w) for w in RUNNERS) + " | "
          + " | ".join(ratios("blocks", w) for w in RUNNERS) + f" | {cpu} | "
          + ", ".join(f"{k} {kept.count(k)}" for k in sorted(set(kept)))
          + " |", flush=True)
