#!/usr/bin/env python3
"""Does lowering="auto"'s measured trial keep the faster lowering, and
what do the profiler scopes of torch's runtime cost? Per kind and
microbatch count, one Stagecraft plan (uniform costs) runs as five
runners on 2 gloo processes (one per core, one thread each), the small
transformer of python/tests/torch_worker.py: torch's own class of the
kind (`builtin`), the plan with lowering="auto" (`auto`: it first runs
its trial out, TRIAL_LENGTH steps), the plan with lowering="torch" and
with lowering="early" fixed, and once more with lowering="torch" keeping
the profiler scopes torch's runtime opens around every action (which
Stagecraft's runner skips while no profiler runs); then all five
alternate step by step, STEPS each after a warm-up step, each step alone
(barrier to barrier); then the same five run blocks of 10 steps back to
back, as a training loop runs them (a rank starts its next step while
the others finish theirs), taking turns block by block, 6 blocks each:
seconds per step, the median of the blocks. RUNS launches; per launch,
each runner's median step over the builtin's (the steps alternated, so
the five saw the same machine). The table: which lowering auto kept
(launches each), the ratios' median and range over launches, auto
against the faster of the two fixed runners of its launch, torch's
lowering without the idle scopes against the same with them; then, back
to back, auto over the builtin, torch's lowering over early receives,
auto against the faster fixed runner, and in how many launches auto kept
the lowering whose fixed runner ran faster back to back.

    build-python/venv/bin/python bench/torch-trial-bench.py [RUNS] [KINDS] [MICROBATCHES] [STEPS]

e.g. `... 6 gpipe,interleaved-1f1b,zb-v,dualpipev 4,8 40` (the defaults).
"""

import statistics
import sys

from torch_launch import launch

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 6
kinds = sys.argv[2].split(",") if len(sys.argv) > 2 else \
    ["gpipe", "interleaved-1f1b", "zb-v", "dualpipev"]
counts = [int(m) for m in sys.argv[3].split(",")] if len(sys.argv) > 3 \
    else [4, 8]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 40


def cell(values):
    return (f"{statistics.median(values):.3f} "
            f"({min(values):.3f}..{max(values):.3f})")


print("| kind | m | auto kept | auto / builtin | torch / builtin | "
      "early / builtin | auto / faster fixed runner | torch, scopes skipped "
      "/ kept | back to back: auto / builtin | back to back: torch / early | "
      "back to back: auto / faster fixed runner | back to back: kept the "
      "faster |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for kind in kinds:
    for n_mb in counts:
        results = [launch("trial-bench", kind, n_mb=n_mb, steps=steps)
                   for _ in range(runs)]
        ratio = {who: [r["median"][who] / r["median"]["builtin"]
                       for r in results] for who in ("auto", "torch", "early")}
        best = [r["median"]["auto"] / min(r["median"]["torch"],
                                          r["median"]["early"])
                for r in results]
        kept = [r["kept"] for r in results]
        scopes = [r["median"]["torch"] / r["median"]["scoped"]
                  for r in results]
        blocks = [r["blocks"] for r in results]
        faster = sum(r["kept"] == min(("torch", "early"),
                                      key=r["blocks"].get) for r in results)
        print(f"| {kind} | {n_mb} | " + ", ".join(
            f"{k} {kept.count(k)}" for k in sorted(set(kept)))
            + f" | {cell(ratio['auto'])} | {cell(ratio['torch'])} | "
            f"{cell(ratio['early'])} | {cell(best)} | {cell(scopes)} | "
            f"{cell([b['auto'] / b['builtin'] for b in blocks])} | "
            f"{cell([b['torch'] / b['early'] for b in blocks])} | "
            f"{cell([b['auto'] / min(b['torch'], b['early']) for b in blocks])}"
            f" | {faster} of {len(results)} |",
            flush=True)
