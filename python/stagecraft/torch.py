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

import contextlib
import logging
import os
import statistics
import time
from typing import Any, Callable, Iterable

import torch
import torch.distributed as dist
import torch.utils.checkpoint
from torch.distributed.pipelining import schedules as _ts

from . import (Problem, Schedule, ScheduleError, Stage, default_memory_limit,
               from_csv, plan_from_json)
from . import kinds as _all_kinds
from . import schedule as _schedule
from ._torch_memory import ActivationMemory, SavedBytes
from ._torch_trace import Trace, calibrate
from . import _torch_transport

#: `with stagecraft.torch.trace(runner) as t: runner.step(...)`.
trace = Trace
#: `with stagecraft.torch.activation_memory(runner) as m: runner.step(...)`.
activation_memory = ActivationMemory

__all__ = ["plan", "broadcast_plan", "stage_indices", "schedule", "profile",
           "check", "torch_orders", "trace",
           "Trace", "calibrate", "activation_memory", "ActivationMemory",
           "KINDS", "SEARCHES", "COLLECTIVE_TIMEOUT"]

#: Where the trial, the transport and the collectives say what they do.
logger = logging.getLogger("stagecraft.torch")

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


def _uniform_problem(num_stages: int, ranks: int, n_microbatches: int) -> Problem:
    return Problem(ranks=ranks, microbatches=n_microbatches,
                   stages=[Stage(forward=1.0, backward_input=1.0,
                                 backward_weight=1.0, activation=1.0,
                                 weight_grad=0.5)
                           for _ in range(num_stages)])


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


#: Seconds a collective of stagecraft.torch waits for every rank of its
#: group to call it before it fails, naming the collective
#: (STAGECRAFT_COLLECTIVE_TIMEOUT in the environment sets it).
COLLECTIVE_TIMEOUT = float(os.environ.get("STAGECRAFT_COLLECTIVE_TIMEOUT",
                                          "30"))

#: Per group (its global ranks), how many guarded collectives this process
#: entered: every rank numbers them alike when every rank calls them.
_collectives_entered: dict[tuple[int, ...], int] = {}


def _group_ranks(group) -> tuple[int, ...]:
    if group is None or group is dist.group.WORLD:
        return tuple(range(dist.get_world_size()))
    return tuple(dist.get_process_group_ranks(group))


def _arrive(group, what: str, timeout: float | None = None) -> None:
    """Waits until every rank of `group` has entered the collective `what`
    (counted in the default store torch.distributed was initialized with),
    or raises ScheduleError within `timeout` seconds (default
    COLLECTIVE_TIMEOUT) saying that `what` is a collective and how many
    ranks called it. A call from a subset of ranks then fails in seconds
    instead of blocking until gloo's or NCCL's timeout."""
    if not dist.is_initialized():
        return
    ranks = _group_ranks(group)
    if len(ranks) == 1:
        return
    timeout = COLLECTIVE_TIMEOUT if timeout is None else timeout
    seq = _collectives_entered.get(ranks, 0)
    _collectives_entered[ranks] = seq + 1
    store = dist.distributed_c10d._get_default_store()
    key = "stagecraft/" + "-".join(map(str, ranks)) + f"/{seq}"
    count = store.add(key, 1)
    deadline = time.monotonic() + timeout
    while count < len(ranks):
        if time.monotonic() > deadline:
            # Withdrawn, so that the ranks number their next collectives
            # alike again.
            store.add(key, -1)
            _collectives_entered[ranks] = seq
            raise ScheduleError(
                f"{what} is a collective over the pipeline's process group "
                f"(ranks {list(ranks)}), but only {count} of its "
                f"{len(ranks)} ranks called it within {timeout:g} s (this is "
                f"rank {dist.get_rank()}): call it on every rank of the "
                "group; to plan on one rank, call stagecraft.torch.plan "
                "without group= there and stagecraft.torch.broadcast_plan "
                "on every rank")
        time.sleep(0.002)
        count = store.add(key, 0)


def plan(problem: Problem, kind: str = "auto", memory_limit: float | None = None,
         time_limit: float = 10.0, chunks: int = 0, group=None,
         recompute: str | None = None,
         objective: str = "makespan") -> Schedule:
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
    _check_kind(kind)
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
    _arrive(group, f"stagecraft.torch.plan(kind={kind!r}, group=...)")
    found, error = None, None
    if dist.get_rank(group) == 0:
        try:
            found = local()
        except ScheduleError as e:
            error = str(e)
    return _broadcast(found, error, _global_rank(group, 0), group)


