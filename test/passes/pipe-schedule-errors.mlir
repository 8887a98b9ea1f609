// RUN: not stagecraft-opt %s --pipe-schedule="kind=2f2b" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not stagecraft-opt %s --pipe-schedule="kind=interleaved-1f1b" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not stagecraft-opt %s --pipe-schedule="kind=interleaved-1f1b chunks=2" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// RUN: not stagecraft-opt %s --pipe-schedule="kind=1f1b" 2>&1 | FileCheck %s --check-prefix=BLOCKS
// RUN: not stagecraft-opt %s --pipe-schedule="kind=gpipe chunks=3" 2>&1 | FileCheck %s --check-prefix=ONLY
// RUN: stagecraft-opt %s --pipe-schedule="kind=gpipe" --pipe-verify-schedule | FileCheck %s --check-prefix=GPIPE

// Tests that every impossible request fails at the pipeline with one clear
// message: an unknown kind, interleaving a stage count that is not a
// multiple of the ranks, non-contiguous pins for 1F1B, chunks on a kind
// without chunks. GPipe runs any placement.
// KIND: pipe-schedule-errors.mlir:[[# @LINE + 6]]:1: error: unknown schedule kind '2f2b'; expected one of: gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zb-v, dualpipev, helix, auto
// DIVIDE: error: cannot schedule pipeline @p as interleaved-1f1b: interleaved placement needs a stage count divisible by the ranks: pipeline @p has 3 stages for 2 ranks
// CHUNKS: error: cannot schedule pipeline @p as interleaved-1f1b: interleaved placement with 2 chunks on 2 ranks needs 4 stages, pipeline @p has 3
// BLOCKS: error: cannot schedule pipeline @p as 1f1b: stages pinned to rank 0 are not contiguous (@s2 follows a stage on rank 1); this kind needs one block of consecutive stages per rank, use interleaved-1f1b or gpipe
// ONLY: error: cannot schedule pipeline @p as gpipe: chunks=3 applies to interleaved-1f1b only, not gpipe
// GPIPE: pipe.rank 0 stages [@s0, @s2]
pipe.pipeline @p ranks(2) microbatches(2) {
  pipe.stage @s0 rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 rank(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
