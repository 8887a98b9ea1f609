"""Stagecraft plans torchtitan runs: the split of a decoder model into
pipeline stages, the schedule, and every flag torchtitan needs to run
exactly that plan.

    from stagecraft import titan
    model = titan.Llm(name="llama3-8b", layers=32, dim=4096, heads=32,
                      kv_heads=8, ffn_hidden=14336, vocab=128256)
    p = titan.plan(model, pp=4, local_batch_size=16, seq_len=8192)
    print(p.summary())
    p.write("plan")          # schedule.csv, plan.json, command.sh, summary.txt

or, from torchtitan's own config registry (torchtitan installed):

    python -m stagecraft.titan plan --module llama3 \\
        --config llama3_debugmodel --pp 2 --out plan

Costs come from FLOPs and bytes (`module_costs`, on the `Hardware`
given), or from the caller (`plan(units=...)`, e.g. profiled). torchtitan
loads the CSV compute-only and takes the stage placement from the schedule
class the plan names; `check_run` applies its rules (placement, microbatch
count, split backward under selective checkpointing) before anything
launches. Nothing here imports or patches torchtitan except
`load_config`, which reads its configs.
"""

from ._model import Hardware, Llm, from_config, load_config, module_costs
from ._profile import build_loss, build_model, compute_dtype, profile
from ._plan import (PLACEMENT_CLASS, TitanPlan, default_split, placement_of,
                    plan)
from ._rules import CLASSES, check_run, class_placement, read_csv

__all__ = ["CLASSES", "Hardware", "Llm", "PLACEMENT_CLASS", "TitanPlan",
           "build_loss", "build_model", "check_run", "compute_dtype", "class_placement", "default_split",
           "from_config", "profile",
           "load_config", "module_costs", "placement_of", "plan", "read_csv"]