def _global_rank(group, rank: int) -> int:
    if group is None or group is dist.group.WORLD:
        return rank
    return dist.get_global_rank(group, rank)


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


def _actions_with_comms(plan: Schedule) -> dict[int, list[Any]]:
    rows = plan.to_csv(comms=True).rstrip("\n").split("\n")
    actions = {}
    for rank, row in enumerate(rows):
        cells = [c for c in row.split(",") if c.strip()]
        actions[rank] = [_ts._Action.from_str(c) for c in cells]
    return actions


def _receives_early(order: list[Any]) -> list[Any]:
    """`order` (one rank's actions with communication) with every receive
    posted as early as it may be: right after the receive before it, so
    the receives keep their order (gloo and NCCL match a pair's messages in
    the order they were posted), and a backward's receive (RECV_B) not
    before its microbatch's forward on that stage, which creates the
    buffer it receives into. Posting is non-blocking; each compute still
    waits for its own receive where it did."""
    recv_f, recv_b = _ts._ComputationType.RECV_F, _ts._ComputationType.RECV_B
    forward = _ts._ComputationType.FORWARD
    out: list[Any] = []
    last = -1  # Where the previous receive now is.
    for a in order:
        if a.computation_type not in (recv_f, recv_b):
            out.append(a)
            continue
        at = last + 1
        if a.computation_type == recv_b:
            for i in range(len(out) - 1, at - 1, -1):
                b = out[i]
                if (b.computation_type == forward
                        and b.stage_index == a.stage_index
                        and b.microbatch_index == a.microbatch_index):
                    at = i + 1
                    break
        out.insert(at, a)
        last = at
    return out


def _message_order_mismatch(order: dict[int, list[Any]],
                            placement: list[int]) -> str | None:
    """Where the lowered `order` (every rank's actions with communication)
    would pair a message with the wrong receive, or None. torch's stages
    send and receive without tags, so gloo and NCCL match the messages
    from one rank to another in the order they were posted: the sender's
    sends to a rank must come in the order that rank posts its receives
    from the sender, or two messages of one shape silently swap. torch's
    lowering posts the receives in the order the messages are sent, and
    Stagecraft's sends in the order each receiver consumes; a plan whose
    consumer takes the microbatches in another order than its producer
    made them tests both."""
    t = _ts._ComputationType
    sent: dict[tuple[int, int], list[str]] = {}
    posted: dict[tuple[int, int], list[str]] = {}
    for rank, acts in order.items():
        for a in acts:
            s, k = a.stage_index, a.microbatch_index
            if a.computation_type == t.SEND_F:
                sent.setdefault((rank, placement[s + 1]), []).append(
                    f"{s}F{k} output")
            elif a.computation_type == t.SEND_B:
                sent.setdefault((rank, placement[s - 1]), []).append(
                    f"{s}'s input gradient of microbatch {k}")
            elif a.computation_type == t.RECV_F:
                posted.setdefault((placement[s - 1], rank), []).append(
                    f"{s - 1}F{k} output")
            elif a.computation_type == t.RECV_B:
                posted.setdefault((placement[s + 1], rank), []).append(
                    f"{s + 1}'s input gradient of microbatch {k}")
    for (src, dst), messages in sorted(sent.items()):
        receives = posted.get((src, dst), [])
        for i, (m, r) in enumerate(zip(messages, receives)):
            if m != r:
                return (f"rank {src}'s message {i} to rank {dst} is the {m}, "
                        f"but rank {dst}'s receive {i} from rank {src} waits "
                        f"for the {r}")
    return None


def _no_scope(*args, **kwargs):
    return contextlib.nullcontext()


@contextlib.contextmanager
def _without_idle_scopes(keep: bool = False):
    """torch's multi-stage runtime opens a profiler scope
    (`record_function`) and a CUDA-graph annotation (`mark_kernels`)
    around every action: 9-16 us an action on this machine with no
    profiler running and no graph captured, when both do nothing. While
    neither runs (asked once, at the step's start), the step runs without
    them; a step under a profiler or inside a capture keeps them."""
    capturing = (torch.cuda.is_initialized()
                 and torch.cuda.is_current_stream_capturing())
    if keep or torch._C._autograd._profiler_enabled() or capturing:
        yield
        return
    saved = _ts.record_function, _ts.mark_kernels
    _ts.record_function = _ts.mark_kernels = _no_scope
    try:
        yield
    finally:
        _ts.record_function, _ts.mark_kernels = saved


