//===- Passes.td - pipe dialect passes ---------------------*- tablegen -*-===//
//
// Declarations of the passes over `pipe` IR. Each delegates its algorithm to
// the scheduler library and only translates IR and diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_PASSES_PASSES_TD
#define STAGECRAFT_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def PipePartitionPass : Pass<"pipe-partition", "mlir::ModuleOp"> {
  let summary = "Cut every layer pipeline into contiguous stages";
  let description = [{
    For each `pipe.pipeline` that holds `pipe.layer` ops, replaces the
    layers (each `count(N)` as N layers, in model order) with `pipe.stage`
    ops `@s0`, `@s1`, ... of contiguous layers: costs, memory and `params`
    summed, `layers(N)` their layer count, and `layer_range = array<i64: a,
    b>` the layers [a, b) they hold. Every existing kind and tool then works
    on the result.

    `stages=S` (default `auto`: one stage per rank) chooses the count.
    `placement` says which rank each stage will run on, for the balance:
    `contiguous` (default; blocks of stages per rank, as gpipe, 1f1b,
    zb-h1 and zb-h2 place them), `loop` (stage s on rank s mod ranks, as
    interleaved-1f1b) or `v` (two stages per rank in a V, as zb-v and
    dualpipev); `stagecraft-run` passes the one of its `--schedule`. The cut minimizes the slowest stage's (F + I + W) / speed of
    its rank's device, exactly (dynamic programming over cut points), with
    every stage within its share of its rank's capacity (the device's
    memory, else `capacity`; split evenly among the rank's stages): its
    `params` plus min(microbatches, ranks - rank) forwards' activations,
    1F1B's in-flight bound. When no cut fits that, it is tried again with
    one forward's activation per stage (recomputation, planned by
    `--pipe-schedule`, must then make the rest fit) and a remark says so;
    when nothing fits even then, the error names the stage, its rank and
    what the smallest slice it can hold needs.
  }];
  let options = [
    Option<"stages", "stages", "std::string", /*default=*/"\"auto\"",
           "stages to cut each layer pipeline into: a number, or auto "
           "(default: one stage per rank)">,
    Option<"placement", "placement", "std::string", /*default=*/"\"contiguous\"",
           "where the stages will run, for the balance: contiguous, loop or "
           "v (default contiguous)">,
  ];
}

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
    - `zb-h1`, `zb-h2`: zero-bubble schedules with the backward split into
      I and W (Qi et al., ICLR 2024): 1F1B's order of F and I with W filling
      the idle time; zb-h1 within 1F1B's highest peak memory, zb-h2 with up
      to 2p - 1 microbatches in flight.
    - `zb-v`: V placement (rank r hosts stages r and 2p - 1 - r), split
      backward, within 1F1B's highest peak for the same model.
    - `auto`: searches placements and orders for the smallest simulated
      makespan within `memory-limit` on every rank (default: the highest
      1F1B peak), in at most `time-limit` seconds; prints a progress line on
      stderr when it runs longer than a second. Never worse than the fixed
      kinds that fit the limit. Sets `auto_choice` and `lower_bound`. On a
      pipeline of `pipe.layer` ops, auto also chooses the cut into stages,
      the stages per rank and the device order (docs/dsl.md) and rewrites
      the pipeline into the chosen stages; every other kind needs
      `--pipe-partition` first.
    - `exact`: for small problems (a few hundred actions), auto's search
      for a quarter of `time-limit`, then a branch-and-bound over the
      per-rank orders on every placement auto searches, within
      `memory-limit` (default: the highest 1F1B peak) and the rest of
      `time-limit`. `auto_choice` says whether the schedule is proven
      optimal over those placements or only the best found in time. At
      most 4096 actions; no recomputation, graphs, lengths or links.
    - `helix`: HelixPipe (attention-parallel). Stage j is parameter block j
      on rank j mod p and every stage but the last declares the core
      attention that follows it (`attention(...)`); microbatch offset d of a
      group of p runs that attention on rank (j mod p + d + 1) mod p, so a
      layer's p attentions run on p ranks at once. `folds` groups interleave
      layer by layer; all forwards, then the backwards in reverse order;
      its `full` recomputation re-runs each block's forward (never the
      attention) before its backward.

    `recompute` chooses which forwards drop their activation and re-derive
    it in the backward (`recompute full|selective` on the `pipe.forward`):
    `none`, `full` (the stage's `recomputed` memory kept, the forward
    re-run), `selective` (the stage's `selective` memory kept, its selective
    cost re-run; stages without it keep everything) or `auto`: per (stage,
    microbatch), the forwards in flight longest at each rank's peak
    recompute, at the level that saves memory most cheaply, until every
    rank fits the pipeline's `capacity(X)`; a uniform `full` or `selective`
    wins when faster. With `kind=auto` and a capacity, kind and
    recomputation are searched together. A plan that cannot fit is an error
    at the pipeline naming the rank, its peak and its capacity.

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
    On a pipeline with `data_parallel(...)` (docs/data-parallel.md), the
    schedule also gets `dp_placement`: where its gradient reductions are
    released. A fixed kind takes `reduce` (`torch`, the default: a stage's
    whole gradient after its last backward; or `bucketed`: buckets of
    `bucket` bytes, default Megatron's 80 MB, released as the last gradient
    action runs through them). `auto` minimizes the step *including* the
    exposed data-parallel communication: over every kind within the memory
    limit and its own schedule, each also with its W run right after its I,
    with torch's rule and with buckets of Megatron's size and of 1/2 to 1/16
    of the largest stage's gradient; `auto_choice` names the schedule and
    the placement, `dp_bound` the step's lower bound.

    Fails, at the pipeline, for an unknown kind or a pipeline the kind cannot
    place.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"1f1b\"",
           "Schedule kind: gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, "
           "zb-v, dualpipev, helix, auto, exact, ilp or policy-search "
           "(default 1f1b). auto also tries the library's policies and "
           "the module's pipe.policy ops, each with its parameters "
           "searched; policy-search searches only policy= (or "
           "policy-file=)">,
    Option<"chunks", "chunks", "int", /*default=*/"0",
           "Stages per rank for interleaved-1f1b (default 0: stages / "
           "ranks)">,
    Option<"memoryLimit", "memory-limit", "double", /*default=*/"0.0",
           "Per-rank memory limit (default 0: the highest 1F1B peak, for "
           "auto; no limit for the fixed kinds). A fixed kind whose peak "
           "exceeds a given limit fails">,
    Option<"timeLimit", "time-limit", "double", /*default=*/"10.0",
           "Seconds the auto, exact or ilp search may take (default 10)">,
    Option<"folds", "folds", "int", /*default=*/"2",
           "helix: groups of ranks microbatches interleaved layer by layer "
           "(default 2)">,
    Option<"recompute", "recompute", "std::string", /*default=*/"\"\"",
           "Recomputation: none, full, selective or auto (per stage and "
           "microbatch, the cheapest mix that fits the pipeline's "
           "capacity). Default: auto with a capacity(X), else none (helix: "
           "full)">,
    Option<"objective", "objective", "std::string", /*default=*/"\"makespan\"",
           "What auto and the zero-bubble kinds minimize: makespan (one "
           "step between barriers, as torch's runtime runs; the default) or "
           "span (the largest per-rank span: the steady-state step when "
           "steps overlap). kind=exact and kind=ilp honour both">,
    Option<"maxActions", "max-actions", "int64_t", /*default=*/"16777216",
           "Refuse pipelines needing more actions (stages x microbatches x "
           "3) than this: each costs about 200 bytes of IR, so the default "
           "(2^24) stays near 3 GB">,
    Option<"policyFile", "policy-file", "std::string", /*default=*/"\"\"",
           "A policy file (docs/policies.md): schedule every pipeline by "
           "the policy it holds instead of a kind (the schedule's kind is "
           "policy, its auto_choice the policy's name and parameter "
           "values). Errors in the file or at instantiation are reported at "
           "the pipeline, naming the file's line or the point">,
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "A pipe.policy op of the module, as @NAME: schedule every "
           "pipeline by it instead of a kind (as policy-file=). Errors at "
           "instantiation are reported at the policy op, naming the point, "
           "the rank and what its actions wait for">,
    Option<"reduce", "reduce", "std::string", /*default=*/"\"torch\"",
           "On a pipeline with data_parallel(...), a fixed kind's gradient "
           "reductions: torch (a stage's whole gradient after its last "
           "backward; the default) or bucketed (Megatron's "
           "--overlap-grad-reduce). auto chooses">,
    Option<"bucket", "bucket", "double", /*default=*/"80e6",
           "Bytes a bucket for reduce=bucketed (default 80e6: Megatron's 40 "
           "M elements of 2 bytes)">,
    Option<"params", "params", "std::string", /*default=*/"\"\"",
           "With policy-file or policy: parameter values, NAME:VALUE "
           "separated by commas (e.g. params=offset:2); the others take "
           "their defaults. With kind=policy-search: the ones held fixed">,
  ];
}

