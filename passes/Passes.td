//===- Passes.td - pipe dialect passes ---------------------*- tablegen -*-===//
//
// Declarations of the passes over `pipe` IR. Each delegates its algorithm to
// the scheduler library and only translates IR and diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_PASSES_PASSES_TD
#define STAGECRAFT_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def PipeSchedulePass : Pass<"pipe-schedule", "mlir::ModuleOp"> {
  let summary = "Generate a per-rank schedule for every pipe.pipeline";
  let description = [{
    For each `pipe.pipeline` in the module, places its stages on ranks and
    orders every rank's actions according to `kind`, then adds a
    `pipe.schedule @<pipeline>_<kind> for @<pipeline>` right after the
    pipeline (a numeric suffix keeps the name unique). The spec stays as it
    is. Every kind works for any ranks >= 1 and microbatches >= 1.

    Kinds:
    - `gpipe`: all forwards, then all backwards. Any placement.
    - `1f1b`: warm-up forwards, then one forward and one backward in turn;
      at most min(ranks, microbatches) activations in flight on rank 0.
    - `interleaved-1f1b`: Megatron-LM's interleaved schedule with `chunks`
      stages per rank, stage s on rank s mod ranks; any microbatch count.

    Without pins, `gpipe` and `1f1b` place contiguous blocks of stages, one
    block per rank; `interleaved-1f1b` needs `ranks x chunks` stages.

    Before:
    ```mlir
    pipe.pipeline @demo ranks(2) microbatches(2) { ... }
    ```
    After `--pipe-schedule="kind=1f1b"`:
    ```mlir
    pipe.pipeline @demo ranks(2) microbatches(2) { ... }
    pipe.schedule @demo_1f1b for @demo attributes {kind = "1f1b"} {
      pipe.rank 0 stages [@s0] {
        pipe.forward @s0 mb 0
        pipe.forward @s0 mb 1
        pipe.backward @s0 mb 0
        pipe.backward @s0 mb 1
      }
      pipe.rank 1 stages [@s1] { ... }
    }
    ```
    Fails, at the pipeline, for an unknown kind or a pipeline the kind cannot
    place.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"1f1b\"",
           "Schedule kind: gpipe, 1f1b or interleaved-1f1b">,
    Option<"chunks", "chunks", "int", /*default=*/"0",
           "Stages per rank for interleaved-1f1b (0: stages / ranks)">,
  ];
}

def PipeVerifySchedulePass
    : Pass<"pipe-verify-schedule", "mlir::ModuleOp"> {
  let summary = "Check that every pipe.schedule can run without deadlock";
  let description = [{
    The op verifier already checks placement and coverage. This pass also
    checks that the per-rank orders admit an execution satisfying every
    dependency (F after the previous stage's F, I/B after the stage's F and
    the next stage's I/B, W after I). When none exists it reports, for each
    stuck rank, the action it is stuck on and the action, rank and position
    it waits for, as notes at the stuck actions. The IR is not changed.
  }];
}

def PipeSimulatePass : Pass<"pipe-simulate", "mlir::ModuleOp"> {
  let summary = "Simulate every pipe.schedule and record its figures";
  let description = [{
    Runs each `pipe.schedule` through the event simulator (each rank runs its
    actions one at a time in order; a transfer between ranks adds the
    pipeline's latency) and sets on the op:
    - `makespan`: end of the last action;
    - `bubble_ratio`: 1 - (sum of busy time) / (ranks x makespan);
    - `peak_memory`: per rank, the largest live activation memory.

    ```mlir
    pipe.schedule @demo_1f1b for @demo attributes {bubble_ratio = 2.5e-01 : f64, kind = "1f1b", makespan = 1.2e+01 : f64, peak_memory = array<f64: 2.0, 1.0>} { ... }
    ```
    Fails like `--pipe-verify-schedule` on a schedule that cannot run.
  }];
}

#endif // STAGECRAFT_PASSES_PASSES_TD
