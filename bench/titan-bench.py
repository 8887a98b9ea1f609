#!/usr/bin/env python3
"""torchtitan's own trainer running Stagecraft's plan against its built-in
schedules: the llama3 debug model, PP = 2 on 2 CPU processes (gloo, one
thread each), 8 microbatches of 1 at sequence 256, activation
checkpointing none, computing in fp32: torchtitan computes in
training.mixed_precision_param (bf16 by default, through the FSDP policy it
installs even at shard degree 1), which a CPU without bf16 matrix
instructions runs through torch's reference GEMM loop, as no GPU job does.

Through python/tests/titan_cpu.py, the tests' harness (device cpu, dense
attention in place of FlexAttention, generated tokenizer and corpus); it
is the harness only, stagecraft.titan patches nothing.

1. The costs: `titan.profile` times the model's own modules (torchtitan's
   code, built from its config, with its chunked loss on the head) as
   torch's runtime runs a stage, in this process, one thread.
2. The plans: `titan.plan` on those costs: auto (split, placement,
   schedule), and kind 1f1b on one stage a rank (Stagecraft's split
   alone, run with torchtitan's own 1F1B class, no CSV).
3. The runs, in rounds: each configuration once a round, one launch of
   STEPS steps each, the first 2 of each launch uncounted (the first
   compiles the block mask). A launch's figures are the medians over its
   counted steps of the pipeline schedule's time (torchtitan's
   forward_backward_step: the schedule, apart from data loading, gradient
   clipping and the optimizer) and of the whole train step, each the
   slower rank's; the table gives the median over rounds and the spread
   (lowest to highest launch).

    python3 bench/titan-bench.py [rounds] [steps]

prints the table of bench/results/titan.md.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "tests"))

BUILTINS = ["1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble",
            "ZBVZeroBubble", "DualPipeV"]
SEQ, BATCH, PP = 256, 8, 2
# The profile and every run compute in fp32 (the docstring says why).
FP32 = ["--training.mixed_precision_param", "float32"]


def _plans(assets):
    import torch
    import titan_cpu
    from stagecraft import titan
    torch.set_num_threads(1)
    titan_cpu._install()
    config = titan.load_config("llama3", "llama3_debugmodel",
                               ["--hf_assets_path", assets["tokenizer"]]
                               + FP32)
    llm = titan.from_config(config, "llama3_debugmodel")
    hw = titan.Hardware(memory=64e9, activation_bytes=4)
    model = titan.build_model(config)
    units = titan.profile(model, llm, SEQ, 1, hw, repeats=10,
                          loss_fn=titan.build_loss(config, model))
    common = dict(pp=PP, local_batch_size=BATCH, seq_len=SEQ, units=units,
                  hardware=hw, module="llama3", config="llama3_debugmodel")
    auto = titan.plan(llm, time_limit=10.0, **common)
    split = titan.plan(llm, kind="1f1b", stages_per_rank=[1], **common)
    return units, auto, split


def _run(workdir, assets, flags, steps):
    log = os.path.join(workdir, "log")
    for rank in range(PP):
        for suffix in ("", ".actions", ".order"):
            if os.path.exists(f"{log}.{rank}{suffix}"):
                os.remove(f"{log}.{rank}{suffix}")
    env = dict(os.environ, TITAN_CPU_LOG=log, OMP_NUM_THREADS="1",
               TORCHINDUCTOR_CACHE_DIR=os.path.join(workdir, "inductor"))
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node", str(PP),
            os.path.join(HERE, "..", "python", "tests", "titan_cpu.py"),
            "--module", "llama3", "--config", "llama3_debugmodel",
            "--hf_assets_path", assets["tokenizer"],
            "--dataloader.dataset_path", assets["corpus"],
            "--training.steps", str(steps), "--debug.seed", "42",
            "--checkpoint.no-enable", "--validator.no-enable",
            "--dump_folder", os.path.join(workdir, "dump"), *flags]
    done = subprocess.run(args, cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
    rows = {}
    for rank in range(PP):
        with open(f"{log}.{rank}") as f:
            for line in f:
                r = json.loads(line)
                # A step ends when its slowest rank does.
                prev = rows.get(r["step"], (0.0, 0.0, -1.0))
                rows[r["step"]] = (max(prev[0], r["pipeline"]),
                                   max(prev[1], r["seconds"]),
                                   max(prev[2], r["loss"]))
    counted = sorted(rows)[2:]
    # The trace: each rank's busy time a step (its stages' F, B/I, W and
    # the loss, measured in the run), median over the counted steps.
    busy = []
    for rank in range(PP):
        per_step = {}
        with open(f"{log}.{rank}.actions") as f:
            for line in f:
                a = json.loads(line)
                per_step[a["step"]] = per_step.get(a["step"], 0.0) + \
                    a["end"] - a["start"]
        busy.append(statistics.median(per_step[s] for s in counted))
    return (statistics.median(rows[s][0] for s in counted),
            statistics.median(rows[s][1] for s in counted),
            rows[max(rows)][2], busy)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    import titan_cpu
    workdir = tempfile.mkdtemp(prefix="titan-bench-")
    try:
        assets = titan_cpu.make_assets(os.path.join(workdir, "assets"))
        units, auto, split = _plans(assets)
        auto.write(os.path.join(workdir, "plan"))
        csv = os.path.join(workdir, "plan", "schedule.csv")
        base = ["--parallelism.pipeline_parallel_degree", str(PP),
                "--training.local_batch_size", str(BATCH),
                "--training.seq_len", str(SEQ),
                "--training.disable_cuda_graphs"]
        configs = {f"torchtitan {b}": base + [
            "--parallelism.pipeline_parallel_schedule", b,
            "activation-checkpoint:none"] for b in BUILTINS}
        split_flags = split.flags("unused")
        at = split_flags.index("--parallelism.pipeline_parallel_schedule_csv")
        configs["torchtitan 1F1B, Stagecraft's split"] = \
            split_flags[:at] + split_flags[at + 2:]
        configs["Stagecraft's plan (auto)"] = auto.flags(csv)
        for name in configs:
            # Before the trailing `activation-checkpoint:...` choice.
            configs[name] = FP32 + configs[name]
        times = {name: [] for name in configs}
        steps_all = {name: [] for name in configs}
        losses = {}
        busy = {name: [] for name in configs}
        for _ in range(rounds):
            for name, flags in configs.items():
                pipeline, whole, loss, ranks = _run(workdir, assets, flags,
                                                    steps)
                times[name].append(pipeline)
                steps_all[name].append(whole)
                busy[name].append(ranks)
                losses[name] = loss
        print("costs (ms, profiled): " + ", ".join(
            f"{u.name} F {u.forward * 1e3:.2f} I {u.backward_input * 1e3:.2f}"
            f" W {u.backward_weight * 1e3:.2f}" for u in
            (units[0], units[1], units[-1])))
        print(f"plan: {auto.schedule_class} CSV, {auto.schedule.choice}; "
              f"split {[len(n) for n in auto.module_fqns]} modules a stage; "
              f"simulated {auto.schedule.makespan * 1e3:.1f} ms")
        print(f"Stagecraft's 1F1B split: "
              f"{[len(n) for n in split.module_fqns]} modules a stage")
        print()
        best = min(statistics.median(times[f"torchtitan {b}"])
                   for b in BUILTINS)
        best_step = min(statistics.median(steps_all[f"torchtitan {b}"])
                        for b in BUILTINS)
        print("| run | pipeline schedule (s), median of launches | spread | "
              "vs fastest built-in | whole train step (s) | spread | vs "
              "fastest | busy per rank (s, measured) | loss at the last "
              "step |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name in configs:
            med = statistics.median(times[name])
            whole = statistics.median(steps_all[name])
            ranks = " / ".join(
                f"{statistics.median(b[r] for b in busy[name]):.3f}"
                for r in range(PP))
            print(f"| {name} | {med:.3f} | {min(times[name]):.3f}-"
                  f"{max(times[name]):.3f} | {med / best:.3f} | {whole:.3f} "
                  f"| {min(steps_all[name]):.3f}-{max(steps_all[name]):.3f} "
                  f"| {whole / best_step:.3f} | {ranks} | "
                  f"{losses[name]:.4f} |")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
