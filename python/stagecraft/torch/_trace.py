"""Traces of real steps on torch's pipelining runtime, and the costs they
fit (stagecraft.torch.trace and stagecraft.torch.calibrate).

Nothing of torch is forked: while a `trace` is open, the runner's `step`,
its stages' `forward_one_chunk`, `backward_one_chunk` and
`backward_weight_one_chunk`, and the module function that waits on
point-to-point work (`_wait_batch_p2p`) are wrapped to note when each
starts and ends, and are restored when it closes. Any of torch's schedules
(its own classes or Stagecraft's plans on its runtime) can be traced.
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections import defaultdict

import torch
import torch.distributed as dist
from torch.distributed.pipelining import schedules as _ts

from .._core import Problem, Schedule, ScheduleError, fit_costs
from ._transport import thread_names

_KINDS = ("F", "I", "W", "B")


@functools.cache
def _cuda() -> bool:
    """Whether there is a device to wait for, asked once: inside a step,
    torch.cuda.is_available() cost about 10 µs a call here (a traced
    zb-h1 step about 3 % longer than with the answer kept)."""
    return torch.cuda.is_available()


def _now() -> float:
    """Milliseconds, once the device's queued work is done."""
    if _cuda():
        torch.cuda.synchronize()
    return time.perf_counter() * 1e3


def _threads() -> dict[int, tuple[str, int, int]] | None:
    """This process's threads: id -> (name, ns on a CPU, ns runnable but
    waiting for one), from Linux's /proc/self/task/*/schedstat; None where
    the kernel does not keep those figures."""
    out = {}
    for tid, name in thread_names().items():
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run, wait = (int(x) for x in f.read().split()[:2])
        except (OSError, ValueError):
            continue  # The thread ended, or the kernel keeps no schedstat.
        out[tid] = (name, run, wait)
    return out or None


def _stages_of(runner) -> list:
    if hasattr(runner, "_stages"):
        return list(runner._stages)
    if hasattr(runner, "_stage"):
        return [runner._stage]
    raise ScheduleError(f"{type(runner).__name__} is not one of torch's "
                        "pipeline schedules (it holds no stages)")


