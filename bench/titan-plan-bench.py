#!/usr/bin/env python3
"""stagecraft.titan's plans for llama3 8B- and 70B-like models at PP 4, 8
and 16 under 80 GB a device, on paper: costs from FLOPs and bytes
(`titan.module_costs`: an H100 at 40 % of its dense bf16 peak, 3.35 TB/s,
bf16 activations), seq 8192, microbatches of 1, 2 x PP of them a step.

Against torchtitan's default split (embedding and head each weighed as
one layer, `default_split`) with its 1F1B (one stage a rank) and
Interleaved1F1B (two), simulated on the same costs, each with the
cheaper activation checkpointing that fits (none, else full).

State per parameter: 8B, 16 bytes (fp32 weights, gradients, Adam); 70B,
its torchtitan config shards with FSDP, here over 8 data-parallel ranks:
16 / 8 + 2 (the gathered bf16 weights) = 4 bytes.

    python3 bench/titan-plan-bench.py [time_limit_seconds]

prints the markdown table of bench/results/titan-plan.md.
"""

import sys

import stagecraft as sc
from stagecraft import titan

MODELS = [
    (titan.Llm(name="llama3-8b", layers=32, dim=4096, heads=32, kv_heads=8,
               ffn_hidden=14336, vocab=128256), 16.0),
    (titan.Llm(name="llama3-70b", layers=80, dim=8192, heads=64, kv_heads=8,
               ffn_hidden=28672, vocab=128256), 4.0),
]
SEQ = 8192


def _split(plan_fqns):
    """Blocks per stage, with E / H marking the embedding and the head."""
    out = []
    for names in plan_fqns:
        blocks = sum(1 for n in names if n.startswith("layers."))
        mark = ("E+" if "tok_embeddings" in names else "") + str(blocks) + (
            "+H" if "lm_head" in names else "")
        out.append(mark)
    return " ".join(out)


def _builtin(model, hw, pp, n_mb, per_rank, name):
    """torchtitan's default split with the built-in class `name`, the
    cheaper checkpointing that fits; (makespan, peak, ac) or None."""
    from stagecraft.torch import torch_orders
    for ac in ("none", "full"):
        units = titan.module_costs(model, SEQ, 1, hw, ac)
        first = titan.default_split(len(units), pp * per_rank)
        problem = sc.Problem(ranks=pp, microbatches=n_mb,
                             stages=sc.stages_from_partition(units, first))
        order = torch_orders(problem).get(name)
        if order is not None and max(order.peak_memory) <= hw.memory:
            return order.makespan, max(order.peak_memory), ac
    return None


def main():
    time_limit = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    print("| model | PP | microbatches | Stagecraft's split (blocks per stage)"
          " | schedule | AC | step (s) | peak (GB) | default split + 1F1B:"
          " step, peak, AC | default split + Interleaved1F1B | plan / best"
          " built-in |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model, state in MODELS:
        hw = titan.Hardware(state_bytes=state)
        for pp in (4, 8, 16):
            n_mb = 2 * pp
            p = titan.plan(model, pp=pp, local_batch_size=n_mb, seq_len=SEQ,
                           hardware=hw, time_limit=time_limit)
            s = p.schedule
            cells = []
            steps = []
            for per_rank, name in ((1, "Schedule1F1B"),
                                   (2, "ScheduleInterleaved1F1B")):
                got = _builtin(model, hw, pp, n_mb, per_rank, name)
                if got is None:
                    cells.append("does not fit")
                else:
                    steps.append(got[0])
                    cells.append(f"{got[0]:.3f}, {got[1] / 1e9:.1f}, {got[2]}")
            ratio = f"{s.makespan / min(steps):.3f}" if steps else "-"
            print(f"| {model.name} | {pp} | {n_mb} | {_split(p.module_fqns)} "
                  f"| {p.schedule_class} CSV: {s.choice or s.kind} "
                  f"| {p.activation_checkpoint} | {s.makespan:.3f} "
                  f"| {max(s.peak_memory) / 1e9:.1f} | {cells[0]} | {cells[1]}"
                  f" | {ratio} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
