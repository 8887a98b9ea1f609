"""Who adds the communication to a plan's compute order on torch's
runtime (the lowerings), the checks on the lowered orders, and the step
without torch's idle profiler scopes."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.distributed.pipelining import schedules as _ts

from .. import Schedule
from ._check import _single_stage_order


def _actions_with_comms(plan: Schedule, reduce_grad: bool = False,
                        sharded: bool = False) -> dict[int, list[Any]]:
    rows = plan.to_csv(comms=True, reduce_grad=reduce_grad,
                       sharded=sharded).rstrip("\n").split("\n")
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