class Trace:
    """What ran during the `step()` calls of an open trace, on every rank.

    Times are milliseconds on one axis for all ranks (each rank's zero is
    when all left the barrier that opened the trace). `computes`: (rank,
    step, action, start, end), action in torch's spelling ("0F3", "1I2",
    "2W0", "0B1"); `waits`: (rank, step, start, end, what) spent in torch's
    wait on point-to-point work, `what` saying whether the work waited for
    holds sends, receives or both ("send", "recv", "send+recv"); `steps`: (rank, step, start, end) of each
    `step()` call; `threads`: per rank, what its process's threads did
    while the trace was open (`cpu()`). Filled when the `with` block closes
    (collective).
    """

    def __init__(self, runner, group=None):
        self._runner = runner
        self._stages = _stages_of(runner)
        self._group = group or self._stages[0].group
        self.ranks = 0
        self.computes: list[tuple] = []
        self.waits: list[tuple] = []
        self.steps: list[tuple] = []
        self.threads: list[dict | None] = []
        self._mine: dict = {}

    # --- recording -------------------------------------------------------
    def __enter__(self) -> "Trace":
        if dist.is_initialized():
            dist.barrier(group=self._group)
        self._zero = _now()
        self._caller = threading.get_native_id()
        self._before = _threads()
        rank = dist.get_rank(self._group) if dist.is_initialized() else 0
        computes, waits, steps = [], [], []
        self._mine = {"computes": computes, "waits": waits, "steps": steps}
        current = {"step": -1}
        clock = self._zero

        def timed(kind_of, fn):
            def wrapper(*args, **kwargs):
                start = _now()
                try:
                    return fn(*args, **kwargs)
                finally:
                    kind, mb, stage = kind_of(args, kwargs)
                    computes.append((rank, current["step"],
                                     f"{stage}{kind}{mb}", start - clock,
                                     _now() - clock))
            return wrapper

        def mb_of(args, kwargs, name):
            return args[0] if args else kwargs[name]

        for st in self._stages:
            index = st.stage_index
            st.forward_one_chunk = timed(
                lambda a, k, i=index: ("F", mb_of(a, k, "fwd_chunk_id"), i),
                st.forward_one_chunk)
            st.backward_one_chunk = timed(
                lambda a, k, i=index: (
                    "B" if k.get("full_backward", True) else "I",
                    mb_of(a, k, "bwd_chunk_id"), i),
                st.backward_one_chunk)
            st.backward_weight_one_chunk = timed(
                lambda a, k, i=index: ("W", mb_of(a, k, "bwd_chunk_id"), i),
                st.backward_weight_one_chunk)
        self._wait, self._post = _ts._wait_batch_p2p, _ts._batch_p2p
        # What each posted piece of work carries: sends, receives or both.
        posted: dict[int, tuple] = {}

        def post(ops, *args, _inner=self._post, **kwargs):
            works = _inner(ops, *args, **kwargs)
            sends = {op.op in (dist.isend, dist.send) for op in ops}
            what = ("send" if sends == {True} else
                    "recv" if sends == {False} else "send+recv")
            for w in works:
                posted[id(w)] = (w, what)
            return works

        def wait(work, _inner=self._wait):
            start = _now()
            try:
                return _inner(work)
            finally:
                what = {posted.pop(id(w), (None, "recv"))[1] for w in work}
                waits.append((rank, current["step"], start - clock,
                              _now() - clock,
                              what.pop() if len(what) == 1 else "send+recv"))
        _ts._wait_batch_p2p = wait
        _ts._batch_p2p = post
        inner_step = self._runner.step

        def step(*args, **kwargs):
            current["step"] += 1
            start = _now()
            try:
                return inner_step(*args, **kwargs)
            finally:
                steps.append((rank, current["step"], start - clock,
                              _now() - clock))
        self._runner.step = step
        return self

    def __exit__(self, kind, value, tb) -> None:
        for st in self._stages:
            for name in ("forward_one_chunk", "backward_one_chunk",
                         "backward_weight_one_chunk"):
                st.__dict__.pop(name, None)
        self._runner.__dict__.pop("step", None)
        _ts._wait_batch_p2p, _ts._batch_p2p = self._wait, self._post
        if kind is not None:
            return
        self._mine["threads"] = self._thread_usage()
        parts = [self._mine]
        if dist.is_initialized():
            parts = [None] * dist.get_world_size(self._group)
            dist.all_gather_object(parts, self._mine, group=self._group)
        self.ranks = len(parts)
        for key in ("computes", "waits", "steps"):
            setattr(self, key, sorted(x for part in parts for x in part[key]))
        self.threads = [part["threads"] for part in parts]
        if not self.steps:
            raise ScheduleError("the trace holds no step(): call the "
                                "runner's step() inside the `with` block")

    def _thread_usage(self) -> dict | None:
        """This rank's threads between open and close, in ms: the thread
        that called step() (its time on a CPU and its time runnable but
        waiting for one) and every other thread's time on a CPU, summed
        by name."""
        after = _threads()
        if self._before is None or after is None:
            return None
        usage = {"run": 0.0, "wait": 0.0, "others": defaultdict(float)}
        for tid, (name, run, wait) in after.items():
            was = self._before.get(tid, (name, 0, 0))
            if tid == self._caller:
                usage["run"] = (run - was[1]) / 1e6
                usage["wait"] = (wait - was[2]) / 1e6
            else:
                usage["others"][name] += (run - was[1]) / 1e6
        usage["others"] = dict(usage["others"])
        return usage

    # --- figures ---------------------------------------------------------
    def cpu(self) -> list[dict | None]:
        """Per rank, ms per traced step: `run`, the time the thread that
        calls step() spent on a CPU; `wait`, the time it was ready to run
        but waited for a CPU (another thread or process held it: on a
        machine with a core per rank, the process's own communication
        threads); `others`, per thread name, the CPU time of the process's
        other threads (gloo's transport thread, for one). None for a rank
        whose kernel keeps no per-thread schedstat (Linux does)."""
        out = []
        for rank, usage in enumerate(self.threads):
            n = len({s for r, s, _, _ in self.steps if r == rank}) or 1
            out.append(None if usage is None else {
                "run": usage["run"] / n, "wait": usage["wait"] / n,
                "others": {k: v / n for k, v in usage["others"].items()}})
        return out

    def step_times(self) -> list[float]:
        """Per step, ms from the first rank's step() call to the last
        rank's return."""
        by_step = defaultdict(list)
        for _, s, start, end in self.steps:
            by_step[s].append((start, end))
        return [max(e for _, e in w) - min(b for b, _ in w)
                for _, w in sorted(by_step.items())]

    def overlapped_pairs(self) -> set[tuple[int, str, str]]:
        """(rank, first, second) of the computes that ran as the halves of
        one of the runner's OVERLAP_F_B actions (its `pipeline_order`)."""
        order = getattr(self._runner, "pipeline_order", None) or {}
        return {(rank, str(a.sub_actions[0]), str(a.sub_actions[1]))
                for rank, actions in order.items() for a in actions
                if a is not None and a.sub_actions and
                len(a.sub_actions) == 2}

    def compute_windows(self) -> list[float]:
        """Per step, ms from the first compute's start to the last one's
        end over all ranks: what the simulated makespan models. The rest
        of a step is step()'s own work before its first compute and after
        its last (splitting the batch, the gradient reductions)."""
        by_step = defaultdict(list)
        for _, s, _, start, end in self.computes:
            by_step[s].append((start, end))
        return [max(e for _, e in w) - min(b for b, _ in w)
                for _, w in sorted(by_step.items())]

    def placement(self) -> list[int]:
        """Stage -> the rank that ran it."""
        where = {}
        for rank, _, action, _, _ in self.computes:
            where[_parse(action)[0]] = rank
        return [where[s] for s in sorted(where)]

    def _per_rank(self):
        """Per rank: computes, waits and steps, each by step."""
        out = defaultdict(lambda: {"computes": defaultdict(list),
                                   "waits": defaultdict(list),
                                   "steps": {}})
        for rank, s, action, start, end in self.computes:
            out[rank]["computes"][s].append((action, start, end))
        for rank, s, start, end, what in self.waits:
            out[rank]["waits"][s].append((start, end, what))
        for rank, s, start, end in self.steps:
            out[rank]["steps"][s] = (start, end)
        return out

    def overhead(self) -> list[float]:
        """Per rank, ms per compute that the rank spent between its first
        and last compute of a step neither computing nor waiting on
        communication (the runtime's own work: its Python, the loss,
        posting sends), over all steps."""
        result = []
        per_rank = self._per_rank()
        for rank in range(self.ranks):
            data = per_rank[rank]
            spent, count = 0.0, 0
            for s, computes in data["computes"].items():
                first = min(c[1] for c in computes)
                last = max(c[2] for c in computes)
                busy = sum(c[2] - c[1] for c in computes)
                waiting = sum(min(e, last) - max(b, first)
                              for b, e, _ in data["waits"][s]
                              if e > first and b < last)
                spent += max(0.0, last - first - busy - waiting)
                count += len(computes)
            result.append(spent / count if count else 0.0)
        return result

    def after(self) -> list[float]:
        """Per compute (as `computes`), ms the rank spent after it, until
        its next compute of the step, neither computing nor waiting on
        communication: the runtime's own work that compute brought with it
        (the loss after a last stage's forward, posting its sends, handing
        its output on); 0 after a step's last compute."""
        per_rank = self._per_rank()
        out = []
        for rank, s, action, start, end in self.computes:
            later = [c[1] for c in per_rank[rank]["computes"][s]
                     if c[1] >= end]
            if not later:
                out.append(0.0)
                continue
            nxt = min(later)
            waiting = sum(min(e, nxt) - max(b, end)
                          for b, e, _ in per_rank[rank]["waits"][s]
                          if e > end and b < nxt)
            out.append(max(0.0, nxt - end - waiting))
        return out

    def report(self, plan: Schedule | None = None) -> str:
        """Per rank and action kind: actions per step and their measured
        ms per step, beside the plan's simulated ms (with `plan`); then per
        rank the median step's compute, communication wait (and the part
        of it spent on work that holds sends only), runtime overhead
        (`overhead` x computes) and idle time (step - compute), measured,
        and the simulated compute and idle time; last, per rank where the
        kernel keeps the figures (`cpu`), the step() thread's time on a CPU
        and waiting for one, and the other threads' CPU time."""
        per_rank = self._per_rank()
        steps = max(1, len(self.step_times()))
        step_ms = statistics.median(self.step_times())
        window = statistics.median(self.compute_windows())
        lines = [f"measured {steps} step(s): median step {step_ms:.3f} ms, "
                 f"of which first compute to last {window:.3f} ms"
                 + (f"; simulated makespan {plan.makespan:.3f} ms, "
                    f"measured / simulated {step_ms / plan.makespan:.3f} "
                    f"(computes only {window / plan.makespan:.3f})"
                    if plan is not None and plan.makespan > 0 else "")]
        lines.append(f"{'rank':>4}  {'kind':>4}  {'count':>5}  "
                     f"{'measured ms':>11}  {'simulated ms':>12}")
        for rank in range(self.ranks):
            measured = defaultdict(float)
            count = defaultdict(int)
            for computes in per_rank[rank]["computes"].values():
                for action, start, end in computes:
                    kind = _parse(action)[1]
                    measured[kind] += end - start
                    count[kind] += 1
            simulated = defaultdict(float)
            if plan is not None:
                for action, start, end in plan.timeline(rank):
                    simulated[_parse(action)[1]] += end - start
            for kind in _KINDS:
                if count[kind] or simulated[kind]:
                    sim = (f"{simulated[kind]:>12.3f}" if plan is not None
                           else f"{'-':>12}")
                    lines.append(f"{rank:>4}  {kind:>4}  "
                                 f"{count[kind] // steps:>5}  "
                                 f"{measured[kind] / steps:>11.3f}  {sim}")
        lines.append(f"{'rank':>4}  {'step ms':>9}  {'compute':>9}  "
                     f"{'comm wait':>9}  {'on sends':>9}  {'overhead':>9}  "
                     f"{'idle':>9}  {'sim compute':>11}  {'sim idle':>9}")
        overhead = self.overhead()
        for rank in range(self.ranks):
            data = per_rank[rank]
            walls = [e - b for b, e in data["steps"].values()]
            busy = [sum(c[2] - c[1] for c in cs)
                    for cs in data["computes"].values()]
            waiting = [sum(e - b for b, e, _ in ws)
                       for ws in data["waits"].values()] or [0.0]
            on_sends = [sum(e - b for b, e, what in ws if what == "send")
                        for ws in data["waits"].values()] or [0.0]
            wall = statistics.median(walls)
            b, w = statistics.median(busy), statistics.median(waiting)
            n = len(next(iter(data["computes"].values()), []))
            sim = ""
            if plan is not None:
                sim_busy = sum(e - s for _, s, e in plan.timeline(rank))
                sim = f"  {sim_busy:>11.3f}  {plan.makespan - sim_busy:>9.3f}"
            lines.append(f"{rank:>4}  {wall:>9.3f}  {b:>9.3f}  {w:>9.3f}  "
                         f"{statistics.median(on_sends):>9.3f}  "
                         f"{overhead[rank] * n:>9.3f}  {wall - b:>9.3f}"
                         + sim)
        for rank, usage in enumerate(self.cpu()):
            if usage is None:
                continue
            busiest = sorted(usage["others"].items(), key=lambda kv: -kv[1])
            lines.append(
                f"rank {rank}: per step, the step() thread ran "
                f"{usage['run']:.3f} ms and waited {usage['wait']:.3f} ms "
                f"for a CPU; other threads ran "
                f"{sum(usage['others'].values()):.3f} ms ("
                + ", ".join(f"{k} {v:.3f}" for k, v in busiest[:3]) + ")")
        return "\n".join(lines) + "\n"

    def chrome_trace(self, plan: Schedule, step: int = -1) -> str:
        """Chrome trace JSON (Perfetto, chrome://tracing): one traced step
        (default: the last) beside `plan`'s simulated one, both starting at
        0 on one time axis in ms."""
        chosen = sorted({s for _, s, _, _, _ in self.computes})[step]
        rows = [c for c in self.computes if c[1] == chosen]
        zero = min(c[3] for c in rows)
        measured = [[] for _ in range(self.ranks)]
        for rank, _, action, start, end in rows:
            measured[rank].append((action, start - zero, end - zero))
        return plan.to_chrome_trace(measured)