#: `lowering="auto"`'s trial: single steps of each candidate in turn that
#: warm the runner up uncounted (a runner's first steps run slower,
#: unevenly), then TRIAL_ROUNDS rounds in which each candidate runs
#: TRIAL_BLOCK consecutive steps, the first of them uncounted: a step
#: leaves work behind it (gloo's transport threads still sending), which
#: the next step pays for, so a candidate is timed after steps of its own,
#: as a training loop runs it.
TRIAL_WARMUP = 4
TRIAL_BLOCK = 3
TRIAL_ROUNDS = 5
#: The measured steps of each candidate.
TRIAL_STEPS = TRIAL_ROUNDS * (TRIAL_BLOCK - 1)
#: Steps from a runner's first to the end of a trial of two candidates.
TRIAL_LENGTH = 2 * (TRIAL_WARMUP + TRIAL_ROUNDS * TRIAL_BLOCK)


class _LoweringTrial:
    """`lowering="auto"`'s measured choice between candidates (a lowering
    and a transport) of one plan: `warmup` rounds of one uncounted step of
    each, then `rounds` rounds of `block` consecutive steps of each, the
    first step of a block uncounted; the candidates take turns, their
    order reversed every round (a b, b a, ...) so that neither always
    runs after the other. Every step trains: the candidates differ only in
    when the messages are posted and how gloo's threads share the core."""

    def __init__(self, names: list[str], rounds: int = TRIAL_ROUNDS,
                 block: int = TRIAL_BLOCK, warmup: int = TRIAL_WARMUP):
        self.names = names
        #: The steps in trial order: (candidate, counted).
        self._order: list[tuple[str, bool]] = []
        for k in range(warmup):
            self._order += [(n, False) for n in
                            (names if k % 2 == 0 else names[::-1])]
        for k in range(rounds):
            for n in (names if (warmup + k) % 2 == 0 else names[::-1]):
                self._order += [(n, j > 0) for j in range(block)]
        self._at = 0
        self.times: dict[str, list[float]] = {n: [] for n in names}

    def next(self) -> str:
        return self._order[self._at][0]

    def record(self, name: str, seconds: float) -> None:
        if self._order[self._at][1]:
            self.times[name].append(seconds)
        self._at += 1

    def finished(self) -> bool:
        return self._at == len(self._order)

    def medians(self) -> list[float]:
        return [statistics.median(self.times[n]) for n in self.names]


def _faster_lowering(slowest: dict[str, float]) -> str:
    """The lowering with the shortest step (slowest rank's median); a tie
    goes to the first tried."""
    return min(slowest, key=slowest.get)


#: The `transport`s `schedule` takes.
TRANSPORTS = ("auto", "quiet", "shared")


def _check_choice(option: str, value: str, allowed: tuple) -> None:
    if value not in allowed:
        raise ScheduleError(f"{option}={value!r}: expected one of "
                            + ", ".join(repr(x) for x in allowed))


def _quiet_blocker(tids: list[int], group) -> str | None:
    """Why this rank cannot run the quiet transport for `group`, or None."""
    if group is not None and dist.is_initialized() and \
            dist.get_backend(group) != "gloo":
        return (f"the pipeline's process group runs on "
                f"{dist.get_backend(group)}, not gloo")
    if not tids:
        return "this process has no gloo transport thread to quiet"
    if not _torch_transport.restorable(tids):
        return ("this process may not restore its gloo transport threads' "
                "priority after a step (it needs CAP_SYS_NICE or a "
                "RLIMIT_NICE of 20)")
    return None


def _transports(transport: str, blocker: str | None) -> list[str]:
    """The transports `transport` lets run, in trial order: "quiet" only
    where nothing blocks it (`_quiet_blocker`, agreed by every rank);
    "auto" tries both there."""
    _check_choice("transport", transport, TRANSPORTS)
    if transport == "quiet" and blocker is not None:
        raise ScheduleError(f"transport='quiet': {blocker}; use "
                            "transport='shared'")
    if transport == "auto":
        return ["shared"] if blocker is not None else ["shared", "quiet"]
    return [transport]


def _candidate_name(lowering: str, transport: str) -> str:
    """A trial candidate's name: the lowering, "+quiet" with the quiet
    transport ("early", "torch+quiet")."""
    return lowering + ("+quiet" if transport == "quiet" else "")


