"""Planning for torch's runtime: `plan` (local, or a collective with a
group), `broadcast_plan`, torch's own orders as candidates within the
memory limit, and `stage_indices`."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.pipelining import schedules as _ts

from .. import (Problem, Schedule, ScheduleError, default_memory_limit,
                from_csv, plan_data_parallel, plan_from_json)
from .. import kinds as _all_kinds
from .. import schedule as _schedule
from ._check import _single_stage_order, check
from ._collective import _arrive, _global_rank


#: The kinds that run on torch's runtime (helix does not: see above).
KINDS = ["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v",
         "dualpipev", "auto"]


#: The searches for small problems, whose plans run on torch's runtime
#: too (ordinary F, I, W orders): exact, and ilp where the build has its
#: solver (the wheel does not).
SEARCHES = ["exact"] + (["ilp"] if "ilp" in _all_kinds() else [])


#: Why a kind that exists does not run on torch's pipeline runtime.
_NOT_ON_TORCH = {
    "helix": "helix moves attention to other ranks, which torch's stages "
             "cannot express",
}


def _check_kind(kind: str) -> None:
    """Raises ScheduleError unless `kind` runs on torch's runtime: an
    unknown kind is named unknown; a kind that exists but cannot run here
    says why."""
    if kind in KINDS or kind in SEARCHES:
        return
    runs = ", ".join(KINDS + SEARCHES)
    if kind not in _all_kinds():
        raise ScheduleError(
            f"unknown kind {kind!r}; the kinds that run on torch's pipeline "
            f"runtime: {runs}")
    why = _NOT_ON_TORCH.get(
        kind, "this build of stagecraft.torch does not run it")
    raise ScheduleError(
        f"kind {kind!r} does not run on torch's pipeline runtime: {why}; "
        f"expected one of: {runs}")


def plan(problem: Problem, kind: str = "auto", memory_limit: float | None = None,
         time_limit: float = 10.0, chunks: int = 0, group=None,
         recompute: str | None = None,
         objective: str = "makespan", policy=None,
         params: dict | None = None,
         data_parallel: dict | None = None) -> Schedule:
    """Stagecraft's schedule of `problem` for torch (every kind in `KINDS`
    and the searches in `SEARCHES`).

    Memory: with no `memory_limit` (and no capacity in the problem), every
    rank stays within the highest per-rank peak of 1F1B on `problem`
    (`stagecraft.default_memory_limit`), as `stagecraft.schedule`'s auto
    does: the torch orders below count only within it.

    A kind with a torch namesake (`NAMESAKES`: gpipe, 1f1b,
    interleaved-1f1b, zb-v, dualpipev) returns that class's order where it
    simulates faster on `problem` within the memory limit (without one:
    within the kind's own peak on every rank; `choice` says "torch
    <class>"), so that no kind plans slower than torch's schedule of its
    name.

    `objective` is the makespan: torch's runtime steps the optimizer after
    the whole schedule, a barrier between steps, so one step costs the
    makespan; "span" (steps that overlap, `stagecraft-run --overlap-steps`)
    raises ScheduleError saying so.

    `recompute` as `stagecraft.schedule` (default: auto when the problem has
    a capacity, else none). `auto` (without recomputation) also weighs
    the orders of torch's own schedules that fit the problem
    (`torch_orders`) and returns one where it simulates as fast or faster
    within the memory limit (its `choice` says "torch <class>").

    `policy` (a `stagecraft.Policy` or its text) plans by that policy
    instead of a kind, with `params` (its parameter values by name): the
    plan's kind is "policy", its choice the policy's name and values.

    `data_parallel` (kind auto only): the pipeline runs inside data
    parallelism, each stage wrapped in DDP or FSDP2 over its data-parallel
    group; a dict of `stagecraft.plan_data_parallel`'s arguments (`degree`,
    `grad_bytes`, and optionally `sharding`, `shard_group`, `latency`,
    `bandwidth`, `inter_latency`, `inter_bandwidth`, `optimizer_per_byte`).
    The plan is the schedule with the shortest step *including* the
    reductions it leaves exposed, each stage's reduction whole after its
    last gradient action (torch's runtime reduces a stage whole: its
    REDUCE_GRAD); its kind is "data-parallel" and its choice names the
    schedule and the placement ("...; torch").

    Local by default: `group=None` plans in this process alone. `auto`
    searches under a time limit, so two ranks planning alone may find
    different plans; `schedule` refuses to run plans that differ between
    ranks. Either plan on one rank and share the plan with
    `broadcast_plan` (called on every rank), or pass the pipeline's
    process group as `group` (`dist.group.WORLD` for the default group):
    then the call is a collective of that group (every rank must call it;
    a call from some ranks only fails after COLLECTIVE_TIMEOUT seconds
    saying so), rank 0 of the group plans and broadcasts the plan.
    """
    if policy is None:
        _check_kind(kind)
    if data_parallel is not None:
        _check_data_parallel(data_parallel, kind, policy, chunks, recompute)
    if objective != "makespan":
        raise ScheduleError(
            f"objective={objective!r}: torch's runtime steps the optimizer "
            "after the whole schedule (a barrier between steps), so a step "
            "costs the makespan and stagecraft.torch plans for it; the span "
            "objective is for runtimes whose steps overlap "
            "(stagecraft-run --overlap-steps)")
    if not problem.is_chain():
        raise ScheduleError(
            f"pipeline @{problem.name} branches (Stage.inputs): torch's "
            "pipelining passes one tensor from each stage to the next, so it "
            "cannot run a graph of stages")
    def local():
        if policy is not None:
            return _schedule(problem, policy=policy, params=params)
        if data_parallel is not None:
            return plan_data_parallel(
                problem, **data_parallel, memory_limit=memory_limit,
                time_limit=time_limit, buckets=False)["schedule"]
        found = _schedule(problem, kind=kind, memory_limit=memory_limit,
                          time_limit=time_limit, chunks=chunks,
                          recompute=recompute)
        if recompute not in (None, "none") or chunks:
            return found
        if kind != "auto":
            return _namesake_if_faster(found, problem, kind, memory_limit)
        return _best_with_torch_orders(found, problem, memory_limit)

    if group is None or not dist.is_initialized():
        return local()
    _arrive(group, f"stagecraft.torch.plan(kind={kind!r}, group=...)"
            if policy is None else
            "stagecraft.torch.plan(policy=..., group=...)")
    found, error = None, None
    if dist.get_rank(group) == 0:
        try:
            found = local()
        except ScheduleError as e:
            error = str(e)
    return _broadcast(found, error, _global_rank(group, 0), group)


#: What `plan(data_parallel=...)` passes on to `plan_data_parallel`.
DATA_PARALLEL_KEYS = ("degree", "grad_bytes", "sharding", "shard_group",
                      "latency", "bandwidth", "inter_latency",
                      "inter_bandwidth", "optimizer_per_byte")


def _check_data_parallel(data_parallel, kind, policy, chunks,
                         recompute) -> None:
    """Raises ScheduleError naming what `plan(data_parallel=...)` cannot
    take."""
    if not isinstance(data_parallel, dict):
        raise ScheduleError(
            "data_parallel must be a dict of plan_data_parallel's arguments "
            f"({', '.join(DATA_PARALLEL_KEYS)}), not "
            f"{type(data_parallel).__name__}")
    unknown = sorted(set(data_parallel) - set(DATA_PARALLEL_KEYS))
    if unknown:
        raise ScheduleError(
            f"data_parallel: unknown key(s) {', '.join(unknown)}; expected "
            f"{', '.join(DATA_PARALLEL_KEYS)}")
    missing = [k for k in ("degree", "grad_bytes") if k not in data_parallel]
    if missing:
        raise ScheduleError(f"data_parallel needs {' and '.join(missing)}")
    if policy is not None or kind != "auto" or chunks or \
            recompute not in (None, "none"):
        raise ScheduleError(
            "data_parallel chooses the schedule with its reductions (kind "
            "auto, without a policy, chunks or recomputation); a fixed kind "
            "places them by torch's rule: plan it without data_parallel")


def _broadcast(found: Schedule | None, error: str | None, src: int,
               group) -> Schedule:
    """The plan `src` holds (or its error, raised on every rank), on
    every rank of `group`: sent as its plan file, so every rank holds the
    same schedule, choice, bounds and recomputation."""
    message: list = [("error", error) if found is None
                     else ("ok", found.to_json())]
    dist.broadcast_object_list(message, src=src,
                               group=None if group is dist.group.WORLD
                               else group)
    status, text = message[0]
    if status != "ok":
        raise ScheduleError(text)
    return plan_from_json(text, where=f"the plan rank {src} broadcast")


def broadcast_plan(plan: Schedule | None, src: int = 0,
                   group=None) -> Schedule:
    """The plan rank `src` holds, on every rank of `group` (default: the
    default group): `src` passes its plan, the other ranks anything (None).
    A collective: every rank of the group must call it; a call from some
    ranks only fails after COLLECTIVE_TIMEOUT seconds saying so.

        plan = sct.plan(problem, kind="auto") if rank == 0 else None
        plan = sct.broadcast_plan(plan, src=0)
    """
    if not dist.is_initialized():
        if plan is None:
            raise ScheduleError("broadcast_plan: torch.distributed is not "
                                "initialized and no plan was given")
        return plan
    _arrive(group, "stagecraft.torch.broadcast_plan")
    me = dist.get_rank()
    found, error = None, None
    if me == src:
        if isinstance(plan, Schedule):
            found = plan
        else:
            error = (f"broadcast_plan: rank {src} (src) passed "
                     f"{type(plan).__name__}, not a stagecraft Schedule")
    return _broadcast(found, error, src, group)


class _OrderStage:
    """What torch's schedule constructors read of a stage to build their
    per-rank orders, without a process group."""

    def __init__(self, index: int, num_stages: int, rank: int, size: int):
        self.stage_index, self.num_stages = index, num_stages
        self.group_rank, self.group_size = rank, size
        self.is_first, self.is_last = index == 0, index == num_stages - 1
        self.stage_index_to_group_rank: dict = {}
        self.submod = torch.nn.Linear(1, 1)


def torch_orders(problem: Problem) -> dict[str, Schedule]:
    """torch's built-in schedules that fit `problem`'s shape, each read
    with `check` and simulated on `problem`: GPipe and 1F1B with one stage
    per rank; Interleaved1F1B and InterleavedZeroBubble (loop placement)
    and ZBVZeroBubble and DualPipeV (V placement) with two. A class whose
    constructor refuses the shape (its microbatch rules) is left out."""
    ranks, n_mb, n = problem.ranks, problem.microbatches, len(problem.stages)
    out: dict[str, Schedule] = {}
    if n == ranks:
        for name, kind in (("ScheduleGPipe", "gpipe"),
                           ("Schedule1F1B", "1f1b")):
            if kind == "1f1b" and n_mb < n:
                continue
            rows = [",".join(_single_stage_order(kind, r, n, n_mb))
                    for r in range(ranks)]
            out[name] = from_csv(problem, "\n".join(rows) + "\n")
        return out
    if n != 2 * ranks:
        return out
    for cls, v in ((_ts.ScheduleInterleaved1F1B, False),
                   (getattr(_ts, "ScheduleInterleavedZeroBubble", None), False),
                   (_ts.ScheduleZBVZeroBubble, True),
                   (getattr(_ts, "ScheduleDualPipeV", None), True)):
        if cls is None:
            continue
        stages = [_OrderStage(i, n, 0, ranks)
                  for i in ([0, n - 1] if v else [0, ranks])]
        try:
            out[cls.__name__] = check(cls(stages, n_mb), problem)
        except (ValueError, RuntimeError, AssertionError, ScheduleError):
            continue
    return out


def _fits(candidate: Schedule, problem: Problem,
          memory_limit: float | None) -> bool:
    """Whether every rank of `candidate` stays within the memory limit:
    `memory_limit`, else the problem's capacity, else 1F1B's highest
    per-rank peak (`default_memory_limit`, auto's default)."""
    limit = memory_limit
    if limit is None:
        limit = problem.capacity if problem.capacity is not None \
            else default_memory_limit(problem)
    if limit is None:  # devices with their own memory
        return False
    return max(candidate.peak_memory) <= limit * (1 + 1e-9) + 1e-12


def _best_with_torch_orders(found: Schedule, problem: Problem,
                            memory_limit: float | None) -> Schedule:
    """auto's plan, or the order of one of torch's built-in schedules
    (`torch_orders`) where that one's simulated makespan is no larger
    within the memory limit (`_fits`: without one, 1F1B's peak, auto's
    default; a tie goes to torch's order: its placement
    and order are what torch's own class runs); named kind "auto", its
    choice "torch <class>"."""
    best = found
    for name, theirs in torch_orders(problem).items():
        if not _fits(theirs, problem, memory_limit):
            continue
        if theirs.makespan <= best.makespan + 1e-9:
            best = theirs._with_origin("auto", f"torch {name}",
                                       found.lower_bound,
                                       found.memory_aware_bound)
    return best


#: torch's built-in schedule class of the same name as a Stagecraft kind.
NAMESAKES = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B",
             "interleaved-1f1b": "ScheduleInterleaved1F1B",
             "zb-v": "ScheduleZBVZeroBubble", "dualpipev": "ScheduleDualPipeV"}


