"""Collectives that fail fast: every rank of a group must enter one within
COLLECTIVE_TIMEOUT seconds, or those that did raise, saying so."""

from __future__ import annotations

import os
import time

import torch.distributed as dist

from .. import ScheduleError


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


def _global_rank(group, rank: int) -> int:
    if group is None or group is dist.group.WORLD:
        return rank
    return dist.get_global_rank(group, rank)
