"""One rank of the multi-process gloo tests of stagecraft.torch.

    python torch_worker.py MODE KIND RANK WORLD PORT OUT_DIR [N_MICROBATCHES]

MODE `equal` (`recompute`: with every forward recomputed, its stages
under torch.utils.checkpoint): train one step of a small transformer (one block per stage)
with Stagecraft's KIND schedule on torch's runtime, and compare the loss of
every microbatch and every parameter gradient with the unpipelined model
(same microbatches, gradients averaged: torch's default scaling) and, where torch has a schedule of
that kind with the same placement, with torch's own. MODE `errors`: bad
input raises ScheduleError before any communication. MODE `profile`:
profile -> auto -> one step, checked against the unpipelined model. MODE
`differential` (KIND: the number of seeds): random problems planned by auto
and every kind, each checked against the unpipelined model. MODE `trace`:
steps of KIND traced, Stagecraft's and torch's own, and calibrated. MODE
`calibration`: KIND's simulated step from profiled and from calibrated
costs against its measured step. MODE `grid` (KIND: v, loop or two):
one configuration of bench/torch-auto-bench.py, auto from the whole loop
against torch's built-ins and every Stagecraft kind, measured. MODE
`memory` (KIND: kinds, comma-separated): each plan's simulated peak
activation against the one measured in a real step. MODE
`bench`: median step time of Stagecraft's schedule and of torch's own.
Each rank writes OUT_DIR/rank<R>.json.
"""

import logging
import json
import os
import re
import statistics
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as ts

import stagecraft as sc
import stagecraft.torch as sct
from stagecraft.torch._trace import _threads
from stagecraft.torch._transport import quiet as quiet_transport
from stagecraft.torch._transport import transport_threads

D, HEADS, T, V, B = 32, 4, 16, 64, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (self.qkv(self.ln1(x)).view(b, t, 3, HEADS, D // HEADS)
                   .permute(2, 0, 3, 1, 4))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, D))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


#: The blocks each stage holds, from STAGECRAFT_TORCH_MODEL: one of this
#: file's `Block` ("blocks"), one of torch's own nn.TransformerEncoderLayer
#: ("encoder"), or uneven stages of this file's blocks ("uneven": two on
#: every stage of even index, one on the others).
MODEL = os.environ.get("STAGECRAFT_TORCH_MODEL", "blocks")


class StageModule(nn.Module):
    """Stage i of the model: the embedding on the first, a block on every
    one, the final norm and the head on the last (so the end stages are
    heavier); seeded by its index, so every rank builds the same
    weights."""

    def __init__(self, index, num_stages):
        super().__init__()
        torch.manual_seed(1000 + index)
        self.first = index == 0
        self.last = index == num_stages - 1
        if self.first:
            self.embed = nn.Embedding(V, D)
        if MODEL == "encoder":
            self.block = nn.TransformerEncoderLayer(
                D, HEADS, 4 * D, dropout=0.0, batch_first=True)
        elif MODEL == "blocks":
            self.block = Block()
        elif MODEL == "uneven":
            self.block = nn.Sequential(
                *[Block() for _ in range(2 if index % 2 == 0 else 1)])
        else:
            raise SystemExit(f"STAGECRAFT_TORCH_MODEL={MODEL}: expected "
                             "blocks, encoder or uneven")
        if self.last:
            self.norm = nn.LayerNorm(D)
            self.head = nn.Linear(D, V)

    def forward(self, x):
        if self.first:
            x = self.embed(x)
        x = self.block(x)
        if self.last:
            x = self.head(self.norm(x))
        return x


def plan_all(problem, **kwargs):
    """sct.plan on every rank, as one collective: rank 0 plans and
    broadcasts, so every rank runs the same plan."""
    return sct.plan(problem, group=dist.group.WORLD, **kwargs)


def loss_fn(logits, target):
    return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1))


def data(n_mb):
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(V, (n_mb * B, T), generator=g)
    return tokens, (tokens * 3 + 1) % V


def reference(num_stages, n_mb):
    """Per-microbatch losses and the gradients of the unpipelined model,
    averaged over the microbatches as torch's schedules scale them by
    default (scale_grads=True), which stagecraft.torch.schedule follows."""
    modules = [StageModule(i, num_stages) for i in range(num_stages)]
    tokens, target = data(n_mb)
    losses = []
    for m in range(n_mb):
        x = tokens[m * B:(m + 1) * B]
        for mod in modules:
            x = mod(x)
        loss = loss_fn(x, target[m * B:(m + 1) * B])
        loss.backward()
        losses.append(loss.item())
    grads = {(i, n): p.grad.clone() / n_mb for i, mod in enumerate(modules)
             for n, p in mod.named_parameters()}
    return losses, grads


def build(indices, num_stages):
    mods = {i: StageModule(i, num_stages) for i in indices}
    stages = [PipelineStage(mods[i], i, num_stages, torch.device("cpu"))
              for i in indices]
    return mods, stages


def call_step(runner, tokens, target, has_first, has_last):
    """One step() call on a batch made beforehand; the last stage's losses
    (tensors)."""
    losses = []
    args = (tokens,) if has_first else ()
    runner.step(*args, target=target if has_last else None,
                losses=losses if has_last else None)
    return losses


def run_step(runner, n_mb, has_first, has_last):
    losses = call_step(runner, *data(n_mb), has_first, has_last)
    return [l.item() for l in losses]


def max_rel_err(mods, grads):
    worst = 0.0
    for i, mod in mods.items():
        for n, p in mod.named_parameters():
            ref = grads[(i, n)]
            if p.grad is None:
                return float("inf")
            scale = max(ref.abs().max().item(), 1e-12)
            worst = max(worst, (p.grad - ref).abs().max().item() / scale)
    return worst


# torch's own schedule class of a kind, where its placement is Stagecraft's.
TORCH_CLASS = {
    "gpipe": ts.ScheduleGPipe,
    "1f1b": ts.Schedule1F1B,
    "interleaved-1f1b": ts.ScheduleInterleaved1F1B,
    "zb-v": ts.ScheduleZBVZeroBubble,
    "dualpipev": ts.ScheduleDualPipeV,
}


def stages_for(kind, world):
    return world if kind in ("gpipe", "1f1b") else 2 * world


def torch_schedule(kind, stages, n_mb):
    cls = TORCH_CLASS[kind]
    if cls in (ts.ScheduleGPipe, ts.Schedule1F1B):
        return cls(stages[0], n_mb, loss_fn=loss_fn)
    return cls(stages, n_mb, loss_fn=loss_fn)


def relabeled(plan, problem, perm):
    """`plan` with microbatch k renamed perm[k] on every stage: as valid a
    plan, whose stages run the microbatches out of their order."""
    text = re.sub(r"(\d+)([FIBW])(\d+)",
                  lambda m: f"{m[1]}{m[2]}{perm[int(m[3])]}", plan.to_csv())
    return sc.from_csv(problem, text)


