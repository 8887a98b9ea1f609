"""Plans as files, and pickling of the library's objects.

A plan file is one JSON object, `{"format": "stagecraft-plan", "version": 1,
...}`: the problem with every field (the problem JSON `Problem.to_json`
writes), the schedule as torch's CSV (with its SEND_/RECV_ cells where it
came with them), the recomputation table, what the planner said of it (its
kind, auto's choice and bounds, the microbatch order, the objective), the
lowering and transport a `stagecraft.torch` runner's trial kept for it, and
its simulated figures. Loading rebuilds the schedule from the CSV (verified
and simulated again) and refuses a file whose schedule no longer simulates
to the figures it was saved with, so a plan file means one schedule.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ._core import (Problem, Schedule, ScheduleError, Stage, from_csv,
                    problem_from_json)

FORMAT, VERSION = "stagecraft-plan", 1


def plan_to_json(plan: Schedule) -> str:
    """`plan` as the text of a plan file (see the module's docstring)."""
    table = plan.recompute
    try:
        schedule = plan.to_csv(comms=plan.has_communication)
    except ScheduleError as e:
        raise ScheduleError(f"cannot save this {plan.kind} plan: the plan "
                            f"file holds the schedule as torch's CSV: {e}") \
            from None
    state = {
        "format": FORMAT,
        "version": VERSION,
        "problem": json.loads(plan.problem.to_json()),
        "kind": plan.kind,
        "choice": plan.choice,
        "lower_bound": plan.lower_bound,
        "memory_aware_bound": plan.memory_aware_bound,
        "span_bound": plan.span_bound,
        "objective": plan.objective,
        "microbatch_order": list(plan.microbatch_order),
        "schedule": schedule,
        "recompute": [list(row) for row in table],
        "lowering": plan.lowering,
        "transport": plan.transport,
        "simulated": {"makespan": plan.makespan,
                      "peak_memory": list(plan.peak_memory)},
    }
    return json.dumps(state, indent=1) + "\n"


def _field(state: dict, key: str, kind: Any, where: str) -> Any:
    if key not in state:
        raise ScheduleError(f"{where}: key \"{key}\" missing")
    value = state[key]
    if not isinstance(value, kind) or isinstance(value, bool) and \
            kind is not bool:
        raise ScheduleError(f"{where}: key \"{key}\" has the wrong type "
                            f"({type(value).__name__})")
    return value


def plan_from_json(text: str, where: str = "plan JSON") -> Schedule:
    """The plan a plan file holds, verified and simulated again; raises
    ScheduleError naming what is wrong (not a plan file, another version,
    a missing or unknown key, a schedule that does not fit the problem or
    no longer simulates to the saved figures)."""
    try:
        state = json.loads(text)
    except ValueError as e:
        raise ScheduleError(f"{where}: not JSON ({e})") from None
    if not isinstance(state, dict):
        raise ScheduleError(f"{where}: not a JSON object")
    if state.get("format") != FORMAT:
        raise ScheduleError(f"{where}: \"format\" is not \"{FORMAT}\"")
    if state.get("version") != VERSION:
        raise ScheduleError(f"{where}: version {state.get('version')!r} is "
                            f"not {VERSION}")
    known = {"format", "version", "problem", "kind", "choice", "lower_bound",
             "memory_aware_bound", "span_bound", "objective",
             "microbatch_order", "schedule", "recompute", "lowering",
             "transport", "simulated"}
    unknown = sorted(set(state) - known)
    if unknown:
        raise ScheduleError(f"{where}: key \"{unknown[0]}\" unknown")
    number = (int, float)
    try:
        problem = problem_from_json(json.dumps(_field(state, "problem", dict,
                                                      where)))
        plan = from_csv(problem, _field(state, "schedule", str, where))
        table = _field(state, "recompute", list, where)
        if any(cell != "none" for row in table for cell in row):
            plan = plan.with_recompute(table)
    except ScheduleError as e:
        message = str(e)
        if message.startswith(where):
            raise
        raise ScheduleError(f"{where}: {message}") from None
    plan = plan._with_origin(
        _field(state, "kind", str, where), _field(state, "choice", str, where),
        float(_field(state, "lower_bound", number, where)),
        float(_field(state, "memory_aware_bound", number, where)),
        span_bound=float(_field(state, "span_bound", number, where)),
        microbatch_order=_field(state, "microbatch_order", list, where),
        objective=_field(state, "objective", str, where))
    for key in ("lowering", "transport"):
        value = state.get(key)
        if value is not None and not isinstance(value, str):
            raise ScheduleError(f"{where}: key \"{key}\" has the wrong type "
                                f"({type(value).__name__})")
        setattr(plan, key, value)
    saved = _field(state, "simulated", dict, where)
    if saved.get("makespan") != plan.makespan or \
            saved.get("peak_memory") != list(plan.peak_memory):
        raise ScheduleError(
            f"{where}: the schedule simulates to makespan {plan.makespan} "
            f"and peak memory {list(plan.peak_memory)}, but the file was "
            f"saved with makespan {saved.get('makespan')} and peak memory "
            f"{saved.get('peak_memory')} (written by another version of "
            "Stagecraft, or edited)")
    return plan


def save_plan(plan: Schedule, path: str | os.PathLike) -> None:
    """Writes `plan` to the plan file `path` (`load_plan` reads it)."""
    text = plan_to_json(plan)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def load_plan(path: str | os.PathLike) -> Schedule:
    """The plan in the plan file `path` (written by `Schedule.save`): the
    same schedule, simulated figures, CSV, choice and bounds, and the
    lowering and transport a stagecraft.torch trial kept for it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ScheduleError(f"cannot read plan file {os.fspath(path)}: "
                            f"{e.strerror}") from None
    return plan_from_json(text, where=f"plan file {os.fspath(path)}")


#: Stage's fields, as its constructor and attributes name them.
_STAGE_FIELDS = ("name", "forward", "backward_input", "backward_weight",
                 "activation", "weight_grad", "rank", "forward_backward",
                 "fused_backward", "output", "recomputed", "layers", "params",
                 "selective", "selective_cost", "scaling_linear",
                 "scaling_quadratic", "inputs")


def _problem_from_json(text: str) -> Problem:
    # What pickle calls: a Python function, which it can name.
    return problem_from_json(text)


def _stage_from_state(state: dict) -> Stage:
    stage = Stage()
    for key, value in state.items():
        setattr(stage, key, value)
    return stage


def _install() -> None:
    """Methods the bound classes gain here: `Schedule.save`,
    `Schedule.to_json`, and pickling of Schedule, Problem and Stage
    (through the plan file and the problem JSON, so a pickled plan is the
    same plan)."""
    Schedule.save = save_plan
    Schedule.to_json = plan_to_json
    Schedule.__reduce__ = lambda self: (plan_from_json, (plan_to_json(self),))
    Problem.__reduce__ = lambda self: (_problem_from_json, (self.to_json(),))
    Stage.__reduce__ = lambda self: (
        _stage_from_state, ({k: getattr(self, k) for k in _STAGE_FIELDS},))
