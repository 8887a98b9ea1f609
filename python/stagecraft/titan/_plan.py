"""The planner: a split of the model's modules into stages, a schedule and
torchtitan's flags, chosen together within the device memory."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field

from .. import Problem, Schedule, ScheduleError, Stage, partition_layers
from .. import schedule as _schedule
from ._model import Hardware, Llm, module_costs
from ._rules import check_run, class_placement

#: The schedule class the plan names for each placement: with a CSV,
#: torchtitan runs the CSV's order and takes only the placement from it.
PLACEMENT_CLASS = {"single": "1F1B", "loop": "Interleaved1F1B",
                   "v": "ZBVZeroBubble"}


def default_split(units: int, stages: int, input_weight: int = 1,
                  output_weight: int = 1) -> list[int]:
    """torchtitan's own split (its default without module_fqns): the
    embedding counts as `input_weight` layers and the head as
    `output_weight`, the effective layers are dealt out evenly with the
    remainder to the first stages. `units` counts the embedding, the
    blocks and the head; returns the first unit of each stage."""
    layers = units - 2
    effective = layers + input_weight + output_weight
    if stages > effective or effective // stages < max(input_weight,
                                                        output_weight):
        raise ScheduleError(
            f"torchtitan's default split cannot cut {layers} layers into "
            f"{stages} stages")
    if stages == 1:
        return [0, units]
    per, extra = divmod(effective, stages)
    first, layer = [0], 0
    for s in range(stages):
        take = per + (1 if s < extra else 0)
        if s == 0:
            take -= input_weight
        elif s == stages - 1:
            take = layers - layer
        layer += take
        # Unit index: the embedding is unit 0, block i is unit i + 1.
        first.append(layer + 1 if s < stages - 1 else units)
    return first


def placement_of(plan: Schedule) -> str:
    """"single", "loop" or "v": which torchtitan placement the plan's
    stage-to-rank map is (ScheduleError when it is none of them)."""
    ranks, n = plan.num_ranks, len(plan.placement)
    got = list(plan.placement)
    for name in ("single", "loop", "v"):
        try:
            if got == class_placement(PLACEMENT_CLASS[name], ranks, n):
                return name
        except ScheduleError:
            continue
    raise ScheduleError(
        f"the plan places stages on ranks {got}, which no torchtitan "
        "schedule class does (one per rank, a loop, or a V of two)")


@dataclass
class TitanPlan:
    """What torchtitan runs: `schedule` (Stagecraft's, its stages the
    module groups in `module_fqns`), the class that gives the placement,
    the batch shape and the activation checkpointing."""

    schedule: Schedule
    module_fqns: list[list[str]]
    schedule_class: str
    pp: int
    local_batch_size: int
    microbatch_size: int
    seq_len: int
    activation_checkpoint: str
    module: str | None = None
    config: str | None = None
    #: Every candidate weighed: (description, makespan or None, why not).
    candidates: list[tuple[str, float | None, str]] = field(
        default_factory=list)

    @property
    def n_microbatches(self) -> int:
        return self.local_batch_size // self.microbatch_size

    def csv(self) -> str:
        """The compute-only CSV torchtitan loads."""
        return self.schedule.to_csv()

    def check(self) -> None:
        """torchtitan's rules on this plan (`check_run`)."""
        check_run(pp=self.pp, schedule_class=self.schedule_class,
                  module_fqns=self.module_fqns,
                  local_batch_size=self.local_batch_size,
                  microbatch_size=self.microbatch_size,
                  activation_checkpoint=self.activation_checkpoint,
                  csv_text=self.csv())

    def flags(self, csv_path: str) -> list[str]:
        """torchtitan's command-line flags that run exactly this plan."""
        parts = [",".join(names) for names in self.module_fqns]
        return (["--parallelism.pipeline_parallel_degree", str(self.pp),
                 "--parallelism.pipeline_parallel_schedule",
                 self.schedule_class,
                 "--parallelism.pipeline_parallel_schedule_csv", csv_path,
                 "--parallelism.module_fqns_per_model_part", *parts,
                 "--parallelism.pipeline_parallel_microbatch_size",
                 str(self.microbatch_size),
                 "--training.local_batch_size", str(self.local_batch_size),
                 "--training.seq_len", str(self.seq_len),
                 "--training.disable_cuda_graphs",
                 f"activation-checkpoint:{self.activation_checkpoint}"])

    def command(self, csv_path: str, nproc: int | None = None) -> str:
        """The torchrun command line (one node, `nproc` processes,
        default the pipeline degree)."""
        head = ["torchrun", "--nproc_per_node", str(nproc or self.pp),
                "-m", "torchtitan.train"]
        if self.module:
            head += ["--module", self.module]
        if self.config:
            head += ["--config", self.config]
        return shlex.join(head + self.flags(csv_path))

    def summary(self) -> str:
        s = self.schedule
        lines = [
            f"schedule: {s.kind} ({s.choice or s.kind}), class "
            f"{self.schedule_class}, {self.pp} ranks, "
            f"{len(self.module_fqns)} stages, {self.n_microbatches} "
            f"microbatches of {self.microbatch_size}",
            f"activation checkpointing: {self.activation_checkpoint}",
            f"simulated step: {s.makespan:.6g}  bubble: "
            f"{s.bubble_ratio:.3f}  peak memory per rank: "
            + ", ".join(f"{m / 1e9:.3g} GB" for m in s.peak_memory)]
        for i, names in enumerate(self.module_fqns):
            lines.append(f"stage {i} (rank {s.placement[i]}): "
                         + ",".join(names))
        return "\n".join(lines) + "\n"

    def write(self, out_dir: str) -> dict[str, str]:
        """Writes schedule.csv, plan.json (Stagecraft's plan file),
        command.sh (the torchrun line) and summary.txt; returns the paths."""
        os.makedirs(out_dir, exist_ok=True)
        paths = {name: os.path.join(out_dir, name) for name in
                 ("schedule.csv", "plan.json", "command.sh", "summary.txt")}
        csv_path = os.path.abspath(paths["schedule.csv"])
        with open(paths["schedule.csv"], "w") as f:
            f.write(self.csv())
        self.schedule.save(paths["plan.json"])
        with open(paths["command.sh"], "w") as f:
            f.write("#!/bin/sh\n# Stagecraft's plan for torchtitan\n"
                    + self.command(csv_path) + ' "$@"\n')
        with open(paths["summary.txt"], "w") as f:
            f.write(self.summary())
        return paths