def equal(kind, rank, world, n_mb, recompute=None, lowering="torch",
          reorder=None, transport="auto"):
    num_stages = stages_for(kind, world)
    problem = sc.Problem(ranks=world, microbatches=n_mb,
                         stages=[sc.Stage(recomputed=0.1)
                                 for _ in range(num_stages)])
    plan = plan_all(problem, kind=kind, time_limit=1.0, recompute=recompute)
    if reorder is not None:
        plan = reorder(plan, problem)
    mine = sct.stage_indices(plan, rank)
    mods, stages = build(mine, num_stages)
    runner = sct.schedule(stages, n_mb, loss_fn, plan=plan, lowering=lowering,
                          transport=transport)
    has_first, has_last = 0 in mine, num_stages - 1 in mine
    # The scheduling policies of gloo's transport threads before, during
    # (seen from inside each forward) and after the step.
    tids = transport_threads()
    policies = {"before": sorted({os.sched_getscheduler(t) for t in tids}),
                "during": set()}
    for st in stages:
        inner = st.forward_one_chunk

        def forward(*args, _inner=inner, **kwargs):
            policies["during"] |= {os.sched_getscheduler(t) for t in tids}
            return _inner(*args, **kwargs)
        st.forward_one_chunk = forward
    losses = run_step(runner, n_mb, has_first, has_last)
    policies["during"] = sorted(policies["during"])
    policies["after"] = sorted({os.sched_getscheduler(t) for t in tids})
    ref_losses, grads = reference(num_stages, n_mb)
    result = {"placement": plan.placement, "grad_err": max_rel_err(mods, grads),
              "loss_err": max((abs(a - b) / abs(b) for a, b in
                               zip(losses, ref_losses)), default=0.0),
              "losses": len(losses), "torch_err": None,
              "runner": type(runner).__name__,
              "kept": [runner.stagecraft_lowering,
                       runner.stagecraft_transport],
              "transport_threads": len(tids), "policies": policies,
              "checkpointed": sorted(
                  i for i, mod in mods.items()
                  if getattr(mod, "_stagecraft_checkpointed", False))}
    if kind in TORCH_CLASS:
        tmods, tstages = build(mine, num_stages)
        theirs = torch_schedule(kind, tstages, n_mb)
        run_step(theirs, n_mb, has_first, has_last)
        worst = 0.0
        for i, mod in mods.items():
            for (n, p), (_, q) in zip(mod.named_parameters(),
                                      tmods[i].named_parameters()):
                scale = max(q.grad.abs().max().item(), 1e-12)
                worst = max(worst, (p.grad - q.grad).abs().max().item() / scale)
        result["torch_err"] = worst
    return result


def out_of_order(kind, rank, world, n_mb):
    """Plans whose stages take the microbatches out of their order. Every
    lowering of KIND's plan with microbatch k renamed (3k + 1) mod n_mb on
    every stage, against the unpipelined model; and a two-stage plan whose
    second stage takes each pair of forwards swapped (1F1 before 1F0),
    under every lowering: its receives must pair with the right
    messages."""
    perm = [(3 * k + 1) % n_mb for k in range(n_mb)]
    out = {}
    for lowering in sct.LOWERINGS:
        out[lowering] = equal(
            kind, rank, world, n_mb, lowering=lowering,
            reorder=lambda plan, problem: relabeled(plan, problem, perm))
    swap = [k ^ 1 for k in range(n_mb)]
    rows = [[f"0F{k}" for k in range(n_mb)] + [f"0B{k}" for k in swap],
            [f"1F{k}" for k in swap] + [f"1B{k}" for k in swap]]
    problem = sc.Problem(ranks=2, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(2)])
    plan = sc.from_csv(problem, "\n".join(",".join(r) for r in rows) + "\n")
    for lowering in sct.LOWERINGS:
        mods, stages = build([rank], 2)
        try:
            runner = sct.schedule(stages, n_mb, loss_fn, plan=plan,
                                  lowering=lowering)
        except sc.ScheduleError as e:
            out[f"swapped {lowering}"] = {"error": str(e)}
            continue
        losses = run_step(runner, n_mb, rank == 0, rank == 1)
        ref_losses, grads = reference(2, n_mb)
        out[f"swapped {lowering}"] = {
            "grad_err": max_rel_err(mods, grads),
            "loss_err": max((abs(a - b) / abs(b) for a, b in
                             zip(losses, ref_losses)), default=0.0),
            "losses": len(losses)}
    return out


def ends_of(runner, has_first=None, has_last=None):
    """Whether the runner's stages here hold the first and the last (as
    given, where has_first is)."""
    if has_first is not None:
        return has_first, has_last
    stages = getattr(runner, "_stages", None) or [runner._stage]
    return any(st.is_first for st in stages), any(st.is_last for st in stages)


def alternate(runners, steps, n_mb, has_first=None, has_last=None,
              around=None, warmup=1):
    """Seconds of each runner's steps, the runners taking turns step by step
    (their order reversed every other step) after `warmup` steps each.
    Without has_first / has_last, each runner's own stages say. `around`,
    when given, is called as around(who, run) for each measured step, and
    must call run()."""
    times = {who: [] for who in runners}
    for step in range(steps + warmup):
        order = list(runners) if step % 2 == 0 else list(runners)[::-1]
        for who in order:
            first, last = ends_of(runners[who], has_first, has_last)

            def run():
                dist.barrier()
                t0 = time.perf_counter()
                try:
                    run_step(runners[who], n_mb, first, last)
                except Exception as e:  # Name the schedule that failed.
                    raise RuntimeError(f"a step of {who} failed") from e
                dist.barrier()
                return time.perf_counter() - t0
            if step < warmup:
                run()
            elif around is None:
                times[who].append(run())
            else:
                around(who, lambda: times[who].append(run()))
    return times


def uniform_plan(kind, rank, world, n_mb):
    """KIND's plan on uniform costs, its stage count, the stages it places
    on `rank`, and whether those hold the first and the last stage."""
    num_stages = stages_for(kind, world)
    problem = sc.Problem(ranks=world, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(num_stages)])
    plan = plan_all(problem, kind=kind, time_limit=1.0)
    mine = sct.stage_indices(plan, rank)
    return plan, num_stages, mine, 0 in mine, num_stages - 1 in mine


