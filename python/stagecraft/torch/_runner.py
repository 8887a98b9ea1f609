"""`schedule`: a plan's runner on torch's runtime (the multi-stage
runtime, or one of torch's single-stage classes), checked against the
stages on every rank before any message."""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.utils.checkpoint
from torch.distributed.fsdp import FSDPModule
from torch.distributed.pipelining import schedules as _ts

from .. import Problem, Schedule, ScheduleError
from . import _plan
from ._check import _uniform_problem
from ._collective import _arrive
from ._data_parallel import reduce_split_backward, split_stages
from ._lower import (LOWERINGS, _actions_with_comms, _message_order_mismatch,
                     _receives_early, _runtime_for)
from ._plan import _check_kind, recomputed_stages
from ._trial import TRANSPORTS, _CandidateRunner, _check_choice


def _checkpointed(stage) -> None:
    """Runs `stage`'s module under torch.utils.checkpoint: its forward
    keeps only its inputs, the backward runs it again."""
    module = stage.submod
    if getattr(module, "_stagecraft_checkpointed", False):
        return
    inner = module.forward

    def forward(*args, **kwargs):
        return torch.utils.checkpoint.checkpoint(inner, *args,
                                                 use_reentrant=False, **kwargs)

    module.forward = forward
    module._stagecraft_checkpointed = True


class _StagecraftSingleStage(_CandidateRunner):
    """One of torch's single-stage classes (GPipe, 1F1B) running a plan
    with that class's order through the class's own step loop, which
    lowers it; Stagecraft adds the transport (`lowering` "torch", with the
    trial of "torch" and "torch+quiet" under transport="auto")."""

    def __init__(self, stage, n_microbatches, loss_fn, plan: Schedule,
                 scale_grads: bool, transport: str = "shared"):
        super().__init__(stage, n_microbatches, loss_fn=loss_fn,
                         scale_grads=scale_grads)
        self.stagecraft_plan = plan
        self._init_candidates(stage, ["torch"], transport)


class _Stagecraft1F1B(_StagecraftSingleStage, _ts.Schedule1F1B):
    """torch's Schedule1F1B, run by Stagecraft (`_StagecraftSingleStage`)."""


class _StagecraftGPipe(_StagecraftSingleStage, _ts.ScheduleGPipe):
    """torch's ScheduleGPipe, run by Stagecraft (`_StagecraftSingleStage`)."""


#: Stagecraft's runner of each of torch's single-stage classes.
_SINGLE_STAGE_RUNNERS = {_ts.Schedule1F1B: _Stagecraft1F1B,
                         _ts.ScheduleGPipe: _StagecraftGPipe}


