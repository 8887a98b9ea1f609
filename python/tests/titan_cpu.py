"""Runs torchtitan's own trainer on CPU processes over gloo, for the tests
and the benchmark only: this is a harness, not part of stagecraft.

torchtitan 0.3 trains on accelerators. These stand-ins let its unchanged
trainer, pipeline split and schedules run on a 2-core machine:
- the device is `cpu` (it would pick cuda), with a stand-in for the
  `torch.cuda` memory statistics its metrics read;
- attention: FlexAttention has no CPU backward, so its forward computes the
  same masked attention densely (the block mask's own mask_mod, through
  scaled_dot_product_attention);
- torch.compile off: torchtitan compiles only its block-mask builder
  (compile is off in its configs), which takes 20 s on 2 cores;
- assets: the wheel carries no tokenizer or C4 sample, so `make_assets`
  trains a small BPE tokenizer with `tokenizers` and writes a generated
  text corpus.

    torchrun --nproc_per_node 2 titan_cpu.py --module llama3 \\
        --config llama3_debugmodel --hf_assets_path DIR/tokenizer \\
        --dataloader.dataset_path DIR/corpus ...

Every step's loss, wall time and the time in its pipeline schedule
(`forward_backward_step`, the schedule's step without the data loading,
gradient clipping and optimizer step) go to $TITAN_CPU_LOG.<rank> (JSON
lines, one per step; the loss is -1 on ranks without the last stage), and the
compute order a rank loaded from a schedule CSV to $TITAN_CPU_LOG.<rank>.order.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import types


def make_assets(directory: str, vocab: int = 2048, documents: int = 400,
                seed: int = 0) -> dict[str, str]:
    """A BPE tokenizer (at most `vocab` ids, with <s> and </s>) and a text
    corpus of generated sentences, under `directory`."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    rng = random.Random(seed)
    words = ["pipeline", "stage", "rank", "schedule", "forward", "backward",
             "weight", "gradient", "memory", "bubble", "microbatch", "layer",
             "model", "token", "train", "step", "loss", "split", "device",
             "order", "the", "a", "of", "and", "to", "in", "is", "runs"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(60, 300)))
             + "." for _ in range(documents)]
    corpus = os.path.join(directory, "corpus")
    tok_dir = os.path.join(directory, "tokenizer")
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(tok_dir, exist_ok=True)
    with open(os.path.join(corpus, "train.jsonl"), "w") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=min(vocab, 512),
                                  special_tokens=["<unk>", "<s>", "</s>"])
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(os.path.join(tok_dir, "tokenizer.json"))
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>",
                   "add_bos_token": True, "add_eos_token": True}, f)
    return {"tokenizer": tok_dir, "corpus": corpus}


class _CpuDevice(types.ModuleType):
    """What torchtitan calls on its device module, for the CPU."""

    def __init__(self):
        super().__init__("cpu_device")

    def set_device(self, device):
        pass

    def device_count(self):
        return 1

    def current_device(self):
        return 0

    def get_device_name(self, device=None):
        return "cpu"

    def get_device_properties(self, device=None):
        return types.SimpleNamespace(total_memory=1 << 34, name="cpu")

    def memory_stats(self, device=None):
        return {"active_bytes.all.peak": 0, "reserved_bytes.all.peak": 0,
                "num_alloc_retries": 0, "num_ooms": 0}

    def reset_peak_memory_stats(self, device=None):
        pass

    def empty_cache(self):
        pass

    def synchronize(self, device=None):
        pass

    def is_available(self):
        return True


def _dense_mask(mask_mod, batch, lq, lk, device):
    import torch
    from torch.nn.attention.flex_attention import create_mask
    grids = (torch.arange(batch, device=device).view(-1, 1, 1, 1),
             torch.zeros(1, 1, 1, 1, dtype=torch.long, device=device),
             torch.arange(lq, device=device).view(1, 1, -1, 1),
             torch.arange(lk, device=device).view(1, 1, 1, -1))
    try:
        mask = mask_mod(*grids)
        if mask.dtype == torch.bool and mask.dim() == 4:
            return mask.expand(batch, 1, lq, lk)
    except (RuntimeError, IndexError, TypeError):
        pass
    return create_mask(mask_mod, batch, None, lq, lk, device=device)


def _dense_flex_forward(self, q_BLNH, k_BLNH, v_BLNH, *, attention_masks,
                        score_mod=None, scale=None, enable_gqa=False,
                        out_transform=None, **kwargs):
    """FlexAttention's forward computed densely: the block mask's mask_mod
    over every (query, key) pair, then scaled_dot_product_attention."""
    import torch.nn.functional as F
    if score_mod is not None or out_transform is not None:
        raise NotImplementedError(
            "titan_cpu: score_mod and out_transform have no dense stand-in")
    q, k, v = (t.transpose(1, 2) for t in (q_BLNH, k_BLNH, v_BLNH))
    b, _, lq, _ = q.shape
    # One dense mask per block mask (a microbatch's, shared by its layers):
    # its mask_mod over broadcast index grids (20x faster than create_mask's
    # vmap at 256 positions, the same mask), or create_mask where the
    # mask_mod does not broadcast.
    mask = getattr(attention_masks, "_titan_cpu_dense", None)
    if mask is None:
        mask = _dense_mask(attention_masks.mask_mod, b, lq, k.shape[2],
                           q.device)
        attention_masks._titan_cpu_dense = mask
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                         scale=scale, enable_gqa=enable_gqa)
    return out.transpose(1, 2)