def _namesake_if_faster(found: Schedule, problem: Problem, kind: str,
                        memory_limit: float | None) -> Schedule:
    """The kind's plan, or its torch namesake's order (`NAMESAKES`, read
    with `check`) where that one simulates faster on `problem` within the
    memory limit (without one: within the kind's own peak on every rank):
    a kind is never slower than torch's schedule of the same name (its
    choice then says "torch <class>"; its memory is that order's)."""
    name = NAMESAKES.get(kind)
    theirs = torch_orders(problem).get(name) if name else None
    if theirs is None or theirs.makespan >= found.makespan - 1e-9:
        return found
    if memory_limit is None and problem.capacity is None:
        if any(t > f * (1 + 1e-9) + 1e-12
               for t, f in zip(theirs.peak_memory, found.peak_memory)):
            return found
    elif not _fits(theirs, problem, memory_limit):
        return found
    return theirs._with_origin(kind, f"torch {name}", found.lower_bound,
                               found.memory_aware_bound)


def recomputed_stages(plan: Schedule) -> list[int]:
    """The stages whose every forward recomputes in full: torch runs them
    under `torch.utils.checkpoint`. Raises ScheduleError for what torch's
    runtime cannot run: a stage that recomputes some microbatches and not
    others (it runs one module for all of them), or selective
    recomputation (re-deriving the attention core needs the model's own
    code; stagecraft-run does it for the reference model)."""
    return list(plan.torch_checkpoint_stages())


def stage_indices(plan: Schedule, rank: int | None = None,
                  group=None) -> list[int]:
    """The stages `plan` places on `rank`, in chain order: build these.

    Under torch.distributed, the plan must have as many ranks as `group`
    (default: the default group) and `rank` defaults to this process's
    rank in it; ScheduleError otherwise (a plan for another rank count
    places stages this group cannot hold)."""
    if dist.is_initialized():
        size = dist.get_world_size(group)
        if plan.num_ranks != size:
            raise ScheduleError(
                f"the {plan.kind} plan has {plan.num_ranks} ranks but the "
                f"process group has {size}: plan for {size} ranks "
                f"(Problem(ranks={size}, ...))")
        if rank is None:
            rank = dist.get_rank(group)
    elif rank is None:
        raise ScheduleError("stage_indices: give the rank (torch.distributed "
                            "is not initialized)")
    if not 0 <= rank < plan.num_ranks:
        raise ScheduleError(f"rank {rank} out of range: the plan has "
                            f"{plan.num_ranks} ranks")
    return [s for s, r in enumerate(plan.placement) if r == rank]
