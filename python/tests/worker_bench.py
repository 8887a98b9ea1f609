"""The benchmark modes of python/tests/torch_worker.py: trials, transports,
lowerings, traces and calibration, memory, and the grid of
bench/torch-auto-bench.py."""

import json
import statistics
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import schedules as ts

import stagecraft as sc
import stagecraft.torch as sct
from stagecraft.torch._trace import _threads
from stagecraft.torch._transport import quiet as quiet_transport
from stagecraft.torch._transport import transport_threads

from worker_model import (B, D, SHAPES, T, TORCH_CLASS, WARMUP, alternate,
                          back_to_back, build, builtin, call_step, data,
                          ends_of, loss_fn, plan_all, profiled_problem,
                          run_step, settle, stages_for, torch_schedule,
                          trimmed_mean, uniform_plan)


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