def lowering_trial(kind, rank, world, n_mb):
    """lowering="auto"'s trial on KIND's plan, three times: as it runs
    (for gpipe, with a forward-only `eval` step in the middle, which it
    must not count), and with 1 s added on the last rank alone to each
    step of "early", then of "torch" (as if that lowering ran that much
    slower there). Per run, the lowering kept after each step, the
    trial's figures, and the gradients of one more step against the
    unpipelined model."""
    plan, num_stages, mine, first, last = uniform_plan(kind, rank, world,
                                                       n_mb)
    out = {}
    # 1F1B's order runs on torch's Schedule1F1B, whose trial is of the
    # transports alone: then one transport is slowed instead.
    single = kind == "1f1b"
    for slow in (None, "shared", "quiet") if single else \
            (None, "early", "torch"):
        mods, stages = build(mine, num_stages)
        runner = sct.schedule(stages, n_mb, loss_fn, plan=plan)
        if slow is not None and rank == world - 1:
            inner = runner._trial.record

            def record(name, seconds, inner=inner, slow=slow):
                # Every candidate of that lowering, either transport (of
                # that transport, on a single-stage class).
                slowed = (("quiet" if name.endswith("+quiet") else
                           "shared") if single else name.split("+")[0])
                inner(name, seconds + (1.0 if slowed == slow else 0.0))
            runner._trial.record = record
        kept = [runner.stagecraft_lowering]
        transports = [runner.stagecraft_transport]
        for i in range(len(runner._candidates) * sct.TRIAL_LENGTH // 2):
            if i == 3 and kind == "gpipe":
                # A forward-only step in the middle: not a trial step.
                tokens, target = data(n_mb)
                runner.eval(*((tokens,) if first else ()),
                            target=target if last else None)
            run_step(runner, n_mb, first, last)
            kept.append(runner.stagecraft_lowering)
            transports.append(runner.stagecraft_transport)
        for mod in mods.values():
            mod.zero_grad()
        run_step(runner, n_mb, first, last)
        _, grads = reference(num_stages, n_mb)
        out[str(slow)] = {"kept": kept, "transports": transports,
                          "runner": type(runner).__name__,
                          "ms": runner.stagecraft_lowering_ms,
                          "grad_err": max_rel_err(mods, grads)}
    return out


def scopes(kind, rank, world, n_mb):
    """How many profiler scopes torch's multi-stage runtime opens in a
    step of KIND's plan, with no profiler running and under
    torch.profiler; the scopes the profiler recorded (their names) and
    whether the module's own record_function is back after each step."""
    plan, num_stages, mine, first, last = uniform_plan(kind, rank, world,
                                                       n_mb)
    _, stages = build(mine, num_stages)
    runner = sct.schedule(stages, n_mb, loss_fn, plan=plan)
    opened = []
    real = ts.record_function

    def counted(*args, **kwargs):
        opened.append(args[0])
        return real(*args, **kwargs)
    ts.record_function = counted
    try:
        run_step(runner, n_mb, first, last)
        idle = len(opened)
        restored = ts.record_function is counted
        with torch.profiler.profile() as prof:
            run_step(runner, n_mb, first, last)
        restored = restored and ts.record_function is counted
    finally:
        ts.record_function = real
    return {"idle": idle, "profiled": len(opened) - idle,
            "restored": restored,
            "recorded": sorted({e.name for e in prof.events()
                                if e.name.startswith("PP:")})}


def trial_bench(kind, rank, world, n_mb, steps=40):
    """KIND's plan (uniform costs) as lowering="auto" (its trial run out
    first), as lowering="torch" and as "early", as "torch" keeping torch's
    idle profiler scopes ("scoped"), beside torch's own class of the kind,
    alternating `steps` each after a warm-up step: per runner the median
    step seconds (each step alone, barrier to barrier) and the seconds per
    step back to back (`back_to_back`), and the lowering auto kept."""
    plan, num_stages, mine, first, last = uniform_plan(kind, rank, world,
                                                       n_mb)
    runners = {}
    _, stages = build(mine, num_stages)
    runners["builtin"] = torch_schedule(kind, stages, n_mb)
    for who, how in (("auto", "auto"), ("torch", "torch"),
                     ("early", "early"), ("scoped", "torch")):
        _, stages = build(mine, num_stages)
        # The multi-stage runtime for every one (auto's trial runs there;
        # "torch" would put GPipe's order on ScheduleGPipe).
        runners[who] = sct._runner._StagecraftRuntime(stages, n_mb, loss_fn, plan,
                                              True, lowering=how)
        runners[who]._keep_scopes = who == "scoped"
    settle(runners["auto"], n_mb, first, last)
    times = alternate(runners, steps, n_mb, first, last)
    return {"median": {w: statistics.median(t) for w, t in times.items()},
            "blocks": back_to_back(runners, n_mb, first, last),
            "kept": runners["auto"].stagecraft_lowering,
            "trial_ms": runners["auto"].stagecraft_lowering_ms}


def transport_agreement(kind, rank, world, n_mb):
    """The last rank may not quiet its gloo transport (as if it lacked the
    permission): transport="auto" must give every rank the same trial,
    without the quiet candidates, and transport="quiet" must raise
    ScheduleError on every rank, not hang the others."""
    if rank == world - 1:
        sct._transport.restorable = lambda tids: False
    plan, num_stages, mine, first, last = uniform_plan(kind, rank, world,
                                                       n_mb)
    _, stages = build(mine, num_stages)
    runner = sct.schedule(stages, n_mb, loss_fn, plan=plan)
    candidates = sorted(runner._candidates)
    settle(runner, n_mb, first, last)
    out = {"candidates": candidates,
           "kept": [runner.stagecraft_lowering, runner.stagecraft_transport]}
    _, stages = build(mine, num_stages)
    try:
        sct.schedule(stages, n_mb, loss_fn, plan=plan, transport="quiet")
        out["quiet"] = None
    except sc.ScheduleError as e:
        out["quiet"] = str(e)
    return out


def transport_bench(kind, rank, world, n_mb, steps=30):
    """KIND's plan (uniform costs) with early receives and with torch's
    lowering, each with gloo's transport threads shared and quiet, torch's
    own class of the kind shared and quiet (its step() inside
    `stagecraft.torch._transport.quiet`), and `sct.schedule`'s defaults (its trial
    run out first), alternating `steps` each after a warm-up step: per
    runner the median step seconds (each step alone) and the seconds per
    step back to back, the transport threads' CPU ms per step (the median
    over both ranks of each rank's mean), and what auto kept."""
    plan, num_stages, mine, first, last = uniform_plan(kind, rank, world,
                                                       n_mb)
    runners = {}
    tids = transport_threads()
    for quiet in ("", "+quiet"):
        _, stages = build(mine, num_stages)
        builtin = torch_schedule(kind, stages, n_mb)
        if quiet:
            inner = builtin.step

            def step(*args, _inner=inner, **kwargs):
                with quiet_transport(tids):
                    return _inner(*args, **kwargs)
            builtin.step = step
        runners["builtin" + quiet] = builtin
        for lowering in ("early", "torch"):
            _, stages = build(mine, num_stages)
            runners[lowering + quiet] = sct._runner._StagecraftRuntime(
                stages, n_mb, loss_fn, plan, True, lowering=lowering,
                transport="quiet" if quiet else "shared")
    _, stages = build(mine, num_stages)
    runners["auto"] = sct.schedule(stages, n_mb, loss_fn, plan=plan)
    settle(runners["auto"], n_mb, first, last)
    cpu = {who: [] for who in runners}

    def around(who, run):
        before = _threads()
        run()
        after = _threads()
        cpu[who].append(sum(after[t][1] - before[t][1] for t in tids
                            if t in after and t in before) / 1e6)
    times = alternate(runners, steps, n_mb, first, last, around=around)
    every = [None] * world
    dist.all_gather_object(every, {w: statistics.mean(v)
                                   for w, v in cpu.items()})
    auto = runners["auto"]
    return {"median": {w: statistics.median(t) for w, t in times.items()},
            "blocks": back_to_back(runners, n_mb, first, last, rounds=4,
                                   block=5),
            "cpu": {w: statistics.median(r[w] for r in every)
                    for w in runners},
            "kept": sct._trial._candidate_name(auto.stagecraft_lowering,
                                        auto.stagecraft_transport)}


def trial_order(kind, rank, world, n_mb, rounds=6):
    """How a trial would rank KIND's candidates (its plan with each
    lowering, shared and quiet: fixed runners, after TRIAL_WARMUP steps
    each), three ways, the same runners: taking turns step by step,
    2 x `rounds` measured steps each; in `rounds` rounds of TRIAL_BLOCK
    consecutive steps each, the first of a block uncounted (the trial's
    way); both timing each rank's step() call; and the truth they stand
    for, blocks of 10 steps back to back between barriers (`rounds`
    each), as a training loop runs them. Per way and candidate, the
    slowest rank's median ms (back to back: ms per step)."""
    plan, num_stages, mine, first, last = uniform_plan(kind, rank, world,
                                                       n_mb)
    runners = {}
    for lowering in ("early", "torch"):
        for transport in ("shared", "quiet"):
            _, stages = build(mine, num_stages)
            try:
                runner = sct._runner._StagecraftRuntime(
                    stages, n_mb, loss_fn, plan, True, lowering=lowering,
                    transport=transport)
            except sc.ScheduleError:  # (a lowering that pairs wrongly)
                continue
            runners[sct._trial._candidate_name(lowering, transport)] = runner
    names = list(runners)
    for runner in runners.values():
        for _ in range(sct.TRIAL_WARMUP):
            run_step(runner, n_mb, first, last)

    def local(block, turns):
        times = {n: [] for n in names}
        for k in range(turns):
            for n in (names if k % 2 == 0 else names[::-1]):
                for j in range(block):
                    t0 = time.perf_counter()
                    run_step(runners[n], n_mb, first, last)
                    if block == 1 or j > 0:
                        times[n].append(time.perf_counter() - t0)
        mine_ms = torch.tensor([1e3 * statistics.median(times[n])
                                for n in names], dtype=torch.float64)
        dist.all_reduce(mine_ms, op=dist.ReduceOp.MAX)
        return dict(zip(names, mine_ms.tolist()))
    out = {"turns": local(1, 2 * rounds),
           "blocks": local(sct.TRIAL_BLOCK, rounds)}
    out["back_to_back"] = {n: 1e3 * t for n, t in back_to_back(
        runners, n_mb, first, last, rounds=rounds, block=10).items()}
    return out


def back_to_back(runners, n_mb, first=None, last=None, rounds=6, block=10):
    """Per runner, the median over `rounds` of the seconds per step of
    `block` steps run back to back, as a training loop runs them (no
    barrier between them: a rank starts its next step while the others
    finish theirs), from a barrier before the block to one after it; the
    runners take turns block by block, their order reversed every
    round. Without first / last, each runner's own stages say."""
    per_step = {who: [] for who in runners}
    for r in range(rounds):
        for who in (list(runners) if r % 2 == 0 else list(runners)[::-1]):
            ends = ends_of(runners[who], first, last)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(block):
                run_step(runners[who], n_mb, *ends)
            dist.barrier()
            per_step[who].append((time.perf_counter() - t0) / block)
    return {who: statistics.median(t) for who, t in per_step.items()}


def lowering_bench(kind, rank, world, n_mb, steps=20):
    """Step ms of one Stagecraft plan under each lowering and of torch's
    own schedule of the kind (where it has one), all alternating step by
    step; per runner the median and all steps, and the CPU ms per step of
    this rank's threads other than the one that calls step() (gloo's
    transport)."""
    plan, num_stages, mine, _, _ = uniform_plan(kind, rank, world, n_mb)
    runners = {}
    for how in ("torch", "early", "stagecraft"):
        _, stages = build(mine, num_stages)
        runners[how] = sct.schedule(stages, n_mb, loss_fn, plan=plan,
                                    lowering=how)
    if sct._lower._runtime_for(plan, "torch") is not None:
        # "torch" ran on a single-stage class: torch's lowering of the same
        # order on the multi-stage runtime, which "early" runs on.
        _, stages = build(mine, num_stages)
        runners["multi"] = sct._runner._StagecraftRuntime(stages, n_mb, loss_fn, plan,
                                                  True, lowering="torch")
    if kind in TORCH_CLASS:
        _, stages = build(mine, num_stages)
        runners["builtin"] = torch_schedule(kind, stages, n_mb)
    others = {how: 0.0 for how in runners}

    def timed(how, run):
        before = _threads()
        run()
        after = _threads()
        me = threading.get_native_id()
        others[how] += sum(v[1] - before.get(t, (None, 0, 0))[1]
                           for t, v in after.items() if t != me) / 1e6

    times = alternate(runners, steps, n_mb, 0 in mine, num_stages - 1 in mine,
                      around=timed)
    return {how: 1e3 * statistics.median(t) for how, t in times.items()} | {
        "all": times, "others": {h: c / steps for h, c in others.items()}}


def differential(rank, world, n_mb, seeds, out_dir):
    """Plans nobody chose by hand: for each seed, a problem with random
    uneven F, I, W and activation memory, planned by auto (under a random
    memory limit) and by every kind torch runs, each plan trained for one
    step and compared with the unpipelined model. A plan whose loss or
    gradients differ keeps its CSV in OUT_DIR."""
    import random
    references = {}
    rows = []
    for seed in range(seeds):
        rng = random.Random(seed)
        for kind in sct.KINDS:
            num_stages = stages_for(kind, world)
            problem = sc.Problem(ranks=world, microbatches=n_mb, stages=[
                sc.Stage(forward=rng.uniform(0.3, 2.0),
                         backward_input=rng.uniform(0.3, 2.0),
                         backward_weight=rng.uniform(0.1, 1.5),
                         activation=rng.uniform(0.5, 2.0))
                for _ in range(num_stages)])
            limit = None
            if kind == "auto":
                peaks = sc.schedule(problem, kind="1f1b").peak_memory
                limit = max(peaks) * rng.uniform(1.0, 2.0)
            plan = plan_all(problem, kind=kind, memory_limit=limit,
                            time_limit=0.3)
            mine = sct.stage_indices(plan, rank)
            mods, stages = build(mine, num_stages)
            runner = sct.schedule(stages, n_mb, loss_fn, plan=plan)
            losses = run_step(runner, n_mb, 0 in mine, num_stages - 1 in mine)
            if num_stages not in references:
                references[num_stages] = reference(num_stages, n_mb)
            ref_losses, grads = references[num_stages]
            grad_err = max_rel_err(mods, grads)
            loss_err = max((abs(a - b) / abs(b) for a, b in
                            zip(losses, ref_losses)), default=0.0)
            kept = None
            if grad_err > 1e-5 or loss_err > 1e-5:
                kept = os.path.join(out_dir, f"failed-seed{seed}-{kind}.csv")
                with open(kept, "w") as f:
                    f.write(plan.to_csv())
            rows.append({"seed": seed, "kind": kind, "plan": plan.kind,
                         "choice": plan.choice, "grad_err": grad_err,
                         "loss_err": loss_err, "csv": kept})
    return rows


def errors(rank, world, n_mb):
    """Every bad input raises ScheduleError before any communication (a
    barrier after each proves no rank is left inside a collective)."""
    num_stages = 2 * world
    problem = sc.Problem(ranks=world, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(num_stages)])
    plan = plan_all(problem, kind="zb-v")
    seen = {}

    def expect(name, fn):
        try:
            fn()
            seen[name] = "no error"
        except sc.ScheduleError as e:
            seen[name] = str(e)
        dist.barrier()

    mine = sct.stage_indices(plan, rank)
    _, stages = build(mine, num_stages)
    expect("kind", lambda: sct.schedule(stages, n_mb, loss_fn, kind="helix"))
    expect("unknown", lambda: sct.schedule(stages, n_mb, loss_fn, kind="2f2b"))
    wrong = [(i + 1) % num_stages for i in mine]
    _, wrong_stages = build(wrong, num_stages)
    expect("wrong rank", lambda: sct.schedule(wrong_stages, n_mb, loss_fn, plan=plan))
    expect("microbatches", lambda: sct.schedule(stages, n_mb + 1, loss_fn, plan=plan))
    _, few = build([rank], world)
    expect("stage count", lambda: sct.schedule(few, n_mb, loss_fn, plan=plan))
    # A hand-written CSV that would hang is refused by from_csv, naming the
    # cycle: rank 0 waits for a gradient before it sends its activation.
    two = sc.Problem(ranks=2, microbatches=1, stages=[sc.Stage(), sc.Stage()])
    expect("hang", lambda: sc.from_csv(
        two, "0F0,0RECV_B0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"))
    return seen


