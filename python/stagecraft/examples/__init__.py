"""Examples that ship with the wheel, run as modules (one process per
rank: gloo on the CPU, NCCL on GPUs):

    torchrun --standalone --nproc-per-node 2 -m stagecraft.examples.quickstart [OUT_DIR]
    torchrun --standalone --nproc-per-node 2 -m stagecraft.examples.torch_pipeline [KIND]

`quickstart`: profile, plan on rank 0 and share the plan, rebuild the
stages where the plan puts them, train, trace a step (Chrome trace), save
and load the plan. `torch_pipeline`: a fixed kind on uniform costs.
"""
