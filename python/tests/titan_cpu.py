"""Runs torchtitan's own trainer on CPU processes over gloo, for the tests
and the benchmark only: this is a harness, not part of stagecraft.

torchtitan 0.3 trains on accelerators. Three stand-ins let its unchanged
trainer, pipeline split and schedules run on a 2-core machine:
- the device is `cpu` (it would pick cuda), with a stand-in for the
  `torch.cuda` memory statistics its metrics read;
- attention: FlexAttention has no CPU backward, so its forward computes the
  same masked attention densely (the block mask's own mask_mod, through
  scaled_dot_product_attention);
- assets: the wheel carries no tokenizer or C4 sample, so `make_assets`
  trains a small BPE tokenizer with `tokenizers` and writes a generated
  text corpus.

    torchrun --nproc_per_node 2 titan_cpu.py --module llama3 \\
        --config llama3_debugmodel --hf_assets_path DIR/tokenizer \\
        --dataloader.dataset_path DIR/corpus ...

Every step's loss and wall time go to $TITAN_CPU_LOG.<rank> (JSON lines,
one per step; the loss is -1 on ranks without the last stage), and the
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


def _dense_flex_forward(self, q_BLNH, k_BLNH, v_BLNH, *, attention_masks,
                        score_mod=None, scale=None, enable_gqa=False,
                        out_transform=None, **kwargs):
    """FlexAttention's forward computed densely: the block mask's mask_mod
    over every (query, key) pair, then scaled_dot_product_attention."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import create_mask
    if score_mod is not None or out_transform is not None:
        raise NotImplementedError(
            "titan_cpu: score_mod and out_transform have no dense stand-in")
    q, k, v = (t.transpose(1, 2) for t in (q_BLNH, k_BLNH, v_BLNH))
    b, _, lq, _ = q.shape
    mask = create_mask(attention_masks.mask_mod, b, None, lq, k.shape[2],
                       device=q.device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                         scale=scale, enable_gqa=enable_gqa)
    return out.transpose(1, 2)


def _install() -> None:
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
    state = {"start": None}

    def train_step(self, *args, **kwargs):
        state["start"] = time.perf_counter()
        return original_step(self, *args, **kwargs)

    def log(self, step, global_avg_loss, *args, **kwargs):
        rank = int(os.environ.get("RANK", "0"))
        with open(f"{path}.{rank}", "a") as f:
            f.write(json.dumps({
                "step": step, "loss": float(global_avg_loss),
                "seconds": time.perf_counter() - state["start"]}) + "\n")
        return original_log(self, step, global_avg_loss, *args, **kwargs)

    MetricsProcessor.log = log
    Trainer.train_step = train_step

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
