"""The stagecraft package in a few lines: schedule, inspect, export, verify.

    build-python/venv/bin/python examples/schedule.py
"""

import stagecraft as sc

# Eight stages on four ranks (two per rank: the V kinds need that), eight
# microbatches, the weight gradient half as long as the input gradient.
p = sc.Problem(ranks=4, microbatches=8,
               stages=[sc.Stage(forward=1.0, backward_input=1.0, backward_weight=0.5,
                                activation=1.0, weight_grad=0.5) for _ in range(8)])
for kind in ["1f1b", "zb-h1", "zb-v", "auto"]:
    s = sc.schedule(p, kind=kind, time_limit=1.0)
    print(f"{kind:6} makespan {s.makespan:5.1f}  bubble {s.bubble_ratio:.3f}  "
          f"peak memory {max(s.peak_memory):.1f}  placement {s.placement}")

s = sc.schedule(p, kind="zb-v")
print("rank 0 runs", " ".join(s.actions(0)[:8]), "...")
# torch's CSV, with the communication Stagecraft lowered and verified; read
# back, it is verified again.
csv = s.to_csv(comms=True)
print(sc.from_csv(p, csv))
# A spec written in the pipe DSL works the same way.
demo = sc.load("examples/demo.mlir")
print(sc.schedule(demo, kind="1f1b").summary().splitlines()[1])
try:
    sc.schedule(demo, kind="zb-v")
except sc.ScheduleError as e:
    print("ScheduleError:", e)
