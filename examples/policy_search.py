"""A policy's parameter searched: zb-h1-rules (examples/policies) on 4 ranks
and 8 microbatches, every offset instantiated, then sc.search_policy's
choice within 1F1B's peak memory.

    python examples/policy_search.py
"""

import os

import stagecraft as sc

HERE = os.path.dirname(os.path.abspath(__file__))

policy = sc.Policy.from_file(os.path.join(HERE, "policies",
                                          "zb-h1-rules.policy"))
problem = sc.Problem(ranks=4, microbatches=8, stages=[
    sc.Stage(forward=1.0, backward_input=1.0, backward_weight=1.0,
             activation=1.0, weight_grad=0.5) for _ in range(4)])
name, lo, hi, default = policy.params[0]
for value in range(lo, hi + 1):
    plan = sc.schedule(problem, policy=policy, params={name: value})
    print(f"{name}={value}: makespan {plan.makespan:g}, peak memory per "
          f"rank {plan.peak_memory}")
best = sc.search_policy(problem, policy)
print(f"search within {sc.default_memory_limit(problem):g} (1F1B's peak): "
      f"{best.choice}, makespan {best.makespan:g}")
print(f"policy.verify: {policy.verify(ranks=(2, 8), microbatches=(1, 32))}")
