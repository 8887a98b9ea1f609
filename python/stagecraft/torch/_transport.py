"""Quiet transport: gloo's transport threads at idle priority during a step.

gloo moves every point-to-point message on a transport thread of its own
(`gloo_tcp_loop`, one per gloo device), which shares the rank's core with
the thread that computes. Measured on this project's 2-core machine (one
pinned process per core; 1F1B's order on torch's multi-stage runtime with
early receives, 8 microbatches, 20 steps in each of two launches): the
transport thread ran 4.3-7.4 ms per 16-18 ms step (on 17 wake-ups: 0.25-
0.45 ms each, for messages of 4 KiB), the computing thread waited about as
long, runnable, for the core, and a traced step showed two stalls of
4.5 ms that held both ranks. The same steps with the transport thread
at idle priority: 1.1-1.4 ms of transport CPU, 8.6-9.4 ms a step (torch's
Schedule1F1B: 9.3-9.6 ms). gloo's source is consistent with a spin: the
transport thread handles a readable socket under the pair's lock, taken
with try_lock; when the computing thread holds it (posting a send or a
receive) the handler returns, and level-triggered epoll hands the same
socket back at once, until the computing thread runs again.

At idle priority (`SCHED_IDLE`) the transport thread runs only while the
computing thread waits, which on a pipeline rank is when a message is
due; it cannot take the core from a compute. A rank that computes for
long without waiting (GPipe's forwards) then sends late, which is why
`stagecraft.torch.schedule` measures both (its trial) rather than
assuming either.

The priority is set for the step and restored after it, and only where it
can be restored: Linux lets a thread leave SCHED_IDLE only with
CAP_SYS_NICE or a RLIMIT_NICE that admits its nice value (sched(7)).
"""

from __future__ import annotations

import contextlib
import os
import resource

#: The name gloo gives its TCP transport thread.
GLOO_TRANSPORT = "gloo_tcp_loop"

#: CAP_SYS_NICE's bit in /proc/self/status's CapEff.
_CAP_SYS_NICE = 23


def thread_names() -> dict[int, str]:
    """This process's threads: Linux thread id -> name, from
    /proc/self/task (empty where there is none)."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                out[int(tid)] = f.read().strip()
        except (OSError, ValueError):
            continue  # The thread ended.
    return out


def transport_threads() -> list[int]:
    """This process's gloo transport threads (Linux thread ids)."""
    return sorted(t for t, name in thread_names().items()
                  if name == GLOO_TRANSPORT)


def _capabilities() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def restorable(tids: list[int]) -> bool:
    """Whether this process may put `tids` back to their policy after
    SCHED_IDLE: with CAP_SYS_NICE, or where RLIMIT_NICE admits each
    thread's nice value (20 - limit <= nice)."""
    if not hasattr(os, "SCHED_IDLE"):
        return False
    if _capabilities() >> _CAP_SYS_NICE & 1:
        return True
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    if soft == resource.RLIM_INFINITY:
        return True
    try:
        return all(20 - soft <= os.getpriority(os.PRIO_PROCESS, t)
                   for t in tids)
    except OSError:
        return False


@contextlib.contextmanager
def quiet(tids: list[int]):
    """`tids` at SCHED_IDLE inside the block, each back to its own policy
    after it (a thread that ended meanwhile is skipped)."""
    saved = []
    for tid in tids:
        try:
            policy, param = os.sched_getscheduler(tid), os.sched_getparam(tid)
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            continue
        saved.append((tid, policy, param))
    try:
        yield
    finally:
        for tid, policy, param in saved:
            try:
                os.sched_setscheduler(tid, policy, param)
            except ProcessLookupError:
                pass
