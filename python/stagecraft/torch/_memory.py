"""Measured activation memory of real steps on torch's pipelining runtime
(stagecraft.torch.activation_memory).

While the block is open, autograd's saved-tensor hooks count the bytes of
every tensor saved for a backward, once per storage (views share one), and
release them when autograd drops the last reference: after the backward
that used them, or for a split backward after its W. The stages' own
parameters are not counted. This is what the scheduler calls activation
memory (`Stage.activation`), measured: the CPU allocator keeps no per-rank
peak, and on a GPU the allocator's peak also holds the weights, the
gradients and the optimizer.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .._core import ScheduleError
from ._trace import _stages_of


class _Saved:
    """One tensor saved for backward; its storage's bytes are released
    when the last of these on that storage is dropped."""

    __slots__ = ("tensor", "_owner", "_key")

    def __init__(self, owner: "SavedBytes", key: int, tensor: torch.Tensor):
        self.tensor, self._owner, self._key = tensor, owner, key

    def __del__(self):
        self._owner._release(self._key)


class SavedBytes:
    """While open (`with`), counts the bytes autograd saves for backward,
    once per storage, leaving out the storages of `weights`: `live` is what
    is held now (also after the block closes, as backwards release it),
    `peak` the most held at once."""

    def __init__(self, weights=()):
        self._weights = {p.untyped_storage().data_ptr() for p in weights}
        self._held: dict[int, list] = {}  # storage -> [count, bytes]
        self.live = 0
        self.peak = 0
        self._hooks = None

    def _pack(self, t: torch.Tensor):
        key = t.untyped_storage().data_ptr()
        if key in self._weights or key == 0:
            return t
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = [0, t.untyped_storage().nbytes()]
            self.live += held[1]
            self.peak = max(self.peak, self.live)
        held[0] += 1
        # Detached: a saved output kept with its grad_fn would close a
        # reference cycle through autograd's graph that nothing collects.
        return _Saved(self, key, t.detach())

    @staticmethod
    def _unpack(saved):
        return saved.tensor if isinstance(saved, _Saved) else saved

    def _release(self, key: int) -> None:
        held = self._held.get(key)
        if held is None:
            return
        held[0] -= 1
        if held[0] == 0:
            self.live -= held[1]
            del self._held[key]

    def __enter__(self) -> "SavedBytes":
        self._hooks = torch.autograd.graph.saved_tensors_hooks(
            self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, kind, value, tb) -> None:
        self._hooks.__exit__(kind, value, tb)


class ActivationMemory(SavedBytes):
    """Peak bytes saved for backward on each rank during the block.

    `with stagecraft.torch.activation_memory(runner) as m: runner.step(...)`;
    then `m.peak` is this rank's peak in bytes and `m.peaks` every rank's
    (gathered when the block closes: collective when torch.distributed is
    initialized). `m.live` is what is still held (0 once every backward
    ran)."""

    def __init__(self, runner, group=None):
        stages = _stages_of(runner)
        super().__init__(p for st in stages for p in st.submod.parameters())
        self._group = group or stages[0].group
        self.peaks: list[int] = []

    def __enter__(self) -> "ActivationMemory":
        super().__enter__()
        return self

    def __exit__(self, kind, value, tb) -> None:
        super().__exit__(kind, value, tb)
        if kind is not None:
            return
        self.peaks = [self.peak]
        if dist.is_initialized():
            self.peaks = [None] * dist.get_world_size(self._group)
            dist.all_gather_object(self.peaks, self.peak, group=self._group)
        if not any(self.peaks):
            raise ScheduleError("no tensor was saved for backward while the "
                                "block was open: call the runner's step() "
                                "inside the `with` block")