def promises(rank, world, n_mb):
    """What a user is promised when something does not match, on every
    rank: a kind other than the plan's, a plan for another rank count, a
    wrong stage list on the last rank only, different plans on the ranks,
    a collective called from rank 0 alone (STAGECRAFT_COLLECTIVE_TIMEOUT
    set by the launcher), and planning on rank 0 alone then
    broadcast_plan. A barrier after each proves no rank is left inside a
    collective."""
    num_stages = 2 * world
    problem = sc.Problem(ranks=world, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(num_stages)])
    zbv = sct.plan(problem, kind="zb-v")  # local: the same on every rank
    seen = {}

    def expect(name, fn, barrier=True):
        start = time.monotonic()
        try:
            fn()
            seen[name] = "no error"
        except sc.ScheduleError as e:
            seen[name] = str(e)
        seen[name + " s"] = time.monotonic() - start
        if barrier:
            dist.barrier()

    mine = sct.stage_indices(zbv)
    seen["mine"] = mine
    _, stages = build(mine, num_stages)
    expect("kind", lambda: sct.schedule(stages, n_mb, loss_fn, kind="gpipe",
                                        plan=zbv))
    four = sct.plan(sc.Problem(ranks=2 * world, microbatches=n_mb,
                               stages=[sc.Stage() for _ in range(num_stages)]),
                    kind="1f1b")
    expect("rank count", lambda: sct.stage_indices(four, rank))
    wrong = mine if rank < world - 1 else [(i + 1) % num_stages for i in mine]
    _, wrong_stages = build(wrong, num_stages)
    expect("one rank wrong", lambda: sct.schedule(wrong_stages, n_mb, loss_fn,
                                                  plan=zbv))
    one = sc.Problem(ranks=world, microbatches=n_mb,
                     stages=[sc.Stage() for _ in range(world)])
    differs = sct.plan(one, kind="zb-h1" if rank == 0 else "1f1b")
    _, single = build([rank], world)
    expect("different plans", lambda: sct.schedule(single, n_mb, loss_fn,
                                                   plan=differs))
    if rank == 0:
        expect("collective on one rank", lambda: sct.plan(
            problem, kind="auto", time_limit=0.5, group=dist.group.WORLD),
            barrier=False)
    dist.barrier()
    # The usual pattern: plan on rank 0 alone, share it.
    local = sct.plan(problem, kind="auto", time_limit=0.5) \
        if rank == 0 else None
    shared = sct.broadcast_plan(local, src=0)
    seen["shared"] = [shared.to_csv(), shared.kind, shared.choice,
                      shared.makespan]
    mods, stages = build(sct.stage_indices(shared), num_stages)
    runner = sct.schedule(stages, n_mb, loss_fn, plan=shared,
                          lowering="early", transport="shared")
    seen["fixed"] = [runner.stagecraft_lowering, runner.stagecraft_transport,
                     runner._trial is None]
    mine = sct.stage_indices(shared)
    run_step(runner, n_mb, 0 in mine, num_stages - 1 in mine)
    _, grads = reference(num_stages, n_mb)
    seen["grad_err"] = max_rel_err(mods, grads)
    return seen