class _CandidateRunner:
    """What Stagecraft's runners of torch's schedules share: the candidates
    that may run a step (a lowering and a transport, `_candidate_name`),
    `lowering="auto"`'s trial of them, the quiet transport, and the step
    without torch's idle profiler scopes. Mixed in before one of torch's
    schedule classes; `_use_lowering` loads a lowering."""

    def _init_candidates(self, stage, lowerings: list[str],
                         transport: str) -> None:
        # gloo's transport threads, and the transports that may run: the
        # quiet one only where no rank is blocked from it (the ranks
        # agree, so that every rank tries the same candidates).
        self._transport_tids = _torch_transport.transport_threads()
        blocker = _quiet_blocker(self._transport_tids, stage.group)
        if transport != "shared" and dist.is_initialized():
            blocked = torch.tensor([float(blocker is not None)],
                                   device=stage.device)
            dist.all_reduce(blocked, op=dist.ReduceOp.MAX, group=stage.group)
            if blocked.item() and blocker is None:
                blocker = "another rank of the pipeline cannot quiet its own"
        transports = _transports(transport, blocker)
        self._trial_stage = stage
        #: Every (lowering, transport) that may run, by its trial name.
        self._candidates = {_candidate_name(low, t): (low, t)
                            for low in lowerings for t in transports}
        names = list(self._candidates)
        self._use(names[0])
        #: The lowering and the transport that run ("shared": gloo's
        #: transport threads as torch leaves them; "quiet": at idle
        #: priority during each step): None while "auto"'s trial runs.
        self.stagecraft_lowering: str | None = None
        self.stagecraft_transport: str | None = None
        #: Per candidate tried (a lowering, "+quiet" with the quiet
        #: transport), the slowest rank's median step ms.
        self.stagecraft_lowering_ms: dict[str, float] = {}
        self._trial = _LoweringTrial(names) if len(names) > 1 else None
        self._said_quiet = False
        self._rank = stage.group_rank
        if self._trial is None:
            self._keep(names[0])
            logger.info("rank %d: runs lowering %r with transport %r (no "
                        "trial)", self._rank, *self._candidates[names[0]])
        else:
            logger.info(
                "rank %d: trial of %d candidates (%s) over the next %d "
                "training steps (%d measured of each; forward-only steps "
                "do not count)%s", self._rank, len(names), ", ".join(names),
                len(self._trial._order), TRIAL_STEPS,
                "" if transport == "shared" else
                "; the +quiet candidates set gloo's transport threads to "
                "idle priority (SCHED_IDLE) during their steps")
            if blocker is not None and transport == "auto":
                logger.info("rank %d: no quiet transport: %s", self._rank,
                            blocker)
        # True keeps torch's idle profiler scopes (a benchmark's control).
        self._keep_scopes = False

    def _use_lowering(self, lowering: str) -> None:
        """Loads `lowering` for the next step (none to load: the class's
        own step loop posts its messages)."""

    def _use(self, name: str) -> None:
        """Runs the candidate `name` from the next step on."""
        lowering, transport = self._candidates[name]
        self._use_lowering(lowering)
        self._quiet = transport == "quiet"

    def _keep(self, name: str) -> None:
        """Runs the candidate `name` from now on, and says so (here and in
        the plan, which a saved plan then carries)."""
        self._use(name)
        self.stagecraft_lowering, self.stagecraft_transport = \
            self._candidates[name]
        self.stagecraft_plan.lowering = self.stagecraft_lowering
        self.stagecraft_plan.transport = self.stagecraft_transport

    def _step_microbatches(self, *args, **kwargs):
        # A forward-only step (`eval`) is no trial step: it runs the
        # candidate now loaded.
        trial = self._trial if self._has_backward else None
        if trial is not None:
            name = trial.next()
            self._use(name)
        if self._quiet and not self._said_quiet:
            self._said_quiet = True
            logger.info("rank %d: gloo's transport threads %s run at idle "
                        "priority (SCHED_IDLE) during each step of the quiet "
                        "transport, restored after it", self._rank,
                        self._transport_tids)
        start = time.perf_counter()
        with _without_idle_scopes(self._keep_scopes), \
                _torch_transport.quiet(
                    self._transport_tids if self._quiet else []):
            out = super()._step_microbatches(*args, **kwargs)
        if trial is not None:
            trial.record(name, time.perf_counter() - start)
            if trial.finished():
                self._keep_faster(trial)
        return out

    def _keep_faster(self, trial: "_LoweringTrial") -> None:
        """Every rank keeps the candidate whose slowest rank's median step
        is the shortest (the ranks agree through one all_reduce)."""
        stage = self._trial_stage
        mine = torch.tensor(trial.medians(), dtype=torch.float64,
                            device=stage.device)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=stage.group)
        slowest = dict(zip(trial.names, mine.tolist()))
        self.stagecraft_lowering_ms = {n: 1e3 * t for n, t in slowest.items()}
        kept = _faster_lowering(slowest)
        self._keep(kept)
        self._trial = None
        logger.info(
            "rank %d: trial done after %d steps; median step of the slowest "
            "rank: %s; kept %s (lowering %r, transport %r)", self._rank,
            len(trial._order),
            ", ".join(f"{n} {ms:.3f} ms" for n, ms in
                      self.stagecraft_lowering_ms.items()),
            kept, self.stagecraft_lowering, self.stagecraft_transport)


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
            # Stagecraft's CSV already retires each send (WAIT_SEND_F/B);
            # torch's runtime also wants each stage's gradient reduction
            # after its last backward, which torch's own pass inserts
            # without moving anything.
            with_comms = {r: _ts._add_reduce_grad(acts, n_microbatches)
                          for r, acts in _actions_with_comms(
                              self.stagecraft_plan).items()}
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
    stagecraft._torch_transport). "quiet": at idle
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
        plan = globals()["plan"](problem, kind=kind or "auto",
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


#: The `lowering`s `schedule` takes.
LOWERINGS = ("auto", "early", "torch", "stagecraft")


def _runtime_for(plan: Schedule, lowering: str, options: bool = False):
    """torch's single-stage class whose own step loop runs `plan`, where
    the plan has its order and `lowering` lets it ("torch": GPipe or 1F1B;
    "auto": 1F1B, since GPipe's order runs faster with early receives),
    or None: the multi-stage runtime. `options`: extra runtime options
    were given, which only the multi-stage runtime takes."""
    if lowering not in ("auto", "torch") or options:
        return None
    single = _single_stage_class(plan)
    if lowering == "auto" and single is not _ts.Schedule1F1B:
        return None
    return single


def _single_stage_order(kind: str, stage: int, num_stages: int,
                        n_mb: int) -> list[str]:
    """The compute order torch's single-stage GPipe or 1F1B runs on the
    rank of `stage`: all forwards then all backwards, or min(n_mb,
    num_stages - stage) forwards, then a backward and a forward in turn,
    then the remaining backwards."""
    f = [f"{stage}F{k}" for k in range(n_mb)]
    b = [f"{stage}B{k}" for k in range(n_mb)]
    if kind == "gpipe":
        return f + b
    warmup = min(n_mb, num_stages - stage)
    order = f[:warmup]
    for k in range(n_mb - warmup):
        order += [b[k], f[warmup + k]]
    return order + b[n_mb - warmup:]


def _single_stage_class(plan: Schedule):
    """torch's single-stage schedule class whose order the plan has on every
    rank (one stage per rank, stage r on rank r), or None."""
    p = plan.problem
    num_stages, n_mb = len(p.stages), p.microbatches
    if num_stages != plan.num_ranks or list(plan.placement) != list(
            range(num_stages)) or n_mb < num_stages:
        return None
    for kind, cls in (("1f1b", _ts.Schedule1F1B), ("gpipe", _ts.ScheduleGPipe)):
        if all(list(plan.actions(r)) ==
               _single_stage_order(kind, r, num_stages, n_mb)
               for r in range(num_stages)):
            return cls
    return None


#: torch's compute actions; the rest of a pipeline_order (REDUCE_GRAD,
#: UNSHARD, RESHARD, and SEND_/RECV_ in lowered orders) is not checked.
_COMPUTE_TYPES = {getattr(_ts._ComputationType, name)
                  for name in ("FORWARD", "BACKWARD_INPUT", "BACKWARD_WEIGHT",
                               "FULL_BACKWARD", "OVERLAP_F_B")
                  if hasattr(_ts._ComputationType, name)}


def _is_compute(action) -> bool:
    return action is not None and (bool(action.sub_actions) or
                                   action.computation_type in _COMPUTE_TYPES)


def check(torch_schedule, problem: Problem | None = None) -> Schedule:
    """Verifies and simulates one of torch's own schedule objects.

    Reads its per-rank compute order (`pipeline_order`) and checks it with
    Stagecraft: every action once, dependencies, deadlock freedom; returns
    the simulated Schedule (makespan, bubble ratio, peak memory per rank)
    under `problem`'s costs (default: uniform). Raises ScheduleError with
    the verifier's message otherwise. The single-stage GPipe and 1F1B are
    read as their step loop runs them (`_single_stage_order`): their
    `pipeline_order`, which torch only prints, can differ (torch's 1F1B
    lists 1F1 ... 1F8 for rank 1 of 2 with 8 microbatches, never 1F0).
    """
    # (isinstance: Stagecraft's runners of these classes are subclasses.)
    single = next((kind for cls, kind in ((_ts.ScheduleGPipe, "gpipe"),
                                          (_ts.Schedule1F1B, "1f1b"))
                   if isinstance(torch_schedule, cls)), None)
    name = type(torch_schedule).__name__
    if single is not None:
        ranks, n_mb = torch_schedule._num_stages, torch_schedule._n_microbatches
        stage = getattr(torch_schedule, "_stage", None)
        if stage is not None and \
                getattr(stage, "group_rank", None) is not None and \
                stage.stage_index != stage.group_rank:
            raise ScheduleError(
                f"{name} runs stage r on rank r, but rank "
                f"{stage.group_rank}'s PipelineStage is stage "
                f"{stage.stage_index}")
        if problem is None:
            problem = _uniform_problem(ranks, ranks, n_mb)
        rows = [",".join(_single_stage_order(single, r, ranks, n_mb))
                for r in range(ranks)]
        return _named(from_csv(problem, "\n".join(rows) + "\n"),
                      torch_schedule)
    order = getattr(torch_schedule, "pipeline_order", None)
    if not order:
        # Single-stage schedules (GPipe, 1F1B) build no order: torch's
        # multi-stage equivalents with one stage per rank have the same one.
        raise ScheduleError(
            f"{type(torch_schedule).__name__} has no per-rank action order "
            "(pipeline_order) to check")
    ranks = len(order)
    stage_ids = {a.stage_index for acts in order.values() for a in acts
                 if _is_compute(a) and a.sub_actions is None}
    stage_ids |= {s.stage_index for acts in order.values() for a in acts
                  if a is not None and a.sub_actions for s in a.sub_actions}
    n_mb = torch_schedule._n_microbatches
    if problem is None:
        problem = _uniform_problem(max(stage_ids) + 1, ranks, n_mb)
    _check_placement(torch_schedule, order)
    rows = []
    for r in range(ranks):
        rows.append(",".join(str(a) for a in order[r] if _is_compute(a)))
    return _named(from_csv(problem, "\n".join(rows) + "\n"), torch_schedule)


def _named(found: Schedule, torch_schedule) -> Schedule:
    """`found`, named after torch's class it was read from."""
    return found._with_origin(type(torch_schedule).__name__, "", 0.0, 0.0)


def _stages_on(order, rank: int) -> list[int]:
    out: set[int] = set()
    for a in order.get(rank, []):
        if a is None:
            continue
        if a.sub_actions:
            out |= {x.stage_index for x in a.sub_actions}
        elif _is_compute(a):
            out.add(a.stage_index)
    return sorted(out)


def _check_placement(torch_schedule, order) -> None:
    """Raises ScheduleError when the stages this rank gave torch's class
    are not the ones its order runs here (its placement: loop for the
    interleaved classes, V for ZBVZeroBubble and DualPipeV): built so, the
    class would wait for messages no rank sends."""
    stages = getattr(torch_schedule, "_stages", None)
    rank = getattr(torch_schedule, "rank", None)
    if not stages or rank is None:
        return
    have = sorted(st.stage_index for st in stages)
    want = _stages_on(order, rank)
    if have != want:
        raise ScheduleError(
            f"{type(torch_schedule).__name__} runs stages {want} on rank "
            f"{rank} (its placement), but this rank's PipelineStages are "
            f"{have}: build the stages the class places here")


def _now() -> float:
    """perf_counter once the device's queued work is done."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def _profile_stage(index: int, module: torch.nn.Module, args: tuple,
                   warmup: int, repeats: int) -> tuple[Stage, dict]:
    """Stage `index`'s F, I, W and fused B, timed as torch's runtime runs
    them: a forward, then torch's own `stage_backward_input` and
    `stage_backward_weight` on the graph it retains (I, then W; a first
    stage, whose inputs take no gradient, has no I there and its whole
    backward is its W, as torch's PipelineStage runs it), and, after
    another forward, one backward for the inputs and the weights together
    (B). Repeats interleave the four, after `warmup` rounds; each figure is
    the median, and the spread (min, max) comes back beside it. The
    module's gradients are as they were afterwards."""
    from torch.distributed.pipelining._backward import (stage_backward_input,
                                                        stage_backward_weight)
    params = [p for p in module.parameters() if p.requires_grad]
    kept = [p.grad for p in params]

    def inputs():
        return tuple(a.detach().requires_grad_(a.is_floating_point())
                     for a in args)

    samples: dict[str, list[float]] = {"F": [], "I": [], "W": [], "B": []}

    def once(record: bool) -> None:
        xs = inputs()
        wanted = [a for a in xs if a.requires_grad]
        t0 = _now()
        o = module(*xs)
        t1 = _now()
        if wanted:
            _, groups = stage_backward_input([o], [grad_out], wanted,
                                             iter(params))
            t2 = _now()
            stage_backward_weight(iter(params), groups)
        else:
            # The first stage: torch's runtime skips its input backward and
            # runs the whole backward as its W.
            t2 = _now()
            torch.autograd.backward([o], [grad_out], inputs=params or None)
        t3 = _now()
        xs = inputs()
        o = module(*xs)
        t4 = _now()
        torch.autograd.backward(
            [o], [grad_out],
            inputs=[a for a in xs if a.requires_grad] + params or None)
        t5 = _now()
        if record:
            for key, seconds in (("F", t1 - t0), ("I", t2 - t1),
                                 ("W", t3 - t2), ("B", t5 - t4)):
                samples[key].append(seconds * 1e3)

    try:
        # Memory, counted as activation_memory counts it in real steps:
        # what the forward saves for backward (once per storage, weights
        # left out) plus its output, and what torch's split backward still
        # holds after its I for the W (the graph it retains; all of it on a
        # first stage).
        counted = SavedBytes(params)
        xs = inputs()
        wanted = [a for a in xs if a.requires_grad]
        with counted:
            out = module(*xs)
        output = float(out.numel() * out.element_size())
        activation = float(counted.live) + output
        grad_out = torch.ones_like(out)
        held_for_w = float(counted.live)
        if wanted:
            _, groups = stage_backward_input([out], [grad_out], wanted,
                                             iter(params))
            held_for_w = float(counted.live)
            stage_backward_weight(iter(params), groups)
        del out, xs, wanted
        for _ in range(warmup):
            once(False)
        for _ in range(repeats):
            once(True)
        # A figure at or below zero is no measurement: time again, more.
        for _ in range(2):
            if all(statistics.median(v) > 0 for v in samples.values()):
                break
            for _ in range(2 * repeats):
                once(True)
    finally:
        for p, g in zip(params, kept):
            p.grad = g
    figures = {k: (statistics.median(v), min(v), max(v))
               for k, v in samples.items()}
    for key, (median, _, _) in figures.items():
        if not median > 0:
            raise ScheduleError(
                f"stage {index}: its {key} measured {median} ms after "
                f"{len(samples[key])} runs; a cost must be above zero")
    stage = Stage(forward=figures["F"][0], backward_input=figures["I"][0],
                  backward_weight=figures["W"][0],
                  fused_backward=figures["B"][0],
                  activation=activation / 2**20,
                  weight_grad=held_for_w / 2**20)
    stage.output = output / 2**20
    return stage, figures


def _measure_link(group, sizes=(4096, 262144, 4194304), repeats=10):
    """The link between ranks 0 and 1 of `group`: the one-way time of a
    message of each size in bytes (half a ping-pong's round trip, the
    fastest of `repeats` after one warm-up: single round trips here stall
    by up to 4 ms when a process is descheduled, at every size, which a
    median of 5 did not always hide). The bandwidth is the slope between
    the two largest sizes, the latency what the smallest message takes
    beyond its bytes over that bandwidth (a least-squares intercept swung
    from 0 to 0.9 ms between launches). Returns (latency ms, bandwidth MiB
    per ms), every rank the same (collective); None with one rank, or when
    the time does not grow with the size."""
    world = dist.get_world_size(group)
    if world < 2:
        return None
    rank = dist.get_rank(group)

    def global_rank(r):
        return dist.get_global_rank(group, r) if group is not None else r

    figures = torch.zeros(2, dtype=torch.float64)
    if rank in (0, 1):
        peer = global_rank(1 - rank)
        x, t = [], []
        for size in sizes:
            buf = torch.zeros(size // 4)
            samples = []
            for k in range(repeats + 1):
                t0 = time.perf_counter()
                if rank == 0:
                    dist.send(buf, peer, group=group)
                    dist.recv(buf, peer, group=group)
                else:
                    dist.recv(buf, peer, group=group)
                    dist.send(buf, peer, group=group)
                if k:
                    samples.append((time.perf_counter() - t0) * 1e3 / 2)
            x.append(size / 2**20)
            t.append(min(samples))
        slope = (t[-1] - t[-2]) / (x[-1] - x[-2])
        if slope > 0:
            figures = torch.tensor([max(0.0, t[0] - slope * x[0]),
                                    1.0 / slope], dtype=torch.float64)
    dist.broadcast(figures, src=global_rank(0), group=group)
    return (float(figures[0]), float(figures[1])) if figures[1] > 0 \
        else None


def profile(stages: list, example_inputs: dict[int, tuple] | Callable[[int], tuple],
            n_microbatches: int, warmup: int = 2, repeats: int = 5,
            group=None, spread: dict | None = None,
            link: bool = True) -> Problem:
    """Measures this rank's stages and gathers every rank's into a Problem.

    For each PipelineStage here, timed through the functions torch's
    runtime runs (see `_profile_stage`): the median over `repeats`
    interleaved runs (after `warmup` runs) of its forward, of torch's
    backward for the input and, on the graph that keeps, of its backward
    for the weights, in milliseconds on the current device, and the
    activation memory its forward keeps for the backward (saved tensors and
    output, in MiB, counted as `activation_memory` counts real steps;
    `weight_grad`: what torch's split backward still holds after the I for
    the W, measured), and its fused backward B
    (`fused_backward`: the kinds that fuse the backward pay it, the split
    kinds I + W, so `auto` weighs the split against what it costs here).
    No figure is zero: a stage whose figure
    stays at or below zero after timing again raises ScheduleError naming
    it. `example_inputs[i]` (or
    `example_inputs(i)`) is one microbatch's input tuple of stage i.
    Collective over the stages' process group: every rank must call it.
    `spread`, when given, receives per stage index and figure ("F", "I",
    "W" and the fused backward "B") its (median, min, max) in ms over the
    repeats, this rank's stages only. Each stage's `output` is its
    output's size in MiB. With `link` (the default) and two ranks or
    more, the link between ranks 0 and 1 is measured too (ping-pong of 4
    KiB, 256 KiB and 4 MiB: latency + MiB / bandwidth, `_measure_link`)
    and set as the problem's `links` (one node) and `latency`;
    `calibrate` keeps its bandwidth and fits its latency.
    """
    mine = {}
    for st in stages:
        args = (example_inputs(st.stage_index) if callable(example_inputs)
                else example_inputs[st.stage_index])
        if not isinstance(args, tuple):
            args = (args,)
        measured, figures = _profile_stage(st.stage_index, st.submod, args,
                                           warmup, repeats)
        if spread is not None:
            spread[st.stage_index] = figures
        mine[st.stage_index] = (measured.forward, measured.backward_input,
                                measured.backward_weight, measured.activation,
                                measured.weight_grad, measured.fused_backward,
                                measured.output)
    group = group or stages[0].group
    ranks = dist.get_world_size(group)
    gathered: list[dict] = [None] * ranks  # type: ignore[list-item]
    dist.all_gather_object(gathered, mine, group=group)
    merged = {}
    for part in gathered:
        merged.update(part)
    num_stages = stages[0].num_stages
    if sorted(merged) != list(range(num_stages)):
        raise ScheduleError(f"profiled stages {sorted(merged)} but the pipeline "
                            f"has {num_stages}")
    profiled = []
    for f, i, w, a, g, b, out in (merged[s] for s in range(num_stages)):
        profiled.append(Stage(forward=f, backward_input=i, backward_weight=w,
                              activation=a, weight_grad=g, fused_backward=b))
        profiled[-1].output = out
    problem = Problem(ranks=ranks, microbatches=n_microbatches,
                      name="profiled", stages=profiled)
    measured_link = _measure_link(group) if link else None
    if measured_link is not None:
        latency, bandwidth = measured_link
        problem.latency = latency
        problem.links = (ranks, (latency, bandwidth), (latency, bandwidth))
    return problem
