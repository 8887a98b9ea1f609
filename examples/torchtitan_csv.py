"""A Stagecraft plan as torchtitan's pipeline_parallel_schedule_csv.

torchtitan builds a CSV schedule's stages in a loop (stage s on rank
s mod degree), or in a V when its pipeline_parallel_schedule names a V class
(ZBVZeroBubble, DualPipeV), and lowers the compute-only CSV with torch's own
passes. So the plan's stages are pinned to that placement and auto searches
the orders on it.

    python examples/torchtitan_csv.py DEGREE STAGES_PER_RANK OUT.csv [v]
"""

import sys

import stagecraft as sc

degree, per_rank, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
v_shape = len(sys.argv) > 4 and sys.argv[4] == "v"
num_stages = degree * per_rank
if v_shape and per_rank != 2:
    sys.exit("a V places exactly 2 stages per rank")


def rank_of(s):
    if v_shape:
        return s if s < degree else 2 * degree - 1 - s
    return s % degree


# Costs: uniform here; profile the stages (stagecraft.torch.profile) for a
# real model. The embedding and the head make the end stages heavier.
stages = [sc.Stage(name=f"s{s}", rank=rank_of(s),
                   forward=1.3 if s in (0, num_stages - 1) else 1.0)
          for s in range(num_stages)]
problem = sc.Problem(ranks=degree, microbatches=2 * num_stages, stages=stages)
plan = sc.schedule(problem, kind="auto", time_limit=2.0)
with open(out, "w") as f:
    f.write(plan.to_csv())
print(f"{plan.kind} on {degree} ranks, {num_stages} stages, "
      f"placement {plan.placement}: makespan {plan.makespan:.2f}, bubble "
      f"{plan.bubble_ratio:.3f}; compute-only CSV written to {out}")