def _torch_orders(problem: Problem) -> dict[str, Schedule]:
    try:
        from ..torch import torch_orders
    except ImportError:
        return {}
    return torch_orders(problem)


def _candidates(problem: Problem, kind: str, per_rank: int,
                time_limit: float) -> list[tuple[str, Schedule]]:
    """Stagecraft's schedule of `kind` on `problem` and, for auto,
    torch's built-in orders of the same shape, so that the plan is never
    slower than a class torchtitan has on the same costs. auto chooses
    the placement of `per_rank` stages a rank itself; a kind with chunks
    (interleaved-1f1b) takes `per_rank`."""
    out = []
    chunks = per_rank if kind == "interleaved-1f1b" else 0
    try:
        found = _schedule(problem, kind, chunks=chunks, recompute="none",
                          time_limit=time_limit)
        out.append((f"{kind} ({found.choice or found.kind})", found))
    except ScheduleError as error:
        out.append((kind, error))
    if kind == "auto":
        for name, order in _torch_orders(problem).items():
            out.append((f"torch {name}", order))
    return out


def plan(model: Llm, pp: int, local_batch_size: int, seq_len: int,
         microbatch_size: int = 1, hardware: Hardware = Hardware(),
         kind: str = "auto", activation_checkpoint: str | None = None,
         stages_per_rank: list[int] | None = None, time_limit: float = 2.0,
         units: list[Stage] | None = None, module: str | None = None,
         config: str | None = None) -> TitanPlan:
    """The fastest plan of `model` on `pp` ranks that fits
    `hardware.memory` on every rank: for each activation checkpointing
    mode (none, then full; or the one given), each stages-per-rank count
    (default 1 and 2), the exact split of the modules for the slowest
    stage, then `kind`'s schedule in the placement torchtitan can run
    (with auto, torch's built-in orders compete too). `units` replaces the
    FLOPs model's per-module costs (one Stage per `model.module_names()`
    entry: profiled ones, `profile`), measured under `activation_checkpoint`
    (default none), the one mode then tried. ScheduleError names why when
    nothing fits."""
    if local_batch_size % microbatch_size:
        raise ScheduleError(
            f"training.local_batch_size {local_batch_size} is not divisible "
            f"by pipeline_parallel_microbatch_size {microbatch_size}")
    n_mb = local_batch_size // microbatch_size
    modes = [activation_checkpoint] if activation_checkpoint else \
        ["none"] if units is not None else ["none", "full"]
    counts = stages_per_rank or [1, 2]
    names = model.module_names()
    tried: list[tuple[str, float | None, str]] = []
    best: TitanPlan | None = None
    for mode in modes:
        costs = units if units is not None else module_costs(
            model, seq_len, microbatch_size, hardware, mode)
        if len(costs) != len(names):
            raise ScheduleError(
                f"{len(costs)} module costs for {len(names)} modules "
                f"({names[0]} ... {names[-1]})")
        for per_rank in counts:
            n = pp * per_rank
            label = f"ac={mode} stages/rank={per_rank}"
            if n > len(costs):
                tried.append((label, None, f"{n} stages > {len(costs)} "
                              "modules"))
                continue
            first, stages = partition_layers(costs, n)
            problem = Problem(ranks=pp, microbatches=n_mb, stages=stages,
                              capacity=hardware.memory)
            for what, found in _candidates(problem, kind, per_rank,
                                           time_limit):
                if isinstance(found, ScheduleError):
                    tried.append((f"{label} {what}", None, str(found)))
                    continue
                placement, why = _refusal(found, mode, hardware)
                tried.append((f"{label} {what}", found.makespan, why))
                if why:
                    continue
                if best is None or found.makespan < \
                        best.schedule.makespan * (1 - 1e-9):
                    groups = [names[first[s]:first[s + 1]]
                              for s in range(n)]
                    fqns = [[m for unit in g for m in unit.split(",")]
                            for g in groups]
                    best = TitanPlan(
                        schedule=found, module_fqns=fqns,
                        schedule_class=PLACEMENT_CLASS[placement],
                        pp=pp, local_batch_size=local_batch_size,
                        microbatch_size=microbatch_size, seq_len=seq_len,
                        activation_checkpoint=mode, module=module,
                        config=config)
    if best is None:
        raise ScheduleError(
            "no plan fits: " + "; ".join(f"{d}: {why or 'no'}"
                                         for d, _, why in tried))
    best.candidates = tried
    best.check()
    return best


def _refusal(found: Schedule, mode: str,
             hardware: Hardware) -> tuple[str, str]:
    """(placement, why): `found`'s torchtitan placement, and why torchtitan
    cannot run it under `mode` ("" when it can)."""
    try:
        placement = placement_of(found)
    except ScheduleError as error:
        return "", str(error)
    peak = max(found.peak_memory)
    if peak > hardware.memory * (1 + 1e-9):
        return placement, (f"needs {peak / 1e9:.3g} GB on a rank, above "
                           f"{hardware.memory / 1e9:.3g} GB")
    return placement, ""