def policy_plan(rank, world, n_mb):
    """A policy's plan (interleaved 1F1B written as phases, two stages a
    rank) through stagecraft.torch: one step against the unpipelined
    model."""
    text = ("policy interleaved\nplacement loop\nwarmup min((ranks - rank "
            "- 1) * 2 + (chunks - 1) * ranks, microbatches * chunks)\n"
            "steady F B\n")
    num_stages = 2 * world
    problem = sc.Problem(ranks=world, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(num_stages)])
    plan = plan_all(problem, policy=sc.Policy(text))
    mine = sct.stage_indices(plan)
    mods, stages = build(mine, num_stages)
    runner = sct.schedule(stages, n_mb, loss_fn, plan=plan,
                          lowering="early", transport="shared")
    losses = run_step(runner, n_mb, 0 in mine, num_stages - 1 in mine)
    ref_losses, grads = reference(num_stages, n_mb)
    return {"kind": plan.kind, "choice": plan.choice,
            "placement": list(plan.placement),
            "grad_err": max_rel_err(mods, grads),
            "loss_err": max((abs(a - b) / abs(b) for a, b in
                             zip(losses, ref_losses)), default=0.0)}


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def trial_log(kind, rank, world, n_mb, out_dir):
    """The trial of KIND's plan as a user sees it: what it logs through
    logging.getLogger("stagecraft.torch"), the runner's copy of the plan
    recording what it kept (the plan given unchanged), and that copy saved
    and loaded running the kept candidate at once, without a trial, equal
    to the unpipelined model."""
    records = _Records()
    log = logging.getLogger("stagecraft.torch")
    log.addHandler(records)
    log.setLevel(logging.INFO)
    plan, num_stages, mine, first, last = uniform_plan(kind, rank, world,
                                                       n_mb)
    _, stages = build(mine, num_stages)
    runner = sct.schedule(stages, n_mb, loss_fn, plan=plan)
    steps = len(runner._trial._order)
    for _ in range(steps):
        run_step(runner, n_mb, first, last)
    kept = [runner.stagecraft_lowering, runner.stagecraft_transport]
    path = os.path.join(out_dir, f"plan{rank}.json")
    runner.stagecraft_plan.save(path)
    loaded = sc.load_plan(path)
    mods, stages = build(mine, num_stages)
    again = sct.schedule(stages, n_mb, loss_fn, plan=loaded)
    started = [again.stagecraft_lowering, again.stagecraft_transport,
               again._trial is None]
    run_step(again, n_mb, first, last)
    _, grads = reference(num_stages, n_mb)
    return {"messages": records.messages, "steps": steps, "kept": kept,
            "given": [plan.lowering, plan.transport],
            "saved": [loaded.lowering, loaded.transport],
            "again": started, "grad_err": max_rel_err(mods, grads)}