class _StagecraftRuntime(_CandidateRunner, _ts._PipelineScheduleRuntime):
    """torch's runtime, loaded with a Stagecraft plan instead of lowering.

    The last stage's losses are kept by microbatch: torch's runtime keeps
    them in a list in the order the forwards ran and reads microbatch k's
    at index k, which is another microbatch's loss (or none) once a plan
    runs the last stage's forwards out of microbatch order."""

    def __init__(self, stages, n_microbatches, loss_fn, plan: Schedule,
                 scale_grads: bool, lowering: str = "torch",
                 transport: str = "shared", **kwargs):
        super().__init__(stages, n_microbatches, loss_fn=loss_fn,
                         scale_grads=scale_grads, **kwargs)
        self.stagecraft_plan = plan
        self._losses_of: dict[int, Any] = {}
        compute = {r: [_ts._Action.from_str(a) for a in plan.actions(r)]
                   for r in range(plan.num_ranks)}
        # The compute-only order (torch's `pipeline_order`, which its own
        # tools print) and the orders with communication that may run:
        # one per lowering, and for "auto" the trial of "early" and
        # "torch" keeps the one measured faster.
        self.pipeline_order = compute
        self._lowered: dict[str, dict[int, list[Any]]] = {}
        wrong = None
        for name, order in self._lower(compute, lowering,
                                       n_microbatches).items():
            mismatch = _message_order_mismatch(order, plan.placement)
            if mismatch is not None:
                wrong = wrong or (name, mismatch)
            elif order not in self._lowered.values():
                self._lowered[name] = order
        if not self._lowered:
            # torch's lowering posts the receives in the order the
            # messages are sent, and Stagecraft's sends in the order the
            # receiver consumes; this guards the pairing either way.
            raise ScheduleError(
                f"lowering={wrong[0]!r} of this {plan.kind} plan would "
                f"pair a message with the wrong receive: {wrong[1]}")
        self._init_candidates(self._stages[0], list(self._lowered),
                              transport)

    def _use_lowering(self, lowering: str) -> None:
        self.pipeline_order_with_comms = self._lowered[lowering]

    def _lower(self, compute, lowering: str, n_microbatches: int):
        """Every rank's order with communication under `lowering`, by
        lowering name ("auto": "early", then "torch")."""
        if lowering == "stagecraft":
            # Stagecraft's CSV retires each send (WAIT_SEND_F/B) and places
            # each stage's gradient reduction after its last gradient
            # action, its wait deferred to the rank's next reduction (the
            # rest of the step overlaps it); FSDP stages also unshard first
            # and reshard after their reduction.
            with_comms = _actions_with_comms(
                self.stagecraft_plan, reduce_grad=True,
                sharded=any(isinstance(st.submod, FSDPModule)
                            for st in self._stages))
            self._prepare_schedule_with_comms(with_comms,
                                              format="compute_comms")
            return {"stagecraft": self.pipeline_order_with_comms}
        # torch's own lowering passes add the sends, receives, waits and
        # gradient reductions to Stagecraft's compute order.
        self._prepare_schedule_with_comms(
            {r: list(acts) for r, acts in compute.items()},
            format="compute_only")
        by_torch = self.pipeline_order_with_comms
        out = {}
        if lowering in ("auto", "early"):
            out["early"] = {r: _receives_early(acts)
                            for r, acts in by_torch.items()}
        if lowering in ("auto", "torch"):
            out["torch"] = by_torch
        return out

    def _maybe_compute_loss(self, stage, output, target_mbs, mb_index,
                            *args, **kwargs):
        if stage.is_last and self._loss_fn is not None:
            self._losses_of[mb_index] = self._compute_loss(
                output, target_mbs[mb_index], *args, **kwargs)

    def _maybe_get_loss(self, stage, mb_index):
        if not (stage.is_last and self._loss_fn is not None):
            return None
        if mb_index not in self._losses_of:
            raise RuntimeError(
                f"stage {stage.stage_index}: the backward of microbatch "
                f"{mb_index} runs before its forward computed the loss")
        return self._losses_of[mb_index]

    def _update_losses(self, stages, losses):
        # torch's own bookkeeping, given the losses in microbatch order.
        self._internal_losses[:] = [self._losses_of[k]
                                    for k in sorted(self._losses_of)]
        self._losses_of.clear()
        super()._update_losses(stages, losses)


