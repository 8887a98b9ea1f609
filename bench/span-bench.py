#!/usr/bin/env python3
"""The span objective against the makespan objective, by memory limit.

For the quality benchmarks' profiles (bench/HalfStageModel.h: 2p half
stages; uniform, and the Zero Bubble paper's measured F : B : W with its
latency, with and without heavy end stages) and p, m in (4, 8), (8, 16),
(8, 32): `auto` under a memory limit of 1x, 1.5x, 2x and 3x 1F1B's highest
peak, once minimizing the makespan and once the largest per-rank span.
Prints the largest per-rank span of each (the steady-state step when steps
overlap), its makespan, and the span over the span bound (each rank's own
work, the least over auto's placements: 1.000 means no rank on the best
placement idles between its first action and its last). Run with the
package installed:

    build-python/venv/bin/python bench/span-bench.py [TIME_LIMIT_S]
"""

import sys

import stagecraft as sc

PROFILES = [  # name, F, B (input), W, latency, first and last stage scale
    ("uniform", 1.0, 1.0, 1.0, 0.0, 1.0, 1.0),
    ("zb-paper", 1.0, 0.9765, 0.5041, 0.0324, 1.0, 1.0),
    ("hetero", 1.0, 0.9765, 0.5041, 0.0324, 1.3, 1.6),
]
SHAPES = [(4, 8), (8, 16), (8, 32)]
FACTORS = [1.0, 1.5, 2.0, 3.0]


def problem(profile, p, m):
    _, f, i, w, latency, first, last = profile
    stages = []
    for s in range(2 * p):
        scale = first if s == 0 else last if s == 2 * p - 1 else 1.0
        stages.append(sc.Stage(forward=0.5 * f * scale,
                               backward_input=0.5 * i * scale,
                               backward_weight=0.5 * w * scale,
                               activation=0.5, weight_grad=0.25))
    return sc.Problem(ranks=p, microbatches=m, stages=stages, latency=latency,
                      name="bench")


def main():
    time_limit = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    print(f"largest per-rank span (makespan) per objective; auto with "
          f"time-limit={time_limit:g}s")
    print()
    print("| profile | p, m | memory / 1F1B | span bound | makespan "
          "objective: span (makespan) | span / bound | span objective: span "
          "(makespan) | span / bound |")
    print("|---|---|---|---|---|---|---|---|")
    for profile in PROFILES:
        for p, m in SHAPES:
            prob = problem(profile, p, m)
            peak = max(sc.schedule(prob, kind="1f1b").peak_memory)
            for factor in FACTORS:
                limit = factor * peak
                a = sc.schedule(prob, kind="auto", memory_limit=limit,
                                time_limit=time_limit)
                b = sc.schedule(prob, kind="auto", memory_limit=limit,
                                time_limit=time_limit, objective="span")
                bound = b.span_bound
                print(f"| {profile[0]} | {p}, {m} | {factor:g} | "
                      f"{bound:.2f} | {max(a.span):.2f} ({a.makespan:.2f}) | "
                      f"{max(a.span) / bound:.3f} | {max(b.span):.2f} "
                      f"({b.makespan:.2f}) | {max(b.span) / bound:.3f} |",
                      flush=True)


if __name__ == "__main__":
    main()
