"""`profile`: this rank's stages timed through the functions torch's
runtime runs, their activation memory, and the link between two ranks,
gathered into a Problem."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch
import torch.distributed as dist

from .. import Problem, ScheduleError, Stage
from ._memory import SavedBytes


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
