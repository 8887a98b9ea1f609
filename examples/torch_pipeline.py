"""A torch model trained with a Stagecraft schedule on torch's own pipeline
runtime. Launch one process per rank (gloo on the CPU here, NCCL on GPUs):

    build-python/venv/bin/torchrun --standalone --nproc-per-node 2 examples/torch_pipeline.py [KIND]

Each rank builds the stages the plan places on it, then trains a few steps;
the rank holding the last stage prints the loss.
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
    plan = sct.plan(problem, kind=kind, time_limit=1.0)
    mine = sct.stage_indices(plan, rank)
    stages = [PipelineStage(stage_module(i), i, num_stages, torch.device("cpu"))
              for i in mine]
    runner = sct.schedule(stages, MICROBATCHES, nn.functional.mse_loss, plan=plan)
    params = [p for st in stages for p in st.submod.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.05)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, WIDTH, generator=g)
    y = torch.sin(x)
    for step in range(5):
        optimizer.zero_grad()
        losses = []
        has_last = num_stages - 1 in mine
        runner.step(*((x,) if 0 in mine else ()),
                    target=y if has_last else None,
                    losses=losses if has_last else None)
        optimizer.step()
        if has_last:
            print(f"{plan.kind} step {step}: loss "
                  f"{sum(l.item() for l in losses) / len(losses):.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
