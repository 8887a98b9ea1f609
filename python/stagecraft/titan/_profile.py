"""Per-module costs measured on the local device through torchtitan's own
model code: a built decoder's `tok_embeddings`, each block, and `norm` with
`lm_head` and torchtitan's loss, each timed as torch's pipeline runtime
runs a stage (`stagecraft.torch.profile`'s measurement)."""

from __future__ import annotations

import statistics

from .. import ScheduleError, Stage
from ._model import Hardware, Llm, module_costs


def compute_dtype(config):
    """The dtype torchtitan computes in for `config`: its
    `training.mixed_precision_param`. torchtitan 0.3.0 installs FSDP's
    mixed-precision policy even at shard degree 1 (pipelining alone), so
    its parameters compute in that dtype (bf16 by default), whatever
    `training.dtype` says."""
    import torch
    name = config.training.mixed_precision_param
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ScheduleError(f"training.mixed_precision_param {name!r}: not a "
                            "floating-point torch dtype")
    return dtype


def build_model(config):
    """torchtitan's model of `config` (a `Trainer.Config`), built on the CPU
    with its own initialisation, for `profile`: its parameters in the dtype
    torchtitan computes in (`compute_dtype`), as FSDP's policy casts them;
    buffers (the rotary table) stay as built."""
    import torch
    model = config.model_spec.model.build()
    with torch.no_grad():
        model.init_weights(buffer_device=torch.device("cpu"))
        dtype = compute_dtype(config)
        for param in model.parameters():
            param.data = param.data.to(dtype)
    return model


def build_loss(config, model):
    """torchtitan's loss of `config`, as its pipeline's last stage calls it:
    (output, labels) -> the scalar loss. A chunked loss
    (ChunkedLossWrapper) applies `model.lm_head` itself, chunk by chunk, as
    torchtitan sets it up; its `applies_head` attribute then says so."""
    loss = config.loss.build(compile_config=config.compile)
    applies_head = hasattr(loss, "set_lm_head")
    if applies_head:
        loss.set_lm_head(model.lm_head)

    def scalar(pred, labels):
        out = loss(pred, labels)
        return out[0] if isinstance(out, tuple) else out
    scalar.applies_head = applies_head
    return scalar


def profile(model, llm: Llm, seq_len: int, microbatch_size: int,
            hardware: Hardware = Hardware(),
            activation_checkpoint: str = "none", loss_fn=None,
            repeats: int = 5, warmup: int = 2) -> list[Stage]:
    """One Stage per `llm.module_names()` unit of `model` (a torchtitan
    decoder: `tok_embeddings`, `layers`, `norm`, `lm_head`; e.g.
    `build_model(config)`), on one microbatch: F, I and W timed as torch's
    runtime runs a stage (its `stage_backward_input`, then
    `stage_backward_weight`), the fused B, and the activation memory the
    forward saves, medians of `repeats` after `warmup`. The head unit runs
    `loss_fn` (default cross-entropy on the head's logits)
    inside it (`build_loss(config, model)`: a chunked loss applies the
    head itself), as the last stage's backward does. The blocks, of one
    shape, each get the median over all of them. Times in seconds, memory
    in bytes; params' state from `hardware` (the bytes model). Under full
    activation checkpointing a block keeps its input and its I re-runs its
    forward.

    The model runs as it is: on a CPU, torchtitan's FlexAttention has no
    backward, and the caller supplies attention that has (the tests'
    harness, python/tests/titan_cpu.py, does)."""
    import torch
    import torch.nn.functional as F
    from ..torch._profile import _profile_stage
    blocks = list(model.layers.values())
    if len(blocks) != llm.layers:
        raise ScheduleError(f"the model has {len(blocks)} blocks; the shape "
                            f"says {llm.layers}")
    device = next(model.parameters()).device
    tokens = torch.randint(0, llm.vocab, (microbatch_size, seq_len),
                           device=device)
    labels = torch.randint(0, llm.vocab, (microbatch_size, seq_len),
                           device=device)
    positions = torch.arange(seq_len, device=device).repeat(
        microbatch_size, 1)
    masks = model.get_attention_masks(positions=positions) \
        if hasattr(model, "get_attention_masks") else None
    if loss_fn is None:
        def loss_fn(pred, target):
            return F.cross_entropy(pred.flatten(0, 1).float(),
                                   target.flatten())

    class _Block(torch.nn.Module):
        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def forward(self, h):
            return self.layer(h, masks, positions)

    class _Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.lm_head = model.norm, model.lm_head

        def forward(self, h):
            h = self.norm(h)
            if not getattr(loss_fn, "applies_head", False):
                h = self.lm_head(h)
            return loss_fn(h, labels)

    with torch.no_grad():
        hidden = model.tok_embeddings(tokens)
    measured = [_profile_stage(0, model.tok_embeddings, (tokens,), warmup,
                               repeats)[0]]
    for i, layer in enumerate(blocks):
        measured.append(_profile_stage(i + 1, _Block(layer), (hidden,),
                                       warmup, repeats)[0])
    measured.append(_profile_stage(len(blocks) + 1, _Head(), (hidden,),
                                   warmup, repeats)[0])
    model.zero_grad(set_to_none=True)
    inner = measured[1:-1]

    def block_median(field):
        return statistics.median(getattr(s, field) for s in inner)
    shared = {f: block_median(f) for f in
              ("forward", "backward_input", "backward_weight",
               "fused_backward", "activation", "weight_grad")}
    shape = module_costs(llm, seq_len, microbatch_size, hardware, "none")
    out = []
    for i, (m, unit) in enumerate(zip(measured, shape)):
        got = shared if 0 < i < len(measured) - 1 else {
            f: getattr(m, f) for f in shared}
        s = Stage(forward=got["forward"] / 1e3,
                  backward_input=got["backward_input"] / 1e3,
                  backward_weight=got["backward_weight"] / 1e3,
                  fused_backward=got["fused_backward"] / 1e3,
                  activation=got["activation"] * 2**20,
                  weight_grad=got["weight_grad"] * 2**20,
                  name=unit.name, params=unit.params)
        s.output = unit.output
        out.append(s)
    if activation_checkpoint == "full":
        kept = float(seq_len * microbatch_size * llm.dim
                     * hardware.activation_bytes)
        for s in out[1:-1]:
            s.backward_input += s.forward
            s.fused_backward += s.forward
            s.activation, s.weight_grad = kept, min(s.weight_grad, kept)
    elif activation_checkpoint != "none":
        raise ScheduleError(
            f"activation checkpointing {activation_checkpoint!r}: "
            "stagecraft.titan models 'none' and 'full'")
    return out
