# Stagecraft's quickstart: a torch model pipelined over 2 processes.
#   torchrun --standalone --nproc-per-node 2 -m stagecraft.examples.quickstart out/quickstart
"""Profile the stages, plan, run the plan on torch's pipeline runtime,
trace a step, save and load the plan. Rank 0 prints; the output directory
(default stagecraft-quickstart) receives plan.json and trace.json."""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage

import stagecraft as sc
import stagecraft.torch as sct

WIDTH, STAGES, MICROBATCHES, BATCH = 128, 4, 8, 64


def stage_module(index: int) -> nn.Module:
    torch.manual_seed(index)  # every rank builds the same weights
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh())


def build(indices: list[int]) -> list[PipelineStage]:
    return [PipelineStage(stage_module(i), i, STAGES, torch.device("cpu"))
            for i in indices]


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "stagecraft-quickstart"
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(out, exist_ok=True)

    # 1. Profile. Any placement will do for measuring: here each rank
    #    builds STAGES / world consecutive stages. example_inputs maps a
    #    stage index to the tuple of one microbatch's inputs to that stage.
    per_rank = STAGES // world
    probe = build(list(range(rank * per_rank, (rank + 1) * per_rank)))
    example_inputs = {i: (torch.randn(BATCH // MICROBATCHES, WIDTH),)
                      for i in range(STAGES)}
    problem = sct.profile(probe, example_inputs, MICROBATCHES)  # collective
    if rank == 0:
        for i, st in enumerate(problem.stages):
            print(f"stage {i}: forward {st.forward:.3f} ms, backward "
                  f"{st.backward_input:.3f} + {st.backward_weight:.3f} ms "
                  f"(input + weights), activation {st.activation:.4f} MiB")
        print(f"link: latency {problem.latency:.3f} ms")

    # 2. Plan on rank 0 alone, then give every rank the same plan.
    plan = sct.plan(problem, kind="auto", time_limit=2.0) if rank == 0 \
        else None
    plan = sct.broadcast_plan(plan, src=0)  # collective

    # 3. Rebuild the stages where the plan puts them, and run the plan.
    #    lowering and transport are fixed here; left "auto", the runner
    #    would first time its candidates over its first 38-76 steps.
    mine = sct.stage_indices(plan)
    stages = build(mine)
    runner = sct.schedule(stages, MICROBATCHES, nn.functional.mse_loss,
                          plan=plan, lowering="early", transport="shared")
    optimizer = torch.optim.SGD(
        [p for st in stages for p in st.submod.parameters()], lr=0.05)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, WIDTH, generator=g)
    y = torch.sin(x)
    first, last = 0 in mine, STAGES - 1 in mine

    def step() -> float | None:
        optimizer.zero_grad()
        losses: list = []
        runner.step(*((x,) if first else ()), target=y if last else None,
                    losses=losses if last else None)
        optimizer.step()
        mean = [sum(l.item() for l in losses) / len(losses) if last
                else None]
        dist.broadcast_object_list(mean, src=plan.placement[-1])
        return mean[0]

    if rank == 0:
        print(f"plan: {plan.kind} ({plan.choice}), stages {mine} on rank 0, "
              f"placement {list(plan.placement)}")
        print(f"simulated step {plan.makespan:.3f} ms, peak activation "
              "memory per rank " + ", ".join(f"{m:.3f} MiB"
                                             for m in plan.peak_memory))
    for k in range(4):
        loss = step()
        if rank == 0:
            print(f"step {k}: loss {loss:.5f}")

    # 4. Trace one step: measured beside simulated, for Perfetto.
    with sct.trace(runner) as trace:  # collective when the block closes
        step()
    if rank == 0:
        with open(os.path.join(out, "trace.json"), "w") as f:
            f.write(trace.chrome_trace(plan))
        measured = trace.step_times()[-1]
        print(f"traced step {measured:.3f} ms (simulated "
              f"{plan.makespan:.3f} ms); Chrome trace in "
              f"{os.path.join(out, 'trace.json')}")

        # 5. Save the plan as the runner ran it, and load it back.
        path = os.path.join(out, "plan.json")
        runner.stagecraft_plan.save(path)
        loaded = sc.load_plan(path)
        same = loaded.to_csv() == plan.to_csv() and \
            loaded.makespan == plan.makespan
        print(f"saved {path}: kind {loaded.kind}, lowering "
              f"{loaded.lowering}, transport {loaded.transport}, "
              f"the same plan: {same}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
