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
MODE `ddp` / `fsdp` (`ddp-stagecraft` /
`fsdp-stagecraft`: with Stagecraft's lowering and gradient cells): WORLD /
2 replicas of a 2-rank pipeline, each stage in DDP or FSDP2 over its
data-parallel group, against the unpipelined model over every replica's
microbatches.
Each rank writes OUT_DIR/rank<R>.json.

The modes live in worker_checks.py (correctness) and worker_bench.py
(benchmarks), the model and the step helpers they share in worker_model.py.
"""

import json
import os
import sys

import torch
import torch.distributed as dist

from worker_checks import (data_parallel, differential, equal, errors,
                           lowering_trial,
                           out_of_order, policy_plan, profile_auto, promises,
                           scopes, transport_agreement, trial_log)
from worker_bench import (bench, calibration, grid, lowering_bench, memory,
                          traced, transport_bench, trial_bench, trial_order)


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
        elif mode in ("ddp", "fsdp"):
            result = data_parallel(kind, rank, world, n_mb, mode)
        elif mode in ("ddp-stagecraft", "fsdp-stagecraft"):
            result = data_parallel(kind, rank, world, n_mb,
                                   mode.split("-")[0], lowering="stagecraft")
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