def profiled_problem(rank, world, n_mb, num_stages=None, **kwargs):
    """The costs of num_stages (default 2 x world) stages, profiled on a
    contiguous placement and gathered from every rank."""
    per_rank = (num_stages or 2 * world) // world
    _, probe = build(range(per_rank * rank, per_rank * (rank + 1)),
                     per_rank * world)
    tokens, _ = data(n_mb)
    hidden = torch.randn(B, T, D)
    return sct.profile(probe,
                       lambda i: (tokens[:B],) if i == 0 else (hidden,),
                       n_microbatches=n_mb, **kwargs)


def profile_auto(rank, world, n_mb):
    num_stages = 2 * world
    # Profile the stages of a contiguous placement, plan auto from the
    # measured costs (rank 0 plans, every rank gets the same plan), build
    # the stages auto placed here, train one step.
    spread = {}
    problem = profiled_problem(rank, world, n_mb, warmup=1, repeats=3,
                               spread=spread)
    plan = plan_all(problem, kind="auto", time_limit=1.0)
    mine = sct.stage_indices(plan, rank)
    mods, stages = build(mine, num_stages)
    runner = sct.schedule(stages, n_mb, loss_fn, plan=plan)
    losses = run_step(runner, n_mb, 0 in mine, num_stages - 1 in mine)
    ref_losses, grads = reference(num_stages, n_mb)
    return {"costs": [[s.forward, s.backward_input, s.backward_weight,
                       s.activation] for s in problem.stages],
            "mlir": problem.to_mlir(), "kind": plan.kind,
            "links": problem.links, "latency": problem.latency,
            "outputs": [s.output for s in problem.stages],
            "choice": plan.choice, "placement": plan.placement,
            "spread": {str(k): v for k, v in spread.items()}, "grad_err": max_rel_err(mods, grads),
            "losses": losses, "ref_losses": ref_losses}


def traced(kind, rank, world, n_mb, steps=3):
    """One warm-up step, then `steps` traced steps of Stagecraft's KIND plan
    (uniform costs) and of torch's own schedule of the kind; the trace's
    computes, its report, its Chrome trace, and the problem calibrated
    from it, planned again."""
    num_stages = stages_for(kind, world)
    problem = sc.Problem(ranks=world, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(num_stages)])
    plan = plan_all(problem, kind=kind)
    mine = sct.stage_indices(plan, rank)
    out = {"plan": [list(plan.actions(r)) for r in range(world)]}
    for who in ("stagecraft", "torch"):
        mods, stages = build(mine, num_stages)
        runner = (sct.schedule(stages, n_mb, loss_fn, plan=plan)
                  if who == "stagecraft" else torch_schedule(kind, stages, n_mb))
        run_step(runner, n_mb, 0 in mine, num_stages - 1 in mine)
        opened = time.perf_counter()
        with sct.trace(runner) as t:
            for _ in range(steps):
                run_step(runner, n_mb, 0 in mine, num_stages - 1 in mine)
        open_ms = 1e3 * (time.perf_counter() - opened)
        details = {}
        calibrated = sct.calibrate(t, problem, details=details)
        again = plan_all(calibrated, kind="auto", time_limit=1.0)
        out[who] = {
            "computes": t.computes, "waits": t.waits, "steps": t.steps,
            "step_times": t.step_times(), "report": t.report(plan),
            "chrome": json.loads(t.chrome_trace(plan)),
            "overhead": t.overhead(), "cpu": t.cpu(), "open_ms": open_ms,
            "calibrated": [[s.forward, s.backward_input, s.backward_weight]
                           for s in calibrated.stages],
            "latency": calibrated.latency, "details": details,
            "replanned": again.makespan,
            "simulated": sc.from_csv(calibrated, plan.to_csv()).makespan,
            # The step still trains: every stage has its gradients.
            "grads": all(p.grad is not None for m in mods.values()
                         for p in m.parameters()),
            # Nothing stays wrapped once the trace is closed.
            "unwrapped": ts._wait_batch_p2p.__name__ == "_wait_batch_p2p"
            and all("forward_one_chunk" not in st.__dict__ for st in stages)
            and "step" not in runner.__dict__,
        }
    return out


def trimmed_mean(values, cut=0.1):
    """The mean of `values` without the lowest and the highest `cut` of
    them: robust to a few stalled steps and, unlike the median, stable
    where a launch's steps take two modes (GPipe's here fall about 60/40
    into modes some 15 % apart, and the median of a series lands in one
    or near the gap)."""
    ordered = sorted(values)
    k = int(len(ordered) * cut)
    kept = ordered[k:len(ordered) - k]
    return sum(kept) / len(kept)


def settle(runner, n_mb, first, last):
    """Steps until a Stagecraft runner's lowering="auto" trial has kept a
    lowering (none for a runner without a trial)."""
    while getattr(runner, "stagecraft_lowering", "") is None:
        run_step(runner, n_mb, first, last)


#: Steps run before a trace that calibrates: the first steps after the
#: runner is built run slower (1F1B's traced window 12.6 ms after one
#: warm-up step against 10.8 ms for the steps after; after 10 the two
#: agree), and a calibration from them would predict slow steps.
WARMUP = 10


