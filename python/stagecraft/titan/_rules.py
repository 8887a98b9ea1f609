"""torchtitan's rules for a pipeline run, as its 0.3 release applies them,
checked before anything launches: which schedule class places stages how,
the microbatch count a CSV must have, and which activation checkpointing a
split backward needs. `check_run` raises ScheduleError with the reason."""

from __future__ import annotations

import csv
import io
import re

from .. import ScheduleError

#: Classes torchtitan places one stage per rank (PipelineScheduleSingle).
SINGLE_STAGE = ("1F1B", "GPipe")
#: Multi-stage classes whose stages sit in V placement (two per rank:
#: rank r holds stages r and 2·pp−1−r); every other multi-stage class
#: places them in a loop (rank r holds r, r + pp, ...).
V_CLASSES = ("ZBVZeroBubble", "DualPipeV")
LOOP_CLASSES = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble")
CLASSES = SINGLE_STAGE + LOOP_CLASSES + V_CLASSES


def class_placement(schedule_class: str, pp: int, stages: int) -> list[int]:
    """The rank of each stage under torchtitan's split for `schedule_class`
    (ScheduleError naming the rule a shape breaks)."""
    if schedule_class not in CLASSES:
        raise ScheduleError(
            f"schedule class {schedule_class!r}: expected one of "
            f"{', '.join(CLASSES)}")
    if stages % pp:
        raise ScheduleError(
            f"{stages} stages on pipeline_parallel_degree {pp}: torchtitan "
            "needs the same number of stages on every rank")
    per_rank = stages // pp
    if schedule_class in SINGLE_STAGE and per_rank != 1:
        raise ScheduleError(
            f"schedule class {schedule_class} places one stage per rank, but "
            f"the plan has {per_rank} per rank: use a multi-stage class "
            f"({', '.join(LOOP_CLASSES + V_CLASSES)})")
    if schedule_class not in SINGLE_STAGE and per_rank < 2:
        raise ScheduleError(
            f"schedule class {schedule_class} is multi-stage and needs at "
            f"least 2 stages per rank; the plan has {per_rank}: use "
            f"{' or '.join(SINGLE_STAGE)}")
    if schedule_class in V_CLASSES:
        if per_rank != 2:
            raise ScheduleError(
                f"schedule class {schedule_class} places stages in a V, two "
                f"per rank; the plan has {per_rank} per rank")
        return [s if s < pp else 2 * pp - 1 - s for s in range(stages)]
    return [s % pp for s in range(stages)]


_CELL = re.compile(r"^(\d+)(F|B|I|W)(\d+)$")
_OVERLAP = re.compile(r"^\((.*)\)OVERLAP_F_B$")


def _cell(cell: str, line: int) -> list[tuple[int, str, int]]:
    """The compute actions of one cell: `<stage><F|B|I|W><microbatch>`, or
    an overlapped forward and backward `(0F3;3B1)OVERLAP_F_B`."""
    overlap = _OVERLAP.match(cell)
    parts = overlap[1].split(";") if overlap else [cell]
    out = []
    for part in parts:
        match = _CELL.match(part.strip())
        if match is None:
            raise ScheduleError(
                f"CSV line {line} (rank {line - 1}): cell {cell!r} is not "
                "a compute action <stage><F|B|I|W><microbatch>; torchtitan "
                "loads compute-only schedules and adds the sends, receives "
                "and gradient reduction itself")
        out.append((int(match[1]), match[2], int(match[3])))
    return out


def read_csv(text: str) -> list[list[tuple[int, str, int]]]:
    """The compute actions of a CSV torchtitan loads, one list per rank
    (ScheduleError on anything else: torchtitan loads compute-only CSVs
    and adds the communication itself)."""
    rows = []
    for line, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        rows.append([a for cell in row if cell.strip()
                     for a in _cell(cell.strip(), line)])
    while rows and not rows[-1]:
        rows.pop()
    return rows


def check_run(*, pp: int, schedule_class: str,
              module_fqns: list[list[str]], local_batch_size: int,
              microbatch_size: int, activation_checkpoint: str,
              csv_text: str | None = None,
              modules: list[str] | None = None) -> None:
    """Raises ScheduleError unless torchtitan can run this pipeline exactly
    as given: stages that cover `modules` (the model's split units in
    order, when given) once each, a class whose placement fits the stage
    count, a microbatch size that divides the batch, and a CSV whose ranks,
    stages, microbatch count and backward split torchtitan accepts."""
    if pp < 1:
        raise ScheduleError(f"pipeline_parallel_degree {pp}: must be >= 1")
    if any(not names for names in module_fqns):
        empty = [i for i, names in enumerate(module_fqns) if not names]
        raise ScheduleError(f"stage {empty[0]} holds no module")
    if modules is not None:
        flat = [n for names in module_fqns for n in names]
        expected = [n for unit in modules for n in unit.split(",")]
        if flat != expected:
            raise ScheduleError(
                "module_fqns_per_model_part must list the model's modules "
                f"once each, in order: expected {expected}, got {flat}")
    placement = class_placement(schedule_class, pp, len(module_fqns))
    if microbatch_size < 1 or local_batch_size % microbatch_size:
        raise ScheduleError(
            f"training.local_batch_size {local_batch_size} is not divisible "
            f"by pipeline_parallel_microbatch_size {microbatch_size}")
    n_microbatches = local_batch_size // microbatch_size
    if activation_checkpoint not in ("none", "full", "selective",
                                     "memory-budget"):
        raise ScheduleError(
            f"activation checkpointing {activation_checkpoint!r}: expected "
            "none, full, selective or memory-budget")
    if csv_text is None:
        return
    rows = read_csv(csv_text)
    if len(rows) != pp:
        raise ScheduleError(
            f"the CSV has {len(rows)} ranks' rows; pipeline_parallel_degree "
            f"is {pp}")
    seen: dict[tuple[int, str], set[int]] = {}
    split = False
    for rank, cells in enumerate(rows):
        for stage, action, mb in cells:
            if stage >= len(module_fqns):
                raise ScheduleError(
                    f"CSV rank {rank}: action {stage}{action}{mb} names "
                    f"stage {stage}; the split has {len(module_fqns)}")
            if placement[stage] != rank:
                raise ScheduleError(
                    f"CSV rank {rank}: action {stage}{action}{mb} runs stage "
                    f"{stage}, which {schedule_class} places on rank "
                    f"{placement[stage]}")
            if mb >= n_microbatches:
                raise ScheduleError(
                    f"CSV rank {rank}: action {stage}{action}{mb} names "
                    f"microbatch {mb}; local_batch_size {local_batch_size} / "
                    f"microbatch size {microbatch_size} gives "
                    f"{n_microbatches}")
            split = split or action in "IW"
            seen.setdefault((stage, action), set()).add(mb)
    count = max((len(v) for v in seen.values()), default=0)
    if count != n_microbatches:
        raise ScheduleError(
            f"the CSV runs {count} microbatches; torchtitan runs "
            f"local_batch_size {local_batch_size} / microbatch size "
            f"{microbatch_size} = {n_microbatches}")
    if split and activation_checkpoint in ("selective", "memory-budget"):
        raise ScheduleError(
            "the CSV splits the backward (I and W actions), which fails "
            f"under {activation_checkpoint} activation checkpointing in "
            "torchtitan: use activation-checkpoint:full or :none")
