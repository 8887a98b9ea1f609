"""Edits a stagecraft plan for the runtime's failure tests.

  edit-plan.py reuse IN OUT    the first backward on rank 0 reads its stash
                               from the wrong slot (a wrong slot reuse)
  edit-plan.py drop-send IN OUT  rank 0's last send disappears (a hang)
  edit-plan.py version IN OUT  the plan claims version 99
  edit-plan.py placement IN OUT  placement[1] names another rank
  edit-plan.py empty-ops IN OUT  every rank's ops are empty
  edit-plan.py extra-rank IN OUT  a copy of rank 0 appended to ranks[]
  edit-plan.py microbatches IN OUT  one microbatch more than the ops run
  edit-plan.py cost=X IN OUT   rank 0's first compute costs X
  edit-plan.py big-slot IN OUT  rank 0's first slot is 2^40 bytes
  edit-plan.py early-reduce IN OUT  rank 0's first reduction moves to the
                               front, before its stage's gradients
"""
import json
import sys

mode, src, dst = sys.argv[1:4]
with open(src) as f:
    plan = json.load(f)
ops = plan["ranks"][0]["ops"]
if mode == "reuse":
    op = next(o for o in ops if o["op"] == "compute" and o["kind"] in "BI")
    slots = len(plan["ranks"][0]["slots"])
    op["reads"][0][0] = (op["reads"][0][0] + 1) % slots
elif mode == "drop-send":
    # The last send on the channel, alone or in a group: nothing after it can
    # be mistaken for it, so the receiver just waits.
    for i in reversed(range(len(ops))):
        o = ops[i]
        if o["op"] == "send":
            del ops[i]
            break
        if o["op"] == "group" and any(x["op"] == "send" for x in o["ops"]):
            o["ops"] = [x for x in o["ops"] if x["op"] != "send"]
            break
elif mode == "version":
    plan["version"] = 99
elif mode == "placement":
    plan["placement"][1] = (plan["placement"][1] + 1) % len(plan["ranks"])
elif mode == "empty-ops":
    for rank in plan["ranks"]:
        rank["ops"] = []
elif mode == "extra-rank":
    plan["ranks"].append(json.loads(json.dumps(plan["ranks"][0])))
elif mode == "microbatches":
    plan["microbatches"] += 1
elif mode.startswith("cost="):
    op = next(o for o in ops if o["op"] == "compute")
    op["cost"] = float(mode[len("cost="):])
elif mode == "big-slot":
    plan["ranks"][0]["slots"][0] = 2 ** 40
elif mode == "early-reduce":
    at = next(i for i, o in enumerate(ops) if o["op"] == "reduce")
    ops.insert(0, ops.pop(at))
with open(dst, "w") as f:
    json.dump(plan, f)