def calibration(kind, rank, world, n_mb, steps=20):
    """Stagecraft's KIND plan on torch's runtime: its simulated makespan on
    the costs `profile` measures and on the costs `calibrate` fits to
    `steps` traced steps (with and without the stretch that makes the
    simulator reproduce them), against the trimmed mean of `steps`
    measured steps (untraced; from the first rank's step() call to the
    last rank's return, and barrier to barrier; and their median), and of
    `steps` more untraced steps (the control: the A/A of the
    measurement). After a warm-up (and
    lowering="auto"'s trial), traced, measured and control steps take
    turns (each traced step its own trace), so that all see the machine
    in the same state."""
    num_stages = stages_for(kind, world)
    uniform = sc.Problem(ranks=world, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(num_stages)])
    plan = plan_all(uniform, kind=kind)
    mine = sct.stage_indices(plan, rank)
    _, stages = build(mine, num_stages)
    tokens, _ = data(n_mb)
    hidden = torch.randn(B, T, D)
    profiled = sct.profile(stages,
                           lambda i: (tokens[:B],) if i == 0 else (hidden,),
                           n_microbatches=n_mb)
    runner = sct.schedule(stages, n_mb, loss_fn, plan=plan)
    first, last = 0 in mine, num_stages - 1 in mine
    for _ in range(WARMUP):
        run_step(runner, n_mb, first, last)
    settle(runner, n_mb, first, last)
    traces, measured = [], []
    spans = {"measured": [], "control": []}
    # Each round a traced step (its own trace), then a measured step and a
    # control (untraced too: measured against control is the A/A of the
    # measurement), those two swapped so that each follows the traced
    # step and the other equally often, and runs as an even and as an odd
    # step of the runner equally often (round i starts at step 3i).
    for i in range(steps):
        for what in ("traced",) + (("measured", "control") if i % 4 < 2
                                   else ("control", "measured")):
            if what == "traced":
                with sct.trace(runner) as one:
                    run_step(runner, n_mb, first, last)
                traces.append(one)
                continue
            # The batch made before the clock starts: the step() call
            # alone is timed, as a trace times it.
            tokens, target = data(n_mb)
            dist.barrier()
            t0 = time.perf_counter()
            call_step(runner, tokens, target, first, last)
            spans[what].append((t0, time.perf_counter()))
            dist.barrier()
            if what == "measured":
                measured.append(1e3 * (time.perf_counter() - t0))
    # A step as the trace times it: from the first rank's step() call to
    # the last rank's return (perf_counter is one clock for the processes
    # of one machine), without the barrier that follows it.
    every = [None] * world
    dist.all_gather_object(every, spans)
    untraced = {what: [1e3 * (max(r[what][i][1] for r in every)
                              - min(r[what][i][0] for r in every))
                       for i in range(steps)] for what in spans}
    csv = plan.to_csv()
    details = {}
    calibrated = sct.calibrate(traces, profiled, details=details)
    # Trimmed means: a launch's steps may take two modes (GPipe's here),
    # where the median of one series lands in either.
    return {"measured": trimmed_mean(untraced["measured"]),
            "control": trimmed_mean(untraced["control"]),
            "measured_median": statistics.median(untraced["measured"]),
            "barrier_to_barrier": trimmed_mean(measured),
            "traced": trimmed_mean([t.step_times()[0] for t in traces]),
            "profiled": sc.from_csv(profiled, csv).makespan,
            "parts": sc.from_csv(sct.calibrate(traces, profiled,
                                               reproduce=None), csv).makespan,
            "calibrated": sc.from_csv(calibrated, csv).makespan,
            "stretch": details["stretch"], "latency": calibrated.latency,
            "kept": sct._trial._candidate_name(runner.stagecraft_lowering,
                                        runner.stagecraft_transport),
            "report": traces[-1].report(sc.from_csv(calibrated, csv))}


def memory(kinds, rank, world, n_mb):
    """Each kind's plan on profiled costs (two stages per rank for the V
    kinds, one for the others): its simulated peak activation per rank in
    bytes, and the peak that activation_memory measures over one step
    (after a warm-up step)."""
    out = {}
    for kind in kinds.split(","):
        num_stages = stages_for(kind, world)
        problem = profiled_problem(rank, world, n_mb, num_stages)
        plan = plan_all(problem, kind=kind)
        mine = sct.stage_indices(plan, rank)
        _, stages = build(mine, num_stages)
        runner = sct.schedule(stages, n_mb, loss_fn, plan=plan)
        first, last = 0 in mine, num_stages - 1 in mine
        run_step(runner, n_mb, first, last)
        with sct.activation_memory(runner) as m:
            run_step(runner, n_mb, first, last)
        out[kind] = {"measured": m.peaks, "live": m.live,
                     "simulated": [x * 2**20 for x in plan.peak_memory]}
    return out


#: The benchmark's configurations on `world` ranks: the stages' count, the
#: rank of stage s, and torch's built-in schedules with that placement.
SHAPES = {
    "v": (lambda w: 2 * w, lambda s, w: s if s < w else 2 * w - 1 - s,
          ("ScheduleZBVZeroBubble", "ScheduleDualPipeV")),
    "loop": (lambda w: 2 * w, lambda s, w: s % w,
             ("ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble")),
    "two": (lambda w: w, lambda s, w: s,
            ("ScheduleGPipe", "Schedule1F1B")),
}


def builtin(name, rank, world, num_stages, n_mb):
    """torch's built-in schedule class `name` on freshly built stages in
    its own placement."""
    cls = getattr(ts, name)
    if name in ("ScheduleGPipe", "Schedule1F1B"):
        _, stages = build([rank], num_stages)
        return cls(stages[0], n_mb, loss_fn=loss_fn)
    v = name in ("ScheduleZBVZeroBubble", "ScheduleDualPipeV")
    _, stages = build([rank, num_stages - 1 - rank] if v
                      else [rank, rank + world], num_stages)
    return cls(stages, n_mb, loss_fn=loss_fn)


