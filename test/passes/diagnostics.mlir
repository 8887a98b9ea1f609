// RUN: not stagecraft-opt %s --pipe-schedule="kind=zb-v" 2>&1 | FileCheck %s --check-prefix=ONELINE
// RUN: not stagecraft-opt %s --pipe-schedule="kind=2f2b" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not stagecraft-translate --pipe-to-summary %s 2>&1 | FileCheck %s --check-prefix=NOSCHEDULE
// RUN: not stagecraft-opt %s --pipe-schedule="kind=zb-v" --mlir-print-op-on-diagnostic 2>&1 | FileCheck %s --check-prefix=DUMP

// Tests that a pass error is one located line without the generic-form dump
// of the op (unless --mlir-print-op-on-diagnostic asks for it).
// ONELINE: error: cannot schedule pipeline @p as zb-v: V placement needs 2 stages per rank: pipeline @p has 2 stages for 2 ranks (needs 4)
// ONELINE-NOT: see current operation
// ONELINE: note: split the model into twice as many stages as ranks, or use zb-h1 or zb-h2, which take any number of stages from one per rank
// KIND: error: unknown schedule kind '2f2b'; expected one of: gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zb-v, dualpipev, helix, auto
// KIND-NOT: see current operation
// NOSCHEDULE: error: no pipe.schedule in the input; run stagecraft-opt --pipe-schedule first
// NOSCHEDULE-NOT: see current operation
// DUMP: note: see current operation

// Notes say what to do where the error alone does not.
// RUN: not stagecraft-opt %s --pipe-schedule="kind=gpipe memory-limit=1" 2>&1 | FileCheck %s --check-prefix=MEMORY
// MEMORY: error: cannot schedule pipeline @p as gpipe: its peak memory 4 on rank 0 exceeds memory-limit=1
// MEMORY: note: raise memory-limit=, use a kind with a lower peak (1f1b, zb-h1), or kind=auto, which searches under the limit
// RUN: not stagecraft-opt %s --pipe-schedule="kind=interleaved-1f1b chunks=2" 2>&1 | FileCheck %s --check-prefix=CHUNKS
// CHUNKS: error: cannot schedule pipeline @p as interleaved-1f1b: interleaved placement with 2 chunks on 2 ranks needs 4 stages, pipeline @p has 2
// CHUNKS: note: leave chunks= out (stages / ranks), or give the pipeline chunks x ranks stages
// RUN: not stagecraft-opt %s --pipe-schedule="kind=helix" 2>&1 | FileCheck %s --check-prefix=HELIX
// HELIX: note: helix needs attention(forward = ..., backward = ...) on every stage but the last (see examples/helix.mlir)
pipe.pipeline @p ranks(2) microbatches(4) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
