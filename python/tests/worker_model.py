"""The model and step helpers the multi-process tests of stagecraft.torch
share (python/tests/torch_worker.py runs them): a small transformer, one
block per stage, its unpipelined reference, and running, alternating and
timing steps of runners."""

import os
import re
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as ts

import stagecraft as sc
import stagecraft.torch as sct

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
