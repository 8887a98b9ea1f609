"""A torch model trained with a Stagecraft schedule on torch's own pipeline
runtime. Launch one process per rank (gloo on the CPU here, NCCL on GPUs):

    torchrun --standalone --nproc-per-node 2 -m stagecraft.examples.torch_pipeline [KIND]

Rank 0 plans KIND (default zb-v) on uniform costs and shares the plan; each
rank builds the stages the plan places on it, then trains a few steps;
rank 0 prints the loss of each step (the mean over the microbatches), which
the rank holding the last stage sends it.
"""

import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage

import stagecraft as sc
import stagecraft.torch as sct

WIDTH, MICROBATCHES, BATCH = 64, 8, 32


def stage_module(index):
    torch.manual_seed(index)  # every rank builds the same weights
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh())


def main():
    kind = sys.argv[1] if len(sys.argv) > 1 else "zb-v"
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    num_stages = 2 * world
    problem = sc.Problem(ranks=world, microbatches=MICROBATCHES,
                         stages=[sc.Stage() for _ in range(num_stages)])
    # Planned on rank 0 and shared: every rank must run the same plan.
    plan = sct.plan(problem, kind=kind, time_limit=1.0) if rank == 0 else None
    plan = sct.broadcast_plan(plan, src=0)
    mine = sct.stage_indices(plan)
    stages = [PipelineStage(stage_module(i), i, num_stages, torch.device("cpu"))
              for i in mine]
    runner = sct.schedule(stages, MICROBATCHES, nn.functional.mse_loss, plan=plan)
    params = [p for st in stages for p in st.submod.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.05)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, WIDTH, generator=g)
    y = torch.sin(x)
    last = plan.placement[-1]  # the rank holding the last stage
    for step in range(5):
        optimizer.zero_grad()
        losses = []
        has_last = num_stages - 1 in mine
        runner.step(*((x,) if 0 in mine else ()),
                    target=y if has_last else None,
                    losses=losses if has_last else None)
        optimizer.step()
        mean = [sum(l.item() for l in losses) / len(losses)
                if has_last else None]
        dist.broadcast_object_list(mean, src=last)
        if rank == 0:
            print(f"{plan.kind} step {step}: loss {mean[0]:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