def grid(shape, rank, world, n_mb, steps=20):
    """One configuration of the benchmark: the stages in SHAPE's placement
    (pinned), costs profiled; auto and every Stagecraft kind that plans on
    the placement planned, each traced 3 steps beside torch's built-ins of
    that placement; the costs calibrated from all the traces; every kind
    planned again, and auto within the simulated peak memory of each
    built-in; then those plans (one whose order repeats another's runs
    once, for both) and the built-ins, each built-in twice (an A/A control
    of the noise), alternate step by step, `steps` each after a warm-up,
    then in blocks of 5 steps back to back (`back_to_back`, 4 each).
    Medians in seconds; per schedule its simulated
    makespan and peak activation (calibrated costs) and its measured peak
    activation bytes per rank (one more step under activation_memory)."""
    count, rank_of, names = SHAPES[shape]
    num_stages = count(world)
    profiled = profiled_problem(rank, world, n_mb, num_stages)
    pinned = sc.Problem(
        ranks=world, microbatches=n_mb, stages=[
            sc.Stage(rank=rank_of(s, world), forward=st.forward,
                     backward_input=st.backward_input,
                     backward_weight=st.backward_weight,
                     fused_backward=st.fused_backward,
                     activation=st.activation, weight_grad=st.weight_grad)
            for s, st in enumerate(profiled.stages)])
    # The first plans: auto's and every kind's on the profiled costs,
    # each traced beside the built-ins, so that the calibration sees every
    # kind of compute (split and fused backwards) in the runtime that runs
    # it (torch's single-stage classes run a one-stage-per-rank plan of
    # GPipe's or 1F1B's order, its multi-stage runtime the others).
    runners = {name: builtin(name, rank, world, num_stages, n_mb)
               for name in names}
    for kind in sct.KINDS:
        try:
            plan = plan_all(pinned, kind=kind, time_limit=2.0)
        except sc.ScheduleError:
            continue
        _, stages = build(sct.stage_indices(plan, rank), num_stages)
        runners[f"first {kind}"] = sct.schedule(stages, n_mb, loss_fn,
                                                plan=plan)
    traces = []
    for runner in runners.values():
        for _ in range(WARMUP):
            run_step(runner, n_mb, *ends_of(runner))
        settle(runner, n_mb, *ends_of(runner))
        with sct.trace(runner) as t:
            for _ in range(3):
                run_step(runner, n_mb, *ends_of(runner))
        traces.append(t)
    calibrated = sct.calibrate(traces, pinned)
    orders = sct.torch_orders(calibrated)
    plans = {}
    for kind in sct.KINDS[:-1]:
        try:
            plans[kind] = plan_all(calibrated, kind=kind, time_limit=2.0)
        except sc.ScheduleError:
            continue
    # auto within the simulated peak memory of each built-in.
    for name in names:
        plans[f"auto within {name}'s memory"] = plan_all(
            calibrated, kind="auto", time_limit=2.0,
            memory_limit=max(orders[name].peak_memory))
    simulated = {who: (p.makespan, max(p.peak_memory))
                 for who, p in (plans | orders).items()}
    choice = {who: p.choice for who, p in plans.items()}
    seen, runners = {}, {name: runners[name] for name in names}
    # Each built-in twice: the second instance measures the noise between
    # two runners of the very same schedule (an A/A control).
    runners |= {f"{name} (again)": builtin(name, rank, world, num_stages,
                                           n_mb) for name in names}
    same = {}
    for who, p in plans.items():
        csv = p.to_csv()
        if csv in seen:  # (a built-in's twin is that built-in's)
            same[who] = same.get(seen[csv], seen[csv])
            continue
        seen[csv] = who
        _, stages = build(sct.stage_indices(p, rank), num_stages)
        runners[who] = sct.schedule(stages, n_mb, loss_fn, plan=p)
    try:
        # Each Stagecraft runner first runs lowering="auto"'s trial out
        # (its measured choice of lowering is part of its warm-up).
        for runner in runners.values():
            settle(runner, n_mb, *ends_of(runner))
        times = alternate(runners, steps, n_mb)
        # Then blocks of steps back to back, as a training loop runs them.
        blocks = back_to_back(runners, n_mb, rounds=4, block=5)
    except RuntimeError:
        for who, p in plans.items():
            print(f"--- {who}:\n{p.to_csv()}", file=sys.stderr, flush=True)
        raise
    peaks = {}
    for who, runner in runners.items():
        with sct.activation_memory(runner) as m:
            run_step(runner, n_mb, *ends_of(runner))
        peaks[who] = m.peaks
    median = {who: statistics.median(v) for who, v in times.items()}
    # What each Stagecraft runner kept: its lowering, "+quiet" where
    # gloo's transport ran quiet (`schedule` sets both on every runner).
    lowering = {who: sct._trial._candidate_name(runners[who].stagecraft_lowering,
                                         runners[who].stagecraft_transport)
                for who in plans if who in runners}
    for who, twin in same.items():  # a plan that ran as another's twin
        median[who], peaks[who] = median[twin], peaks[twin]
        # A built-in twin runs its own step loop: torch's lowering, and
        # gloo's transport as torch leaves it.
        lowering[who] = lowering.get(twin, "torch")
        blocks[who] = blocks[twin]
    return {"median": median, "blocks": blocks, "simulated": simulated,
            "peaks": peaks,
            "same": same, "choice": choice, "lowering": lowering}


def bench(kind, rank, world, n_mb, steps=20):
    """Median step seconds of Stagecraft's kind and of torch's own, their
    steps alternating after one warm-up step each; kind `auto-profiled`
    plans auto from this machine's measured costs."""
    if kind == "auto-profiled":
        num_stages = 2 * world
        problem = profiled_problem(rank, world, n_mb)
        plan = plan_all(problem, kind="auto", time_limit=2.0)
    else:
        num_stages = stages_for(kind, world)
        problem = sc.Problem(ranks=world, microbatches=n_mb,
                             stages=[sc.Stage() for _ in range(num_stages)])
        plan = plan_all(problem, kind=kind, time_limit=2.0)
    mine = sct.stage_indices(plan, rank)
    runners = {}
    for who in ["stagecraft", "torch"]:
        if who == "torch" and kind not in TORCH_CLASS:
            continue
        _, stages = build(mine, num_stages)
        runners[who] = (sct.schedule(stages, n_mb, loss_fn, plan=plan)
                        if who == "stagecraft"
                        else torch_schedule(kind, stages, n_mb))
    settle(runners["stagecraft"], n_mb, 0 in mine, num_stages - 1 in mine)
    times = alternate(runners, steps, n_mb, 0 in mine, num_stages - 1 in mine)
    out = {who: statistics.median(t) for who, t in times.items()}
    out["plan"] = plan.kind if kind != "auto-profiled" else "auto from profile"
    return out


def main():
    mode, kind, rank, world, port, out = sys.argv[1:7]
    n_mb = int(sys.argv[7]) if len(sys.argv) > 7 else 8
    # The measured steps of a benchmark mode, where the launcher says.
    steps = {"steps": int(sys.argv[8])} if len(sys.argv) > 8 else {}
    rank, world = int(rank), int(world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    try:
        if mode == "equal":
            result = equal(kind, rank, world, n_mb)
        elif mode == "stagecraft-lowering":
            result = equal(kind, rank, world, n_mb, lowering="stagecraft")
        elif mode == "early-lowering":
            result = equal(kind, rank, world, n_mb, lowering="early")
        elif mode == "quiet-transport":
            result = equal(kind, rank, world, n_mb, lowering="early",
                           transport="quiet")
        elif mode == "quiet-single-stage":
            result = equal(kind, rank, world, n_mb, lowering="torch",
                           transport="quiet")
        elif mode == "out-of-order":
            result = out_of_order(kind, rank, world, n_mb)
        elif mode == "scopes":
            result = scopes(kind, rank, world, n_mb)
        elif mode == "trial-bench":
            result = trial_bench(kind, rank, world, n_mb, **steps)
        elif mode == "transport-agreement":
            result = transport_agreement(kind, rank, world, n_mb)
        elif mode == "transport":
            result = transport_bench(kind, rank, world, n_mb, **steps)
        elif mode == "trial-order":
            result = trial_order(kind, rank, world, n_mb)
        elif mode == "lowering-trial":
            result = lowering_trial(kind, rank, world, n_mb)
        elif mode == "lowering":
            result = lowering_bench(kind, rank, world, n_mb, **steps)
        elif mode == "recompute":
            result = equal(kind, rank, world, n_mb, recompute="full")
        elif mode == "errors":
            result = errors(rank, world, n_mb)
        elif mode == "promises":
            result = promises(rank, world, n_mb)
        elif mode == "policy":
            result = policy_plan(rank, world, n_mb)
        elif mode == "trial-log":
            result = trial_log(kind, rank, world, n_mb, out)
        elif mode == "profile":
            result = profile_auto(rank, world, n_mb)
        elif mode == "differential":
            result = differential(rank, world, n_mb, int(kind), out)
        elif mode == "trace":
            result = traced(kind, rank, world, n_mb)
        elif mode == "calibration":
            result = calibration(kind, rank, world, n_mb, **steps)
        elif mode == "memory":
            result = memory(kind, rank, world, n_mb)
        elif mode == "grid":
            result = grid(kind, rank, world, n_mb, **steps)
        elif mode == "bench":
            result = bench(kind, rank, world, n_mb, **steps)
        else:
            raise SystemExit(f"unknown mode {mode}")
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