def _parse(action: str) -> tuple[int, str]:
    """A compute in torch's spelling ("0F3"): its stage and kind letter;
    an overlapped F&B ("(0F3;3B1)OVERLAP_F_B") gives stage -1 and "("."""
    k = 0
    while action[k].isdigit():
        k += 1
    return (int(action[:k]) if k else -1), action[k]


def calibrate(trace, problem: Problem, details: dict | None = None,
              overhead: str = "compute", statistic: str = "median",
              reproduce: str | None = "step") -> Problem:
    """`problem` with the costs the traced steps show: per stage the median
    F, I, W and fused B of its traced computes (a stage that ran only a
    fused B splits it in the ratio of `problem`'s own I and W; one that ran
    only I and W keeps `problem`'s fused B in its ratio to I + W), each
    with the runtime's own work around it added, and the link latency: the
    median delay from a compute's end to the start of its consumer on
    another rank that sat idle waiting for it; the work per message a
    compute sends to another rank (`message_overhead`) and per message a
    compute receives from one (`receive_overhead`: torch's runtime posts
    each receive just before the compute, so even an input that arrived
    long before costs a wait). The scheduler's own fit does the work
    (stagecraft-run --calibrate uses the same).

    `trace`: a Trace, or a list of them (runs of different plans or
    placements, e.g. each candidate's: a split-backward plan measures I
    and W, a fused one B). Trace steps after a warm-up: every traced step
    counts. `overhead`: "compute" (default) adds to each compute kind the
    mean of what its computes brought with them (`Trace.after`); "rank"
    spreads each rank's overhead evenly over its computes
    (`Trace.overhead`). `statistic`: each cost is the "median" (default)
    or the "mean" of its computes. `reproduce`: "step" (default) stretches
    every cost by one factor so that the traced steps, each simulated in
    the order its ranks ran it, take what their `step()` calls took
    (median ratio 1): what the parts miss, the stalls a median leaves out
    and step()'s own work before the first compute and after the last,
    spread over the computes; "window": the same against the steps'
    first compute to last; None: no stretch. `details`, when given,
    receives the fit's figures (per stage forward, backward_input,
    backward_weight, backward, samples, before the stretch; latency,
    message_overhead, receive_overhead; stretch, replayed (the steps it
    was fitted on) and unstretched_ratio (their median simulated /
    measured without it); steps). Raises ScheduleError naming a stage
    with no traced forward and backward."""
    traces = list(trace) if isinstance(trace, (list, tuple)) else [trace]
    computes, step_times, overlapped = [], {}, []
    if reproduce not in ("step", "window", None):
        raise ScheduleError(f"reproduce={reproduce!r}: expected 'step', "
                            "'window' or None")
    for k, t in enumerate(traces):
        if len(problem.stages) != len(t.placement()):
            raise ScheduleError(
                f"a trace ran {len(t.placement())} stages; the problem "
                f"has {len(problem.stages)}")
        if overhead == "compute":
            own = t.after()
        elif overhead == "rank":
            per_rank = t.overhead()
            own = [per_rank[c[0]] for c in t.computes]
        else:
            raise ScheduleError(f"overhead={overhead!r}: expected 'compute' "
                                "or 'rank'")
        # Each trace's steps apart from the others'.
        pairs = t.overlapped_pairs()
        ran = sorted(range(len(t.computes)),
                     key=lambda i: t.computes[i][0:4:3])
        for i, j in zip(ran, ran[1:]):
            (r, s, a, _, _), (r2, s2, b, _, _) = t.computes[i], t.computes[j]
            if (r, s) == (r2, s2) and (r, a, b) in pairs:
                overlapped.append(len(computes) + i)
        computes += [(r, k * 1_000_000 + s, a, b, e, o)
                     for (r, s, a, b, e), o in zip(t.computes, own)]
        if reproduce == "step":
            steps = sorted({s for _, s, _, _ in t.steps})
            step_times.update({k * 1_000_000 + s: took
                               for s, took in zip(steps, t.step_times())})
    fit = fit_costs(problem, computes, [0.0] * problem.ranks, statistic,
                    reproduce is not None, step_times, overlapped)
    if details is not None:
        details.update({k: v for k, v in fit.items()
                        if k not in ("problem", "overhead")})
    return fit["problem"]