def schedule(stages: list, n_microbatches: int, loss_fn: Callable | None = None,
             kind: str | None = None, problem: Problem | None = None,
             memory_limit: float | None = None, plan: Schedule | None = None,
             scale_grads: bool = True, time_limit: float = 10.0,
             recompute: str | None = None, lowering: str = "auto",
             transport: str = "auto",
             **kwargs) -> _ts._PipelineScheduleRuntime:
    """This rank's Stagecraft schedule on torch's runtime.

    `lowering`: who adds the communication to the plan's compute order.
    "torch": torch's own lowering passes (`compute_only`, as for a CSV
    handed to `_load_csv(format="compute_only")`); a plan with the order of
    torch's single-stage GPipe or 1F1B runs on that class. "early": torch's
    lowering with every receive posted as early as it may be
    (`_receives_early`): gloo sends a message only once its receiver has
    posted the receive, so a late receive leaves the sender's transport
    thread to send it later, in the middle of the sender's next compute.
    "auto" (default): 1F1B's order on torch's Schedule1F1B (its own
    step loop lowers it); every other plan runs a measured trial of
    "early" and "torch": TRIAL_WARMUP uncounted steps of each in turn,
    then TRIAL_ROUNDS rounds of TRIAL_BLOCK consecutive steps of each, the
    first of a block uncounted (it pays for what the other candidate's
    step left behind), the order reversed every round (TRIAL_STEPS
    measured steps of each, TRIAL_LENGTH training steps in all; every step
    trains, and forward-only `eval` steps are not counted);
    the ranks then keep the lowering whose slowest rank's median step was
    the shorter (`runner.stagecraft_lowering`, None during the trial;
    `runner.stagecraft_lowering_ms`). Early receives measure faster on
    most plans (bench/torch-lowering-bench.py), torch's lowering on
    DualPipeV's order at 4 microbatches. "stagecraft": the sends, receives
    and waits Stagecraft lowered and verified deadlock-free with the plan.

    `transport`: how gloo's transport threads (one per gloo device, which
    move every message) share the rank's core during a step. "shared": as
    torch leaves them, at the computing thread's priority (measured
    taking 4-7 ms of CPU in a 17 ms step on the rank's own core: see
    stagecraft.torch._transport). "quiet": at idle
    priority (SCHED_IDLE) for the step, restored after it, so they run
    only while the computing thread waits; it needs gloo transport threads
    whose priority this process may restore (CAP_SYS_NICE or RLIMIT_NICE
    20) on every rank, and a gloo pipeline group, else ScheduleError on
    every rank. "auto" (default): where "quiet" may run, the
    trial above tries every lowering with each transport (TRIAL_LENGTH
    steps per pair of candidates: "early", "early+quiet", "torch",
    "torch+quiet"), and keeps the fastest (`runner.stagecraft_transport`);
    elsewhere (NCCL, no permission) "shared". Unless "shared", the ranks
    agree on it through one all_reduce at construction. A plan run on one
    of torch's single-stage classes (1F1B's order under lowering="auto",
    GPipe's or 1F1B's under "torch") tries "torch" and "torch+quiet".

    The trial logs through `logging.getLogger("stagecraft.torch")` (INFO):
    its candidates and length when the runner is built, each candidate's
    median step and the one kept when it ends, and when gloo's transport
    threads go to idle priority. When it ends, the runner's copy of the
    plan (`runner.stagecraft_plan`; the plan given is not changed) records
    what it kept (`.lowering`, `.transport`), so that plan saved after the
    trial (`runner.stagecraft_plan.save(path)`) runs those again without a
    trial: with `lowering` and `transport` left "auto", a plan that
    carries them runs them. Naming both fixes the candidate and skips the
    trial.

    `stages`: this rank's `PipelineStage`s (all in one process group).
    `problem`: the costs to plan with (default: uniform costs for
    `stages[0].num_stages` stages); `plan`: an already computed plan (its
    problem must match). `kind`: without a plan, the kind to plan (default
    "auto"); with one, its kind, checked (a plan of another kind raises).
    `scale_grads` as torch's schedules, with torch's
    default (True: gradients are averaged over microbatches; False sums
    them).

    A collective of the stages' process group: every rank calls it (a call
    from some ranks only fails after COLLECTIVE_TIMEOUT seconds saying
    so). Without a plan it plans on rank 0 and broadcasts (`plan` with
    `group`). Raises ScheduleError on every rank, before any message of
    the pipeline, when the kind, the stage count, the microbatch count or
    the stages held on any rank do not match the plan (naming that rank),
    when the ranks hold different plans, or when the plan's recomputation
    is one torch cannot run (see `recomputed_stages`); stages that
    recompute every forward run under torch.utils.checkpoint.
    """
    if not stages:
        raise ScheduleError("no stages given for this rank")
    _check_choice("lowering", lowering, LOWERINGS)
    _check_choice("transport", transport, TRANSPORTS)
    if kind is not None:
        _check_kind(kind)
    num_stages = stages[0].num_stages
    ranks = stages[0].group_size
    rank = stages[0].group_rank
    group = stages[0].group
    if group is None and dist.is_initialized():
        group = dist.group.WORLD
    if plan is None:
        if problem is None:
            problem = _uniform_problem(num_stages, ranks, n_microbatches)
        if len(problem.stages) != num_stages:
            raise ScheduleError(
                f"the problem has {len(problem.stages)} stages but the "
                f"PipelineStages say num_stages={num_stages}")
        # Every rank calls schedule: rank 0 plans, every rank runs its plan.
        plan = _plan.plan(problem, kind=kind or "auto",
                                 memory_limit=memory_limit,
                                 time_limit=time_limit, group=group,
                                 recompute=recompute)
    elif kind is not None and kind != plan.kind:
        raise ScheduleError(
            f"kind={kind!r}, but the plan given is a {plan.kind} plan"
            + (f" ({plan.choice})" if plan.choice else "")
            + ": leave kind out to run the plan, or plan that kind")
    # Every rank checks its own stages against the plan, then the ranks
    # agree, so that a wrong stage list on one rank fails on every rank
    # with its message, before any message of the pipeline is sent.
    wrong = _mismatch(plan, stages, num_stages, ranks, rank, n_microbatches)
    _agree(plan, wrong, group, rank)
    checkpointed = recomputed_stages(plan)
    for stage in stages:
        if stage.stage_index in checkpointed:
            _checkpointed(stage)
    # DDP stages whose backward the plan splits reduce at REDUCE_GRAD.
    split = split_stages(plan)
    for stage in stages:
        if stage.stage_index in split:
            reduce_split_backward(stage)
    # The runner's own copy (`runner.stagecraft_plan`), which records what
    # the trial keeps; the plan given stays as it was.
    plan = plan._with_origin(plan.kind, plan.choice, plan.lower_bound,
                             plan.memory_aware_bound)
    # A plan whose trial already ran (a saved plan) runs what it kept.
    if lowering == "auto" and plan.lowering in LOWERINGS:
        lowering = plan.lowering
    if transport == "auto" and plan.transport in TRANSPORTS:
        transport = plan.transport
    single = _runtime_for(plan, lowering, bool(kwargs))
    if single is not None:
        # The plan's order is exactly that of one of torch's single-stage
        # schedules, whose own step loop runs it faster than the
        # multi-stage runtime (bench/torch-bench.py): run it there.
        return _SINGLE_STAGE_RUNNERS[single](stages[0], n_microbatches,
                                             loss_fn, plan, scale_grads,
                                             transport=transport)
    return _StagecraftRuntime(stages, n_microbatches, loss_fn, plan,
                              scale_grads, lowering=lowering,
                              transport=transport, **kwargs)