def PipeVerifyPolicyPass : Pass<"pipe-verify-policy", "mlir::ModuleOp"> {
  let summary = "Verify pipe.policy ops over a family of pipelines";
  let description = [{
    Instantiates each `pipe.policy` (or only `policy=@NAME`) at every point
    of a family: `ranks=LO..HI`, `microbatches=LO..HI`, `chunks=LO..HI`
    (ranks x chunks stages each), and verifies every schedule: its
    dependencies, deadlock freedom of its order and of its lowered
    communication, and the policy's cap on in-flight activations. The
    stages take the costs and memory of `pipeline=@NAME`'s first stage and
    its latency (default: forward 1, backward input 1, backward weight 1,
    activation 1, no latency). Points outside the policy's `requires` are
    skipped and counted. Success is a remark at the policy, "holds on N
    points (S outside its requires, skipped)"; the first failing point is
    an error at the policy naming the point and the reason.

    ```mlir
    // stagecraft-opt --pipe-verify-policy="ranks=2..16 microbatches=1..64" f.mlir
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"\"",
           "The policy to verify, as @NAME (default: every pipe.policy)">,
    Option<"ranks", "ranks", "std::string", /*default=*/"\"2..8\"",
           "Ranks, LO..HI (or one number)">,
    Option<"microbatches", "microbatches", "std::string",
           /*default=*/"\"1..32\"",
           "Microbatches, LO..HI (or one number)">,
    Option<"chunks", "chunks", "std::string", /*default=*/"\"1\"",
           "Stages per rank, LO..HI (or one number)">,
    Option<"pipeline", "pipeline", "std::string", /*default=*/"\"\"",
           "A pipeline whose first stage's costs and memory, and latency, "
           "every stage of the family takes">,
    Option<"params", "params", "std::string", /*default=*/"\"\"",
           "Parameter values, NAME:VALUE separated by commas">,
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

    A schedule that spells out its communication (`--pipe-insert-comm`, or
    by hand) is also checked as a program: each input received before its
    compute and each output sent after it, exactly once; transfers between
    two ranks matched in issue order (as NCCL and MPI without tags) carrying
    the same message; and no hang, where a lone send is asynchronous, a lone
    receive blocks until matched and a `pipe.group` blocks until all its
    transfers are matched. A hang is reported with the ranks, the transfers
    they wait at, and the cycle of waits.
  }];
}

def PipeInsertCommPass : Pass<"pipe-insert-comm", "mlir::ModuleOp"> {
  let summary = "Make every cross-rank transfer of a schedule explicit";
  let description = [{
    For each `pipe.schedule` without transfers, inserts a send where each
    cross-rank activation or gradient is produced and a receive where it is
    first needed: `pipe.send_activation`/`pipe.recv_activation` forward,
    `pipe.send_gradient`/`pipe.recv_gradient` backward. Stages on the same
    rank exchange nothing. Sends on a channel follow the order the receiver
    consumes (a send waits until the messages due before it are out), so
    in-order matching pairs them. The transfers between two actions go in one
    `pipe.group` when they include both a send and a receive; if that could
    hang, they stay separate. The result is verified.

    Before:
    ```mlir
    pipe.rank 0 stages [@s0] {
      pipe.forward @s0 mb 0
      pipe.forward @s0 mb 1
      pipe.backward @s0 mb 0
    ```
    After:
    ```mlir
    pipe.rank 0 stages [@s0] {
      pipe.forward @s0 mb 0
      pipe.send_activation @s0 mb 0 to 1
      pipe.forward @s0 mb 1
      pipe.group {
        pipe.send_activation @s0 mb 1 to 1
        pipe.recv_gradient @s1 mb 0 from 1
      }
      pipe.backward @s0 mb 0
    ```
  }];
}

def PipePlanBuffersPass : Pass<"pipe-plan-buffers", "mlir::ModuleOp"> {
  let summary = "Assign every buffer of a schedule to a slot by liveness";
  let description = [{
    Builds each schedule's buffers (stashed activations, split by what I and
    W release; outgoing and incoming activations and gradients), assigns them
    to slots per rank by liveness (the slot count equals the most buffers
    live at once) and records per rank `buffer_slots`, `buffer_bytes` and
    `naive_buffer_bytes` (one buffer per microbatch and kind) as attributes.
    Sizes are the stage's memory figures times `unit-bytes`.
  }];
  let options = [
    Option<"unitBytes", "unit-bytes", "int64_t", /*default=*/"4096",
           "Bytes per memory unit of the spec (default 4096)">,
  ];
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
    On a pipeline with `data_parallel(...)`, also, with the reductions
    released where `dp_placement` says (docs/data-parallel.md):
    - `dp_step`: every rank's optimizer step done;
    - `dp_exposed`: per rank, the time its collectives add past the
      pipeline's last compute (plus the delay of a late weight gather);
    - `dp_bound`: a lower bound on `dp_step`.

    ```mlir
    pipe.schedule @demo_1f1b for @demo attributes {bubble_ratio = 2.5e-01 : f64, kind = "1f1b", makespan = 1.2e+01 : f64, peak_memory = array<f64: 2.0, 1.0>} { ... }
    ```
    Fails like `--pipe-verify-schedule` on a schedule that cannot run.
  }];
}

#endif // STAGECRAFT_PASSES_PASSES_TD
