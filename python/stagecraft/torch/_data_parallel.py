"""Stages inside data parallelism on torch's runtime: what it leaves out.

torch's runtime reduces a DDP-wrapped stage's gradients through DDP's own
hooks, armed for the stage's last backward of the step. When the plan
splits that stage's backward into I and W, those hooks do not produce the
reduced gradient: measured with torch 2.15 on 2 replicas of a 2-rank
pipeline (docs/torch-runtime.md), torch's own `ScheduleZBVZeroBubble` and
Stagecraft's zb-h1 and zb-v plans without this module gave DDP stages
gradients off from the data-parallel model's by 1.2 to 1.5 times their
size, silently. FSDP2 stages (`fully_shard`) reduce correctly under every
plan and need nothing here.

For a DDP stage whose backward the plan splits, `reduce_split_backward`
runs every backward of the stage under DDP's `no_sync` and makes the
stage's REDUCE_GRAD all-reduce its gradients over the DDP's process group
(one flattened collective, averaged as DDP averages), then scale them as
torch does. A fused backward keeps DDP's own bucketed reduction, which
overlaps the last backward."""

from __future__ import annotations

import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
from torch.distributed.pipelining import schedules as _ts
from torch.nn.parallel import DistributedDataParallel

from .._core import Schedule


def split_stages(plan: Schedule) -> set[int]:
    """The stages whose backward `plan` splits into I and W (an
    overlapped F&B's halves included)."""
    split = (_ts._ComputationType.BACKWARD_INPUT,
             _ts._ComputationType.BACKWARD_WEIGHT)
    out = set()
    for r in range(plan.num_ranks):
        for cell in plan.actions(r):
            action = _ts._Action.from_str(cell)
            for a in action.sub_actions or (action,):
                if a.computation_type in split:
                    out.add(a.stage_index)
    return out


def reduce_split_backward(stage) -> bool:
    """Makes a DDP stage's gradients reduce under a split backward (see the
    module's docstring); False, and nothing changed, for any other stage."""
    ddp = stage.submod
    if not isinstance(ddp, DistributedDataParallel):
        return False
    backward = stage.backward_maybe_with_nosync
    reduce = stage.perform_reduce_grad

    def backward_without_sync(backward_type, bwd_kwargs, last_backward=False):
        # no_sync throughout: DDP's hooks do not reduce a split backward.
        return backward(backward_type, bwd_kwargs, last_backward=False)

    def reduce_then_scale(grad_scale_factor):
        grads = [p.grad for p in ddp.parameters() if p.grad is not None]
        if grads:
            flat = _flatten_dense_tensors(grads)
            dist.all_reduce(flat, group=ddp.process_group)
            flat.div_(dist.get_world_size(ddp.process_group))
            for grad, reduced in zip(grads,
                                     _unflatten_dense_tensors(flat, grads)):
                grad.copy_(reduced)
        reduce(grad_scale_factor)

    stage.backward_maybe_with_nosync = backward_without_sync
    stage.perform_reduce_grad = reduce_then_scale
    return True
