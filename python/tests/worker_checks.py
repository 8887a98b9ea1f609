"""The correctness modes of python/tests/torch_worker.py: plans trained
against the unpipelined model, lowerings, trials, bad input, profiling."""

import logging
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import schedules as ts

import stagecraft as sc
import stagecraft.torch as sct
from stagecraft.torch._transport import transport_threads

from worker_model import (TORCH_CLASS, B, StageModule, build, call_step, data,
                          loss_fn, max_rel_err, plan_all, profiled_problem,
                          reference, relabeled, run_step, settle, stages_for,
                          torch_schedule, uniform_plan)


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


def data_parallel(kind, rank, world, n_mb, wrap, lowering="torch"):
    """The pipeline inside data parallelism on a 2-D layout: world / 2
    replicas of a 2-rank pipeline (replica d is ranks 2d and 2d + 1; each
    pipeline rank's data-parallel group is that rank of every replica).
    Each stage module is wrapped in DDP or FSDP2's `fully_shard` over its
    data-parallel group; replica d trains microbatches d * n_mb ..
    (d + 1) * n_mb - 1 with Stagecraft's KIND plan on torch's runtime. The
    gradients must equal the unpipelined model's over all the replicas'
    microbatches (averaged: the pipeline over its microbatches, the data
    parallelism over its replicas), and each replica's losses its own
    microbatches'. `lowering`: sct.schedule's (torch's rule places the
    reductions; "stagecraft": Stagecraft's CSV cells). KIND "dp-auto":
    sct.plan(data_parallel=...) chooses the schedule with its reductions
    (each stage's gradient bytes reduced over the replicas)."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage
    from torch.nn.parallel import DistributedDataParallel

    pp, replicas = 2, world // 2
    replica, pp_rank = divmod(rank, pp)
    # Every rank creates every group, in the same order.
    pp_groups = [dist.new_group(list(range(d * pp, (d + 1) * pp)))
                 for d in range(replicas)]
    dp_groups = [dist.new_group([d * pp + r for d in range(replicas)])
                 for r in range(pp)]
    pp_group, dp_group = pp_groups[replica], dp_groups[pp_rank]
    num_stages = stages_for(kind, pp)
    problem = sc.Problem(ranks=pp, microbatches=n_mb,
                         stages=[sc.Stage() for _ in range(num_stages)])
    if kind == "dp-auto":
        plan = sct.plan(problem, time_limit=1.0, group=pp_group,
                        data_parallel=dict(
                            degree=replicas, grad_bytes=[2.0] * num_stages,
                            sharding="full" if wrap == "fsdp" else "none"))
    else:
        plan = sct.plan(problem, kind=kind, time_limit=1.0, group=pp_group)
    mine = sct.stage_indices(plan, group=pp_group)
    mods = {i: StageModule(i, num_stages) for i in mine}
    wrapped = {}
    for i, mod in mods.items():
        if wrap == "ddp":
            wrapped[i] = DistributedDataParallel(mod, process_group=dp_group)
        else:
            mesh = torch.distributed.device_mesh.DeviceMesh.from_group(
                dp_group, "cpu")
            wrapped[i] = fully_shard(mod, mesh=mesh)
    stages = [PipelineStage(wrapped[i], i, num_stages, torch.device("cpu"),
                            group=pp_group) for i in mine]
    runner = sct.schedule(stages, n_mb, loss_fn, plan=plan, lowering=lowering,
                          transport="shared")
    has_first, has_last = 0 in mine, num_stages - 1 in mine
    tokens, target = data(replicas * n_mb)
    rows = slice(replica * n_mb * B, (replica + 1) * n_mb * B)
    losses = [l.item() for l in call_step(runner, tokens[rows], target[rows],
                                          has_first, has_last)]
    ref_losses, grads = reference(num_stages, replicas * n_mb)
    if wrap == "fsdp":
        # Each rank holds its shard of every gradient: gather them whole.
        for mod in mods.values():
            for p in mod.parameters():
                p.grad = p.grad.full_tensor()
    mine_ref = ref_losses[replica * n_mb:(replica + 1) * n_mb]
    return {"placement": plan.placement, "kind": plan.kind,
            "choice": plan.choice, "grad_err": max_rel_err(mods, grads),
            "loss_err": max((abs(a - b) / abs(b) for a, b in
                             zip(losses, mine_ref)), default=0.0),
            "losses": len(losses), "replica": replica,
            "wrapped": type(next(iter(wrapped.values()))).__name__,
            # The data-parallel cells this rank ran (none where torch's
            # single-stage class runs the plan with its own step loop).
            "cells": sorted({str(a)[len(str(a.stage_index)):] for a in
                             getattr(runner, "pipeline_order_with_comms",
                                     {}).get(pp_rank, [])
                             if "GRAD" in str(a) or "SHARD" in str(a)})}
