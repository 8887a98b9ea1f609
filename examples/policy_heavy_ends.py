"""A schedule of our own for a heavy end stage, tried: a policy whose
parameter lets the ranks warm up deeper and hold more, searched within
1F1B's peak memory, against the kinds of one stage a rank within the same
memory, on 4 ranks with an LM head (last stage x1.6) or an embedding
(first stage x2); beside them the lower bound and the exact search's
optimum over every order of that placement.

    python examples/policy_heavy_ends.py
"""

import stagecraft as sc

OWN = sc.Policy("""policy heavy-ends
param extra 0..3 = 0
warmup min(ranks - rank - 1 + extra, microbatches)
steady F I
rule W
cap ranks + extra
requires chunks == 1
""")


def problem(first, last, microbatches):
    scale = [first, 1.0, 1.0, last]
    return sc.Problem(ranks=4, microbatches=microbatches, latency=0.05,
                      stages=[sc.Stage(forward=k, backward_input=k,
                                       backward_weight=k, activation=1.0,
                                       weight_grad=0.5) for k in scale])


for name, first, last in (("LM head x1.6", 1.0, 1.6),
                          ("embedding x2", 2.0, 1.0)):
    for m in (4, 8):
        p = problem(first, last, m)
        limit = sc.default_memory_limit(p)
        kinds = []
        for kind in ("gpipe", "1f1b", "zb-h1", "zb-h2"):
            s = sc.schedule(p, kind)
            if max(s.peak_memory) <= limit + 1e-9:
                kinds.append((s.makespan, kind))
        best, kind = min(kinds)
        own = sc.search_policy(p, OWN, memory_limit=limit)
        exact = sc.schedule(p, "exact", time_limit=5)
        bound = sc.schedule(p, "auto", time_limit=0.2).lower_bound
        print(f"{name}, m={m}: best kind {kind} {best:g}, "
              f"{own.choice} {own.makespan:g}, bound {bound:g}, "
              f"exact {exact.makespan:g} ({exact.choice.split(' (')[0]})")
