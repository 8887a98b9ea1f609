"""Stagecraft: schedules for pipeline-parallel training.

    import stagecraft as sc
    p = sc.Problem(ranks=4, microbatches=8,
                   stages=[sc.Stage(forward=1.0, backward_input=1.0,
                                    backward_weight=0.5, activation=1.0,
                                    weight_grad=0.5) for _ in range(8)])
    s = sc.schedule(p, kind="zb-v")
    print(s.makespan, s.bubble_ratio, s.peak_memory, s.placement)
    print(s.actions(0))       # torch's spelling: 0F0, 8I3, ...
    print(s.to_csv())         # torch.distributed.pipelining CSV
    print(s.summary())        # what stagecraft-translate --pipe-to-summary prints
    one = sc.schedule(p, policy=sc.Policy.from_file("1f1b.policy"))
    s.save("plan.json")       # the plan as a file; sc.load_plan reads it back

Every function calls the C++ library the command-line tools use; every
error raises `ScheduleError` (a `ValueError`) with the library's message.
`stagecraft.torch` runs these schedules in torch.distributed.pipelining.
The package needs no LLVM or MLIR; `load` reads `.mlir` specs through
`stagecraft-translate` (see its docstring).
"""

import os
import shutil
import subprocess
import warnings
from typing import Optional

from ._core import (
    Policy,
    Problem,
    Schedule,
    ScheduleError,
    Stage,
    __version__,
    default_memory_limit,
    from_csv,
    kinds,
    partition_layers,
    stages_from_partition,
    plan_data_parallel,
    problem_from_json,
    data_parallel_from_json,
)
from ._core import schedule as _schedule
from ._policy import search_policy
from ._plan_file import _install as _install_plan_file
from ._plan_file import load_plan, plan_from_json

_install_plan_file()


def _translate_tool() -> str:
    tool = os.environ.get("STAGECRAFT_TRANSLATE") or shutil.which(
        "stagecraft-translate")
    if not tool:
        raise ScheduleError(
            "stagecraft.load reads .mlir specs with the pipe dialect, which "
            "this package does not carry: put stagecraft-translate (built "
            "with the C++ tools, e.g. build/bin after bash scripts/build.sh) "
            "on PATH, or name it in the STAGECRAFT_TRANSLATE environment "
            "variable; everything else (Problem, schedule, CSV both ways, "
            "stagecraft.torch) works without it")
    return tool


def load(path: str, pipeline: Optional[str] = None) -> Problem:
    """The Problem of a `.mlir` spec, parsed and verified by the pipe dialect.

    Runs `stagecraft-translate --pipe-to-problem` (from STAGECRAFT_TRANSLATE,
    else PATH) and reads its JSON; the dialect's located diagnostics come back
    as the ScheduleError's message. `pipeline` picks one of several."""
    return problem_from_json(_problem_json(path, pipeline))


def load_data_parallel(path: str,
                       pipeline: Optional[str] = None) -> Optional[dict]:
    """The data parallelism around a `.mlir` spec's pipeline
    (`data_parallel(...)` and each stage's `gradient(X)`), as keyword
    arguments of `plan_data_parallel` (and `stagecraft.torch.plan`'s
    `data_parallel`); None when the spec has none. As `load`."""
    return data_parallel_from_json(_problem_json(path, pipeline))


def _problem_json(path: str, pipeline: Optional[str]) -> str:
    """What `stagecraft-translate --pipe-to-problem` writes for the spec."""
    command = [_translate_tool(), "--pipe-to-problem", os.fspath(path)]
    if pipeline is not None:
        command.append(f"--pipeline-name={pipeline}")
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except OSError as e:
        raise ScheduleError(f"cannot run {command[0]}: {e}") from None
    if done.returncode != 0:
        raise ScheduleError(done.stderr.strip() or
                            f"{command[0]} failed with exit {done.returncode}")
    if done.stderr.strip():
        # The dialect's warnings (what the JSON leaves out) reach the caller.
        warnings.warn(done.stderr.strip(), stacklevel=3)
    return done.stdout



