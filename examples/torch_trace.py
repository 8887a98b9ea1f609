"""The loop that makes the simulator predict torch's runtime: profile,
plan, trace real steps, calibrate, plan again. Launch one process per rank:

    build-python/venv/bin/torchrun --standalone --nproc-per-node 2 examples/torch_trace.py [KIND] [TRACE.json]

Rank 0 prints the trace's report (per rank and action kind, measured
against simulated) and the plan from the calibrated costs, and writes the
measured step beside the simulated one as a Chrome trace (Perfetto).
"""

import statistics
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage

import stagecraft as sc
import stagecraft.torch as sct

WIDTH, MICROBATCHES, BATCH = 256, 8, 64


def stage_module(index):
    torch.manual_seed(index)  # every rank builds the same weights
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(),
                         nn.Linear(WIDTH, WIDTH))


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "zb-v"
    path = sys.argv[2] if len(sys.argv) > 2 else None
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    num_stages = 2 * world
    uniform = sc.Problem(ranks=world, microbatches=MICROBATCHES,
                         stages=[sc.Stage() for _ in range(num_stages)])
    plan = sct.plan(uniform, kind=kind, group=dist.group.WORLD)
    mine = sct.stage_indices(plan, rank)
    stages = [PipelineStage(stage_module(i), i, num_stages, torch.device("cpu"))
              for i in mine]
    # 1. Profile: each stage through the functions torch's runtime runs.
    x = torch.randn(BATCH, WIDTH)
    problem = sct.profile(stages, lambda i: (x[:BATCH // MICROBATCHES],),
                          n_microbatches=MICROBATCHES)
    # 2. Plan on the profiled costs.
    plan = sct.plan(problem, kind=kind, group=dist.group.WORLD)
    runner = sct.schedule(stages, MICROBATCHES, nn.functional.mse_loss,
                          plan=plan)
    y = torch.sin(x)
    has_last = num_stages - 1 in mine

    def step():
        runner.step(*((x,) if 0 in mine else ()),
                    target=y if has_last else None,
                    losses=[] if has_last else None)

    step()  # warm-up
    # 3. Trace real steps (collective when the block closes).
    with sct.trace(runner) as trace:
        for _ in range(5):
            step()
    # 4. Calibrate: the costs the traced steps show; 5. plan again.
    fit = {}
    calibrated = sct.calibrate(trace, problem, details=fit)
    again = sct.plan(calibrated, kind="auto", time_limit=1.0,
                     group=dist.group.WORLD)
    if rank == 0:
        print(trace.report(plan), end="")
        predicted = sc.from_csv(calibrated, plan.to_csv()).makespan
        traced = statistics.median(trace.step_times())
        print(f"{kind} on the calibrated costs: {predicted:.2f} ms (the "
              f"traced steps' median {traced:.2f} ms; costs stretched "
              f"{fit['stretch']:.3f}); auto there: {again.makespan:.2f} ms")
        if path:
            with open(path, "w") as f:
                f.write(trace.chrome_trace(plan))
            print(f"wrote {path}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