def _mismatch(plan: Schedule, stages: list, num_stages: int, ranks: int,
              rank: int, n_microbatches: int) -> str | None:
    """What does not match between `plan` and this rank's stages, or None."""
    p = plan.problem
    if len(p.stages) != num_stages:
        return (f"the plan has {len(p.stages)} stages but the "
                f"PipelineStages say num_stages={num_stages}")
    if p.ranks != ranks:
        return (f"the plan has {p.ranks} ranks but the process group has "
                f"{ranks}")
    if p.microbatches != n_microbatches:
        return (f"the plan has {p.microbatches} microbatches but "
                f"n_microbatches={n_microbatches}")
    want = [s for s, r in enumerate(plan.placement) if r == rank]
    have = sorted(s.stage_index for s in stages)
    if have != want:
        return (f"rank {rank} holds stages {have}, but the {plan.kind} plan "
                f"places {want} here (placement {list(plan.placement)}); "
                "build the stages stagecraft.torch.stage_indices(plan, rank) "
                "names")
    return None


def _agree(plan: Schedule, wrong: str | None, group, rank: int) -> None:
    """Raises on every rank of `group` the first rank's mismatch (or that
    the ranks hold different plans); without torch.distributed, this
    rank's. A collective of the group (`_arrive` guards it)."""
    if not dist.is_initialized():
        if wrong is not None:
            raise ScheduleError(wrong)
        return
    _arrive(group, "stagecraft.torch.schedule")
    mine = (rank, wrong, plan.to_csv(), plan.kind, plan.choice)
    every: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(every, mine,
                           group=None if group is dist.group.WORLD else group)
    for r, message, _, _, _ in every:
        if message is not None:
            raise ScheduleError(
                message if r == rank else f"rank {r} of the pipeline: "
                f"{message}")
    first = every[0]
    for r, _, csv, kind, choice in every[1:]:
        if csv != first[2]:
            raise ScheduleError(
                f"the ranks hold different plans (rank {first[0]}: "
                f"{first[3]} {first[4]}, rank {r}: {kind} {choice}, their "
                "orders differ): auto searches under a time limit, so plan "
                "on one rank and share it (stagecraft.torch.broadcast_plan), "
                "or plan with group= the pipeline's group")