def schedule(problem: Problem, kind: str = "1f1b", *args,
             policy: "Policy | str | None" = None,
             params: Optional[dict] = None, **kwargs) -> Schedule:
    """`--pipe-schedule`: the problem scheduled as `kind` (see
    `_core.schedule`'s options), or, with `policy` (a `Policy` or its
    text) and no kind, as that policy instantiates it with `params`
    (parameter values by name; kind 'policy', its choice the policy's name
    and parameter values). With kind='policy-search', the policy's
    parameters not in `params` are searched within the memory limit; with
    kind='auto', the policy (its `params` held) is one of auto's
    candidates, beside the library's and any in `policies=`."""
    if params is not None and policy is None:
        raise ScheduleError("params= sets a policy's parameters: give "
                            "policy= too")
    if policy is None:
        return _schedule(problem, kind, *args, **kwargs)
    if isinstance(policy, str):
        policy = Policy(policy)
    if kind in ("auto", "policy-search"):
        pairs = [(policy, dict(params or {}))]
        pairs += list(kwargs.pop("policies", []))
        return _schedule(problem, kind, *args, policies=pairs, **kwargs)
    if args or kwargs or kind not in ("1f1b", "policy"):
        raise ScheduleError("policy= instantiates the policy alone: give no "
                            "kind or other option with it, or kind='auto' "
                            "or kind='policy-search'")
    return policy.instantiate(problem, params or {})


schedule.__doc__ += "\n\n" + (_schedule.__doc__ or "")


def _number(x: float) -> str:
    # The DSL's float literals need a '.': 1e-05 is written 1.0e-05.
    text = repr(float(x))
    if "e" in text and "." not in text:
        text = text.replace("e", ".0e")
    return text


def to_mlir(problem: Problem) -> str:
    """`problem` as a pipe.pipeline spec that stagecraft-opt and `load` read.
    The spec has no fused backward cost and no message or receive
    overhead: a stage's `fused_backward` and the problem's
    `message_overhead` and `receive_overhead` go into comments above the
    pipeline, not into the spec."""
    notes = [f"// @{s.name or f's{k}'}: fused_backward = "
             f"{_number(s.fused_backward)} (not in the spec format)"
             for k, s in enumerate(problem.stages)
             if s.fused_backward is not None]
    for name in ("message_overhead", "receive_overhead"):
        if getattr(problem, name):
            notes.append(f"// {name} = {_number(getattr(problem, name))} "
                         "(not in the spec format)")
    head = (f"pipe.pipeline @{problem.name} ranks({problem.ranks}) "
            f"microbatches({problem.microbatches})")
    if problem.links is None:  # the spec takes one or the other
        head += f" latency({_number(problem.latency)})"
    if problem.capacity is not None:
        head += f" capacity({_number(problem.capacity)})"
    if problem.lengths:
        head += (" lengths(" + ", ".join(_number(l) for l in problem.lengths)
                 + f") reference_length({_number(problem.reference_length)})")
    if problem.links is not None:
        node, intra, inter = problem.links
        head += (f" links(node = {node}, intra = (latency = "
                 f"{_number(intra[0])}, bandwidth = {_number(intra[1])}), "
                 f"inter = (latency = {_number(inter[0])}, bandwidth = "
                 f"{_number(inter[1])}))")
    head += " {"
    lines = notes + [head]
    for k, s in enumerate(problem.stages):
        line = (f"  pipe.stage @{s.name or f's{k}'}")
        if s.inputs is not None:
            names = [problem.stages[i].name or f"s{i}" for i in s.inputs]
            line += " inputs(" + ", ".join("@" + n for n in names) + ")"
        if s.rank is not None:
            line += f" rank({s.rank})"
        if s.layers:
            line += f" layers({s.layers})"
        cost = (f"forward = {_number(s.forward)}, backward_input = "
                f"{_number(s.backward_input)}, backward_weight = "
                f"{_number(s.backward_weight)}")
        if s.forward_backward is not None:
            cost += f", forward_backward = {_number(s.forward_backward)}"
        memory = (f"activation = {_number(s.activation)}, weight_grad = "
                  f"{_number(s.weight_grad)}")
        if s.recomputed is not None:
            memory += f", recomputed = {_number(s.recomputed)}"
        if s.selective is not None:
            memory += f", selective = {_number(s.selective)}"
        if s.selective_cost is not None:
            cost += f", selective = {_number(s.selective_cost)}"
        line += f" cost({cost}) memory({memory})"
        if s.params:
            line += f" params({_number(s.params)})"
        if s.output:
            line += f" output({_number(s.output)})"
        if s.scaling_linear != 1.0 or s.scaling_quadratic != 0.0:
            line += (f" scaling(linear = {_number(s.scaling_linear)}, "
                     f"quadratic = {_number(s.scaling_quadratic)})")
        lines.append(line)
    lines.append("}")
    return "\n".join(lines) + "\n"


Problem.to_mlir = to_mlir

__all__ = [
    "Policy",
    "Problem",
    "Schedule",
    "ScheduleError",
    "Stage",
    "default_memory_limit",
    "from_csv",
    "kinds",
    "load",
    "load_data_parallel",
    "load_plan",
    "partition_layers",
    "stages_from_partition",
    "plan_data_parallel",
    "plan_from_json",
    "search_policy",
    "problem_from_json",
    "data_parallel_from_json",
    "schedule",
    "to_mlir",
]
