"""Stagecraft schedules on torch.distributed.pipelining's own runtime.

    import stagecraft as sc
    import stagecraft.torch as sct

    plan = sct.plan(problem, kind="zb-v")              # or sc.schedule(...)
    mine = sct.stage_indices(plan, rank)               # build these stages here
    stages = [PipelineStage(module_for(i), i, plan.problem.num_stages ...)]
    runner = sct.schedule(stages, n_microbatches, loss_fn, plan=plan)
    runner.step(x, target=y, losses=losses)            # torch's interface

`schedule` returns a torch `_PipelineScheduleRuntime` whose per-rank action
lists are the compute actions Stagecraft generated and the SEND_/RECV_
actions Stagecraft lowered and verified (torch's CSV spelling, read back by
torch's own parser), plus the bookkeeping torch's runtime requires and that
does not reorder anything: a REDUCE_GRAD / WAIT_REDUCE_GRAD pair after each
stage's last backward (torch's own `_add_reduce_grad`). The WAIT_SEND that
retires each send comes with Stagecraft's CSV. Every kind but helix runs: helix
moves attention to other ranks, which torch's stages cannot express.

`profile` measures this rank's stages and returns a `Problem` for `auto`;
`check` verifies and simulates one of torch's own schedule objects.

`trace` records when every action of real steps starts and ends on every
rank (any of torch's schedules, Stagecraft's or torch's own), for a report
against the simulated plan and a Chrome trace beside it; `calibrate` fits
the problem's costs to a trace, so that planning again (`plan`) predicts
the measured step. The loop: profile, plan, trace, calibrate, plan again.
`activation_memory` measures each rank's peak of the bytes autograd saves
for backward during real steps (what the plan's peak memory models).
"""

from __future__ import annotations

from ._check import check
from ._collective import COLLECTIVE_TIMEOUT
from ._lower import LOWERINGS
from ._memory import ActivationMemory
from ._plan import (KINDS, NAMESAKES, SEARCHES, broadcast_plan, plan,
                    recomputed_stages, stage_indices, torch_orders)
from ._profile import profile
from ._runner import schedule
from ._trace import Trace, calibrate
from ._trial import (TRANSPORTS, TRIAL_BLOCK, TRIAL_LENGTH, TRIAL_ROUNDS,
                     TRIAL_STEPS, TRIAL_WARMUP)

#: `with stagecraft.torch.trace(runner) as t: runner.step(...)`.
trace = Trace
#: `with stagecraft.torch.activation_memory(runner) as m: runner.step(...)`.
activation_memory = ActivationMemory

__all__ = ["plan", "broadcast_plan", "stage_indices", "schedule", "profile",
           "check", "torch_orders", "trace", "recomputed_stages",
           "Trace", "calibrate", "activation_memory", "ActivationMemory",
           "KINDS", "SEARCHES", "NAMESAKES", "LOWERINGS", "TRANSPORTS",
           "COLLECTIVE_TIMEOUT", "TRIAL_WARMUP", "TRIAL_BLOCK",
           "TRIAL_ROUNDS", "TRIAL_STEPS", "TRIAL_LENGTH"]
