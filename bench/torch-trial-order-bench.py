#!/usr/bin/env python3
"""Does the trial rank the candidates as steps back to back rank them?
For each kind's plan (uniform costs; the small transformer of
python/tests/torch_worker.py on 2 gloo processes, one per core, one
thread each), fixed runners of every candidate `schedule`'s trial tries
(early receives and torch's lowering, each with gloo's transport shared
and quiet) are timed three ways in one launch (torch_worker.py's
`trial_order`): taking turns step by step (each rank's step() call, the
trial's way before TRIAL_BLOCK); in rounds of TRIAL_BLOCK consecutive
steps each with the first of a block uncounted (the trial's way now);
and in blocks of 10 steps back to back between barriers, as a training
loop runs them (what the trial stands for). Per kind and way: in how
many launches the way's fastest candidate is the fastest back to back,
and what the way's choice measured back to back over the fastest.

    build-python/venv/bin/python bench/torch-trial-order-bench.py [RUNS] [KINDS] [MICROBATCHES]

(defaults: 4 gpipe,interleaved-1f1b,zb-v,dualpipev 8)
"""

import statistics
import sys

from torch_launch import launch

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 4
kinds = sys.argv[2].split(",") if len(sys.argv) > 2 else \
    ["gpipe", "interleaved-1f1b", "zb-v", "dualpipev"]
n_mb = int(sys.argv[3]) if len(sys.argv) > 3 else 8
WAYS = ("turns", "blocks")

print(f"m = {n_mb}, {runs} launches per kind\n")
print("| kind | fastest back to back (launches) | step by step: agrees "
      "(launches) | its choice back to back / fastest | blocks: agrees "
      "(launches) | its choice back to back / fastest |")
print("|---|---|---|---|---|---|")
for kind in kinds:
    results = [launch("trial-order", kind, n_mb=n_mb) for _ in range(runs)]
    best = [min(r["back_to_back"], key=r["back_to_back"].get)
            for r in results]
    cells = []
    for way in WAYS:
        picks = [min(r[way], key=r[way].get) for r in results]
        cost = [r["back_to_back"][p] / r["back_to_back"][b]
                for r, p, b in zip(results, picks, best)]
        agree = sum(p == b for p, b in zip(picks, best))
        cells += [f"{agree} of {runs}",
                  f"{statistics.median(cost):.3f} ({max(cost):.3f} worst)"]
    names = ", ".join(f"{n} {best.count(n)}" for n in sorted(set(best)))
    print(f"| {kind} | {names} | " + " | ".join(cells) + " |", flush=True)