def _install() -> None:
    # torchtitan compiles only its block-mask builder here (compile is off
    # in its config); eager, a launch starts 20 s sooner on 2 cores.
    import torch._dynamo
    torch._dynamo.config.disable = True
    import torchtitan.tools.utils as tu
    device = _CpuDevice()
    tu.device_type, tu.device_module = "cpu", device
    import torchtitan.components.metrics as metrics
    import torchtitan.distributed.parallel_dims as parallel_dims
    import torchtitan.distributed.utils as dist_utils
    for module in (metrics, dist_utils):
        module.device_type, module.device_module = "cpu", device
    parallel_dims.device_type = "cpu"
    from torchtitan.models.common.attention import FlexAttention
    FlexAttention.forward = _dense_flex_forward
    _log_steps()


def _log_steps() -> None:
    """Each step's loss (on the rank that has it) and wall time, as JSON
    lines in $TITAN_CPU_LOG."""
    path = os.environ.get("TITAN_CPU_LOG")
    if not path:
        return
    from torchtitan.components.metrics import MetricsProcessor
    from torchtitan.trainer import Trainer
    original_log = MetricsProcessor.log
    original_step = Trainer.train_step
    original_pipeline = Trainer.forward_backward_step
    state = {"start": None, "pipeline": 0.0, "actions": []}

    def train_step(self, *args, **kwargs):
        state["start"], state["pipeline"] = time.perf_counter(), 0.0
        return original_step(self, *args, **kwargs)

    def forward_backward_step(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original_pipeline(self, *args, **kwargs)
        finally:
            state["pipeline"] += time.perf_counter() - start

    def log(self, step, global_avg_loss, *args, **kwargs):
        rank = int(os.environ.get("RANK", "0"))
        with open(f"{path}.{rank}.actions", "a") as f:
            for action in state["actions"]:
                f.write(json.dumps(dict(action, step=step)) + "\n")
        state["actions"] = []
        with open(f"{path}.{rank}", "a") as f:
            f.write(json.dumps({
                "step": step, "loss": float(global_avg_loss),
                "seconds": time.perf_counter() - state["start"],
                "pipeline": state["pipeline"]}) + "\n")
        return original_log(self, step, global_avg_loss, *args, **kwargs)

    MetricsProcessor.log = log
    Trainer.train_step = train_step
    Trainer.forward_backward_step = forward_backward_step

    from torch.distributed.pipelining.schedules import (
        _PipelineScheduleRuntime)
    original_load = _PipelineScheduleRuntime._load_csv

    def load_csv(self, filename, *args, **kwargs):
        out = original_load(self, filename, *args, **kwargs)
        with open(f"{path}.{self.rank}.order", "w") as f:
            json.dump([str(a) for a in self.pipeline_order[self.rank]
                       if a is not None], f)
        return out

    _PipelineScheduleRuntime._load_csv = load_csv
    _log_actions(path, state)


def _log_actions(path: str, state: dict) -> None:
    """Every forward, backward (input, or fused) and weight-gradient chunk a
    stage runs, and each loss, with its start and end in seconds since its
    step began: kept in memory and written with the step's log line, as
    JSON lines in $TITAN_CPU_LOG.<rank>.actions (where the time of a step
    goes, measured in torchtitan's own run)."""
    from torch.distributed.pipelining import schedules
    from torch.distributed.pipelining.stage import PipelineStage

    def timed(name, original, what):
        def run(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                end = time.perf_counter()
                chunk = args[0] if args and isinstance(args[0], int) else -1
                stage = getattr(self, "stage_index", -1)
                state["actions"].append({
                    "what": what, "stage": -1 if what == "L" else stage,
                    "chunk": chunk, "start": start - state["start"],
                    "end": end - state["start"]})
        run.__name__ = name
        return run

    for name, what in (("forward_one_chunk", "F"),
                       ("backward_one_chunk", "B"),
                       ("backward_weight_one_chunk", "W")):
        setattr(PipelineStage, name,
                timed(name, getattr(PipelineStage, name), what))
    schedules._PipelineSchedule._compute_loss = timed(
        "_compute_loss", schedules._PipelineSchedule._compute_loss, "L")


def main() -> None:
    import torch
    torch.set_num_threads(1)
    _install()
    from torchtitan.train import main as titan_main
    titan_main()


if __name__ == "__main__":
    if sys.argv[1:2] == ["assets"]:
        print(json.dumps(make_assets(sys.argv[2])))
    else:
        main()
