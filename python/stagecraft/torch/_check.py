"""`check`: one of torch's own schedule objects read, verified and
simulated by Stagecraft; the single-stage classes' orders as their step
loops run them."""

from __future__ import annotations

from torch.distributed.pipelining import schedules as _ts

from .. import Problem, Schedule, ScheduleError, Stage, from_csv


def _uniform_problem(num_stages: int, ranks: int, n_microbatches: int) -> Problem:
    return Problem(ranks=ranks, microbatches=n_microbatches,
                   stages=[Stage(forward=1.0, backward_input=1.0,
                                 backward_weight=1.0, activation=1.0,
                                 weight_grad=0.5)
                           for _ in range(num_stages)])


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
