"""A torchtitan decoder-only model as Stagecraft sees it: its shape (read
from torchtitan's own config registry, or given), and the per-module
costs and memory from FLOPs and bytes.

The modules are those torchtitan's pipeline split names
(`parallelism.module_fqns_per_model_part`): `tok_embeddings`,
`layers.0` ... `layers.N-1`, and `norm` with `lm_head` (kept together:
the head's loss needs the norm's output on the same stage).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ScheduleError, Stage


@dataclass(frozen=True)
class Llm:
    """A decoder-only transformer as torchtitan's llama3-style models build
    it: `layers` blocks of grouped-query attention and a SwiGLU feed-forward
    of width `ffn_hidden`, a token embedding and an output head of `vocab`."""

    name: str
    layers: int
    dim: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    @property
    def layer_params(self) -> int:
        """Parameters of one block: fused qkv, wo, w1/w2/w3 and two norms."""
        kv = self.kv_heads * self.head_dim
        return (self.dim * (self.dim + 2 * kv) + self.dim * self.dim
                + 3 * self.dim * self.ffn_hidden + 2 * self.dim)

    @property
    def params(self) -> int:
        return (self.layers * self.layer_params + 2 * self.vocab * self.dim
                + self.dim)

    def module_names(self) -> list[str]:
        """The chain torchtitan splits, one entry per unit Stagecraft cuts;
        the last unit is "norm,lm_head"."""
        return (["tok_embeddings"]
                + [f"layers.{i}" for i in range(self.layers)]
                + ["norm,lm_head"])


def _ffn_hidden(block) -> int:
    return int(block.feed_forward.w1.out_features)


def from_config(config, name: str = "") -> Llm:
    """The Llm of a torchtitan `Trainer.Config` (its `model_spec.model`)."""
    model = config.model_spec.model
    blocks = getattr(model, "layers", None)
    if not blocks:
        raise ScheduleError(
            f"torchtitan config {name!r}: its model has no `layers` list; "
            "stagecraft.titan plans decoder-only models (llama3, qwen3 and "
            "their like)")
    attention = blocks[0].attention
    heads = int(attention.n_heads)
    kv_heads = int(attention.n_kv_heads or heads)
    if getattr(blocks[0], "moe", None) is not None:
        raise ScheduleError(
            f"torchtitan config {name!r}: mixture-of-experts blocks are not "
            "modelled by stagecraft.titan's costs; give per-module costs "
            "(titan.plan(costs=...)) instead")
    return Llm(name=name, layers=len(blocks), dim=int(model.dim), heads=heads,
               kv_heads=kv_heads, ffn_hidden=_ffn_hidden(blocks[0]),
               vocab=int(model.vocab_size))


def load_config(module: str, config: str, overrides: list[str] | None = None):
    """torchtitan's own `Trainer.Config` for `--module M --config C` and
    any further command-line overrides, parsed by torchtitan's
    ConfigManager (torchtitan must be installed)."""
    try:
        from torchtitan.config import ConfigManager
    except ImportError as error:
        raise ScheduleError(
            "reading a torchtitan config needs torchtitan installed "
            "(pip install torchtitan); without it give the model's shape "
            f"(stagecraft.titan.Llm): {error}") from None
    args = ["--module", module, "--config", config,
            "--training.disable_cuda_graphs"] + list(overrides or [])
    try:
        return ConfigManager().parse_args(args)
    except SystemExit as error:
        raise ScheduleError(
            f"torchtitan refused the config --module {module} --config "
            f"{config} {' '.join(overrides or [])} (exit {error.code})"
        ) from None


@dataclass(frozen=True)
class Hardware:
    """What turns FLOPs and bytes into seconds on one device: the achieved
    matrix throughput, the memory bandwidth, and the device memory the plan
    must stay within. The defaults are an H100 SXM at 40 % of its dense
    bf16 peak (989 TFLOP/s) and its 3.35 TB/s, 80 GB."""

    flops: float = 0.4 * 989e12
    bandwidth: float = 3.35e12
    memory: float = 80e9
    #: Bytes per activation element (bf16 under torchtitan's mixed
    #: precision; 4 when training in float32, as on CPU).
    activation_bytes: int = 2
    #: Bytes of state per parameter: fp32 weights, gradients and Adam's two
    #: moments.
    state_bytes: float = 16.0


def module_costs(model: Llm, seq_len: int, microbatch_size: int,
                 hardware: Hardware = Hardware(),
                 activation_checkpoint: str = "none") -> list[Stage]:
    """One Stage per unit of `model.module_names()`: forward, input- and
    weight-gradient seconds from FLOPs (causal attention counted at half),
    the activation a forward keeps and what its weight gradient still needs
    after I (bytes), the output it sends, and its params' state (bytes).

    `activation_checkpoint` is torchtitan's mode: "none" keeps every
    activation; "full" keeps each block's input and re-runs its forward
    inside the input-gradient step (torch's checkpoint recomputes there).
    Selective checkpointing is not modelled (and cannot run split
    backward schedules in torchtitan).
    """
    if activation_checkpoint not in ("none", "full"):
        raise ScheduleError(
            f"activation checkpointing {activation_checkpoint!r}: "
            "stagecraft.titan models 'none' and 'full'")
    if seq_len < 1 or microbatch_size < 1:
        raise ScheduleError("seq_len and microbatch_size must be >= 1")
    tokens = seq_len * microbatch_size
    ab = hardware.activation_bytes
    hidden = tokens * model.dim * ab
    kv = model.kv_heads * model.head_dim
    linear = model.layer_params - 2 * model.dim
    dense = 2.0 * tokens * linear
    # Causal attention: QK^T and AV over half the positions.
    attention = 2.0 * tokens * seq_len * model.dim
    layer_forward = (dense + attention) / hardware.flops
    # Backward through attention costs about twice its forward.
    layer_input = (dense + 2 * attention) / hardware.flops
    layer_weight = dense / hardware.flops
    # Kept for backward: the block input, both norms' outputs, q/k/v, the
    # attention output, the residual, and the four ffn-wide tensors.
    kept = tokens * (6 * model.dim + 2 * kv + 4 * model.ffn_hidden) * ab
    # What W still needs after I: the linears' inputs and output grads.
    weight_kept = tokens * (6 * model.dim + 2 * kv + 3 * model.ffn_hidden) * ab
    if activation_checkpoint == "full":
        layer_input += layer_forward
        kept = hidden
        weight_kept = min(weight_kept, hidden)
    state = hardware.state_bytes
    units = []
    gather = 2.0 * tokens * model.dim * ab / hardware.bandwidth
    units.append(Stage(forward=gather, backward_input=0.0,
                       backward_weight=gather, activation=hidden,
                       weight_grad=0.0, name="tok_embeddings",
                       params=float(model.vocab * model.dim * state)))
    for i in range(model.layers):
        units.append(Stage(forward=layer_forward, backward_input=layer_input,
                           backward_weight=layer_weight, activation=kept,
                           weight_grad=weight_kept, name=f"layers.{i}",
                           params=float(model.layer_params * state)))
    head = 2.0 * tokens * model.dim * model.vocab / hardware.flops
    # The logits (float32 for the loss) and the norm's input and output.
    logits = tokens * model.vocab * 4 + 2 * hidden
    units.append(Stage(forward=head, backward_input=head, backward_weight=head,
                       activation=float(logits), weight_grad=float(2 * hidden),
                       name="norm,lm_head",
                       params=float((model.vocab + 1) * model.dim * state)))
    for unit in units:
        unit.output = float(hidden)
    return units


__all__ = ["Hardware", "Llm", "from_config", "load_config", "module_costs"]
