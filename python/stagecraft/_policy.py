"""Policies from files, and the search over a policy's parameters.

A policy (docs/policies.md) is a schedule family with parameters; the
search instantiates it at every combination of its parameters' values
and keeps the fastest plan within the memory limit.
"""

from __future__ import annotations

import os

from ._core import Policy, Problem, Schedule, ScheduleError, \
    default_memory_limit


def _policy_from_file(path: str | os.PathLike) -> Policy:
    """The policy in the file `path` (its text); a ScheduleError names the
    file, the line and the column of what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ScheduleError(f"cannot read policy file {os.fspath(path)}: "
                            f"{e.strerror}") from None
    try:
        return Policy(text)
    except ScheduleError as e:
        raise ScheduleError(f"{os.fspath(path)}: {e}") from None


Policy.from_file = staticmethod(_policy_from_file)


def search_policy(problem: Problem, policy: Policy | str,
                  memory_limit: float | None = None,
                  objective: str = "makespan") -> Schedule:
    """The fastest plan `policy` gives `problem` over every combination of
    its parameters' values (their whole ranges), every rank within
    `memory_limit` (default: `default_memory_limit(problem)`, 1F1B's
    highest peak; the capacity where the problem has one). `objective`:
    "makespan" or "span" (the largest per-rank span). A tie goes to the
    combination found first (parameters in declaration order, each from its
    low end). The result's choice names the values
    ("zb-h1-rules offset=2"). Raises ScheduleError when no combination
    fits, naming the least memory any needed."""
    if isinstance(policy, str):
        policy = Policy(policy)
    if objective not in ("makespan", "span"):
        raise ScheduleError(f"objective={objective!r}: expected 'makespan' "
                            "or 'span'")
    limit = memory_limit
    if limit is None:
        limit = problem.capacity if problem.capacity is not None \
            else default_memory_limit(problem)
    return policy.search(problem, limit, objective)
