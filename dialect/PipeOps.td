//===- PipeOps.td - pipe dialect operations ----------------*- tablegen -*-===//
//
// Ops of the pipe dialect: the pipeline spec (`pipe.pipeline`, `pipe.stage`)
// and schedules (`pipe.schedule`, `pipe.rank`, and the four actions).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_DIALECT_PIPEOPS_TD
#define STAGECRAFT_DIALECT_PIPEOPS_TD

include "dialect/PipeDialect.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"

//===----------------------------------------------------------------------===//
// Spec
//===----------------------------------------------------------------------===//

def Pipe_PipelineOp : Pipe_Op<"pipeline", [
    Symbol, SymbolTable, NoTerminator, SingleBlock, IsolatedFromAbove]> {
  let summary = "A pipeline: stages in chain order on ranks, for microbatches";
  let description = [{
    The problem a schedule solves. Stages chain in the order they are
    written. `latency(X)` is the delay of a transfer between two ranks
    (default 0). `capacity(X)` is every rank's memory capacity, in the unit
    of the stages' memory: a rank's peak (the `params` of its stages plus
    its live activations) must stay within it, recomputing where needed.

    `data_parallel(degree = N, sharding = none|full|hybrid, shard_group = G,
    latency = L, bandwidth = B, inter_latency = L2, inter_bandwidth = B2,
    optimizer = T)` puts the pipeline inside data parallelism
    (docs/data-parallel.md): N replicas; DDP (`none`, the default) reduces
    each stage's gradient across them, `full` (FSDP / ZeRO-3) also gathers
    its weights before the first forward and reduce-scatters the gradient,
    `hybrid` shards within groups of G replicas and all-reduces across the
    groups over the inter link. L is the time of one ring step, B bytes per
    time unit (defaults 0 and 1; inter_* default to them), T the optimizer's
    time per gradient byte a rank updates (default 0). Every stage then
    gives `gradient(X)`: the bytes of its gradient (and of its weights).

    ```mlir
    pipe.pipeline @demo ranks(2) microbatches(4) latency(0.1) {
      pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
      pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 1.0)
    }
    ```
  }];
  // Counts are confined by ODS; the custom parser keeps the keyword syntax
  // `ranks(N)` and prints costs in their shortest exact form.
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    ConfinedAttr<I64Attr, [IntMinValue<1>]>:$ranks,
    ConfinedAttr<I64Attr, [IntMinValue<1>]>:$microbatches,
    DefaultValuedAttr<F64Attr, "0.0">:$latency,
    OptionalAttr<F64Attr>:$capacity,
    OptionalAttr<FlatSymbolRefArrayAttr>:$devices,
    OptionalAttr<I64Attr>:$links_node,
    OptionalAttr<F64Attr>:$intra_latency,
    OptionalAttr<F64Attr>:$intra_bandwidth,
    OptionalAttr<F64Attr>:$inter_latency,
    OptionalAttr<F64Attr>:$inter_bandwidth,
    OptionalAttr<DenseF64ArrayAttr>:$lengths,
    OptionalAttr<F64Attr>:$reference_length,
    OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$dp_degree,
    OptionalAttr<StrAttr>:$dp_sharding,
    OptionalAttr<I64Attr>:$dp_shard_group,
    OptionalAttr<F64Attr>:$dp_latency,
    OptionalAttr<F64Attr>:$dp_bandwidth,
    OptionalAttr<F64Attr>:$dp_inter_latency,
    OptionalAttr<F64Attr>:$dp_inter_bandwidth,
    OptionalAttr<F64Attr>:$dp_optimizer
  );
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  // Stage placement rules need the stages, which are verified first.
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The stages in chain order.
    auto getStages() { return getBody().front().getOps<StageOp>(); }
    /// The layers in model order (a layer pipeline, before partitioning).
    auto getLayers() { return getBody().front().getOps<LayerOp>(); }
    /// The device kinds declared in the pipeline.
    auto getDeviceKinds() { return getBody().front().getOps<DeviceOp>(); }
    /// Whether the pipeline holds pipe.layer ops (to be cut into stages by
    /// --pipe-partition) rather than stages.
    bool isLayerPipeline() { return !getLayers().empty(); }
    /// The stages' inputs(...): known, earlier, once each; every stage
    /// reaches the last.
    ::mlir::LogicalResult verifyStageGraph();
    /// data_parallel(...): a degree with every entry; a known sharding; a
    /// shard group only with hybrid, dividing the degree; finite values,
    /// bandwidths positive.
    ::mlir::LogicalResult verifyDataParallel();
    /// Whether the pipeline runs inside data parallelism.
    bool hasDataParallel() { return static_cast<bool>(getDpDegreeAttr()); }
    /// data_parallel(...)'s numeric entries as written, by keyword (unset
    /// ones null).
    ::llvm::SmallVector<std::pair<::llvm::StringRef, ::mlir::FloatAttr>, 5>
    dataParallelNumbers() {
      return {{"latency", getDpLatencyAttr()},
              {"bandwidth", getDpBandwidthAttr()},
              {"inter_latency", getDpInterLatencyAttr()},
              {"inter_bandwidth", getDpInterBandwidthAttr()},
              {"optimizer", getDpOptimizerAttr()}};
    }
  }];
}

def Pipe_PolicyOp : Pipe_Op<"policy", [Symbol]> {
  let summary = "A schedule family users write, for any ranks and microbatches";
  let description = [{
    A policy (docs/policies.md): one statement a string, in the text form
    of a policy file without its `policy NAME` line (the symbol names it).
    `--pipe-schedule="policy=@name"` instantiates it for each pipeline;
    `--pipe-verify-policy` verifies it over a family of pipelines. The
    statements are parsed with the op: a malformed one is an error at its
    column.

    ```mlir
    pipe.policy @one_f_one_b {
      "placement loop"
      "warmup ranks - rank - 1"
      "steady F B"
      "requires chunks == 1"
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    StrArrayAttr:$statements
  );
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The policy file's text: `policy NAME`, then one statement a line
    /// (statement k on line k + 1).
    std::string getText();
  }];
}

def Pipe_DeviceOp : Pipe_Op<"device", [Symbol, HasParent<"PipelineOp">]> {
  let summary = "A kind of device the pipeline's ranks run on";
  let description = [{
    `speed(X)` (default 1): an action on a rank of this device takes its
    cost / X. `memory(X)` (optional): the rank's memory capacity, in the
    unit of the stages' memory (absent: the pipeline's `capacity`, if
    any). The pipeline's `devices(@a x 4, @b x 4)` assigns devices to its
    ranks in order.

    ```mlir
    pipe.device @a100 speed(0.5) memory(40.0)
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    DefaultValuedAttr<F64Attr, "1.0">:$speed,
    OptionalAttr<F64Attr>:$memory
  );
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Pipe_LayerOp : Pipe_Op<"layer", [Symbol, HasParent<"PipelineOp">]> {
  let summary = "Layers of the model, before it is cut into stages";
  let description = [{
    A pipeline holds either `pipe.stage` ops or `pipe.layer` ops, in model
    order. `count(N)` (default 1) repeats the layer N times. Costs and
    memory mean what they mean on a stage, per layer; `params(X)` is one
    layer's weight, gradient and optimizer memory; `output(X)` the size of
    the activation it sends to the next layer; `gradient(X)` the bytes of
    its gradient (needed inside `data_parallel(...)`: a stage's gradient is
    its layers' sum). `--pipe-partition` cuts the layers into stages; each
    layer is one transformer layer when training with the reference model.

    ```mlir
    pipe.layer @block count(30) cost(forward = 1.0, backward_input = 1.0, backward_weight = 0.8) memory(activation = 1.0) params(0.5) output(1.0)
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    DefaultValuedAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>, "1">:$count,
    F64Attr:$forward,
    F64Attr:$backward_input,
    F64Attr:$backward_weight,
    F64Attr:$activation,
    F64Attr:$weight_grad,
    OptionalAttr<F64Attr>:$params,
    OptionalAttr<F64Attr>:$output,
    OptionalAttr<F64Attr>:$gradient
  );
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def Pipe_StageOp : Pipe_Op<"stage", [Symbol, HasParent<"PipelineOp">]> {
  let summary = "One contiguous slice of the model";
  let description = [{
    Costs of the stage's actions, in abstract time units, and its memory:
    `activation` is allocated by a forward and held until the backward ends;
    `weight_grad` (at most `activation`, default `activation`) is the part
    still held after the input gradient, until the weight gradient. Memory
    defaults to `activation = 1.0`; `recomputed` (at most `activation`) is
    what a forward keeps when the schedule recomputes it in full (absent:
    the whole activation, so nothing is saved). Selective recomputation is
    offered where `memory(selective = S)` and `cost(selective = C)` are both
    given: the forward keeps S and the backward first re-runs C (Megatron's
    selective recomputation of the attention core). `params(X)` is static
    memory resident on the rank hosting the stage (weights, gradients,
    optimizer state). `rank(K)` pins the stage to rank K. The
    optional cost entry `forward_backward` is the cost of this stage's
    forward overlapped with a full backward (default F + B: no gain).
    `layers(N)` gives the stage's transformer layers, for training with the
    reference model (`stagecraft-run --train`). `attention(forward = X,
    backward = Y, memory = Z)` declares the core attention that follows the
    stage as a separate task (HelixPipe's cut at the attention boundary):
    its costs and the memory it keeps from forward to backward (default 0).
    `scaling(linear = a, quadratic = b)` (default a = 1, b = 0): with the
    pipeline's `lengths(...)`, microbatch m's costs are the given ones times
    (a l_m + b l_m^2) / (a l0 + b l0^2), l0 the reference length; its
    memory and output scale by l_m / l0. `inputs(@a, @b)` (a branching
    pipeline) names the stages whose outputs this one takes, each written
    before it: F waits for F of every input, and the stage's backward
    sends the gradient of all its inputs back; `inputs()` makes a source
    (it reads the data). Without it, a stage takes the previous stage's
    output. Every stage must feed, through its consumers, the last stage
    (the loss). `gradient(X)` is the bytes of the stage's gradient, which
    the pipeline's `data_parallel(...)` reduces across its replicas.

    ```mlir
    pipe.stage @s0 rank(0) cost(forward = 1.0, backward_input = 1.2, backward_weight = 0.8) memory(activation = 1.0, weight_grad = 0.5)
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    OptionalAttr<FlatSymbolRefArrayAttr>:$inputs,
    OptionalAttr<I64Attr>:$rank,
    OptionalAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>>:$layers,
    F64Attr:$forward,
    F64Attr:$backward_input,
    F64Attr:$backward_weight,
    OptionalAttr<F64Attr>:$forward_backward,
    F64Attr:$activation,
    F64Attr:$weight_grad,
    OptionalAttr<F64Attr>:$recomputed,
    OptionalAttr<F64Attr>:$selective,
    OptionalAttr<F64Attr>:$selective_cost,
    OptionalAttr<F64Attr>:$params,
    OptionalAttr<F64Attr>:$output,
    OptionalAttr<F64Attr>:$scaling_linear,
    OptionalAttr<F64Attr>:$scaling_quadratic,
    OptionalAttr<F64Attr>:$attention_forward,
    OptionalAttr<F64Attr>:$attention_backward,
    OptionalAttr<F64Attr>:$attention_memory,
    OptionalAttr<F64Attr>:$gradient
  );
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Schedule
//===----------------------------------------------------------------------===//

def Pipe_ScheduleOp : Pipe_Op<"schedule", [
    Symbol, NoTerminator, SingleBlock, IsolatedFromAbove,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Per-rank ordered actions for a pipeline";
  let description = [{
    One `pipe.rank` per rank of `@pipeline`, each listing the stages it hosts
    and its actions in run order. The verifier checks placement and coverage:
    every action on the rank hosting its stage, and for every (stage,
    microbatch) one `pipe.forward` and either one `pipe.backward` or one
    `pipe.backward_input` and one `pipe.backward_weight`. That the order can
    run (no deadlock) is checked by `--pipe-verify-schedule`.

    `--pipe-simulate` records `makespan`, `bubble_ratio`, `peak_memory`
    (one entry per rank) and `span` (the largest per-rank span, first action
    start to last action end on one rank: the figure the zero-bubble papers
    quote) as attributes. On a pipeline with `data_parallel(...)`,
    `dp_placement` says where its gradient reductions are released
    (`torch`: a stage's whole gradient after its last backward, the
    default; `bucketed`: in buckets of `dp_bucket` bytes as the last
    gradient action runs through them), and `--pipe-simulate` also records
    `dp_step` (every rank's optimizer step done), `dp_exposed` (per rank,
    the time its collectives add past the pipeline's compute) and
    `dp_bound` (a lower bound on the step).

    ```mlir
    pipe.schedule @demo_1f1b for @demo {
      pipe.rank 0 stages [@s0] {
        pipe.forward @s0 mb 0
        pipe.backward @s0 mb 0
      }
      pipe.rank 1 stages [@s1] {
        pipe.forward @s1 mb 0
        pipe.backward @s1 mb 0
      }
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    FlatSymbolRefAttr:$pipeline,
    OptionalAttr<StrAttr>:$kind,
    OptionalAttr<F64Attr>:$makespan,
    OptionalAttr<F64Attr>:$bubble_ratio,
    OptionalAttr<DenseF64ArrayAttr>:$peak_memory,
    OptionalAttr<F64Attr>:$span,
    OptionalAttr<StrAttr>:$dp_placement,
    OptionalAttr<F64Attr>:$dp_bucket,
    OptionalAttr<F64Attr>:$dp_step,
    OptionalAttr<DenseF64ArrayAttr>:$dp_exposed,
    OptionalAttr<F64Attr>:$dp_bound
  );
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `for` $pipeline attr-dict-with-keyword $body";
  let extraClassDeclaration = [{
    auto getRanks() { return getBody().front().getOps<RankOp>(); }
  }];
}

def Pipe_RankOp : Pipe_Op<"rank", [
    HasParent<"ScheduleOp">, NoTerminator, SingleBlock]> {
  let summary = "The stages one rank hosts and its actions in run order";
  let arguments = (ins
    ConfinedAttr<I64Attr, [IntNonNegative]>:$id,
    FlatSymbolRefArrayAttr:$stages
  );
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$id `stages` $stages attr-dict-with-keyword $body";
}

class Pipe_ActionOp<string mnemonic, string summaryText>
    : Pipe_Op<mnemonic, [HasParent<"RankOp">]> {
  let summary = summaryText;
  let description = [{
    Runs the action of `$stage` for microbatch `$microbatch` on the enclosing
    rank, after the previous action of that rank.
  }];
  let arguments = (ins
    FlatSymbolRefAttr:$stage,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$microbatch
  );
  let assemblyFormat = "$stage `mb` $microbatch attr-dict";
}

def Pipe_RecomputeMode : I32EnumAttr<"RecomputeMode",
    "what a forward drops and its backward re-derives", [
      I32EnumAttrCase<"full", 1>,
      I32EnumAttrCase<"selective", 2>]> {
  let cppNamespace = "::stagecraft::pipe";
}

def Pipe_ForwardOp : Pipe_Op<"forward", [HasParent<"RankOp">]> {
  let summary = "Forward (F)";
  let description = [{
    Runs the forward of `$stage` for microbatch `$microbatch` on the
    enclosing rank, after the previous action of that rank. With
    `recompute full`, it keeps only the stage's `recomputed` memory and the
    backward of the same microbatch first runs the forward again; with
    `recompute selective`, it keeps the stage's `selective` memory and the
    backward first re-runs the stage's selective cost. Either way the
    backward re-materializes the whole activation, freed as usual.

    ```mlir
    pipe.forward @s0 mb 3 recompute full
    ```
  }];
  let arguments = (ins
    FlatSymbolRefAttr:$stage,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$microbatch,
    OptionalAttr<Pipe_RecomputeMode>:$recompute
  );
  let assemblyFormat =
      "$stage `mb` $microbatch (`recompute` $recompute^)? attr-dict";
}
def Pipe_BackwardInputOp
    : Pipe_ActionOp<"backward_input", "Backward for the input gradient (I)">;
def Pipe_BackwardWeightOp
    : Pipe_ActionOp<"backward_weight", "Backward for the weight gradient (W)">;
def Pipe_BackwardOp
    : Pipe_ActionOp<"backward", "Full backward, I and W fused (B)">;

def Pipe_AttentionForwardOp
    : Pipe_ActionOp<"attention_forward",
                     "Core attention that follows a stage, forward (A)">;
def Pipe_AttentionBackwardOp
    : Pipe_ActionOp<"attention_backward",
                     "Core attention that follows a stage, backward (G)">;

def Pipe_ForwardBackwardOp : Pipe_Op<"forward_backward", [HasParent<"RankOp">]> {
  let summary = "A forward overlapped with a full backward (X, DualPipe's F&B)";
  let description = [{
    Runs the forward of `$forward_stage` for `$forward_microbatch` and the
    full backward (I and W) of `$backward_stage` for `$backward_microbatch`
    at once on the enclosing rank, as DualPipe overlaps one chunk's forward
    computation with another chunk's backward communication. It waits for
    the dependencies of both halves. Its cost is F + B less the mean of the
    two stages' overlap gains (F + B - forward_backward), and never less than
    the longer half. `recompute` applies to the forward half as on
    `pipe.forward`.

    ```mlir
    pipe.forward_backward @s0 mb 4, @s7 mb 1
    ```
  }];
  let arguments = (ins
    FlatSymbolRefAttr:$forward_stage,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$forward_microbatch,
    FlatSymbolRefAttr:$backward_stage,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$backward_microbatch,
    OptionalAttr<Pipe_RecomputeMode>:$recompute
  );
  let assemblyFormat = [{
    $forward_stage `mb` $forward_microbatch (`recompute` $recompute^)? `,`
    $backward_stage `mb` $backward_microbatch attr-dict
  }];
}

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

class Pipe_CommOp<string mnemonic, string summaryText, string direction>
    : Pipe_Op<mnemonic, [ParentOneOf<["RankOp", "GroupOp"]>]> {
  let summary = summaryText;
  let description = [{
    A point-to-point transfer with rank `$peer` of the message produced by
    `$stage` for `$microbatch`: an activation (the output of its forward,
    for the next stage) or a gradient (the output of its input backward, for
    the previous stage). Transfers between two ranks match in issue order. A
    lone send is asynchronous; a lone receive blocks until matched.

    ```mlir
    pipe.send_activation @s0 mb 3 to 1
    pipe.recv_gradient @s1 mb 2 from 1
    ```
  }];
  let arguments = (ins
    FlatSymbolRefAttr:$stage,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$microbatch,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$peer
  );
  let assemblyFormat =
      "$stage `mb` $microbatch `" # direction # "` $peer attr-dict";
}

def Pipe_SendActivationOp
    : Pipe_CommOp<"send_activation", "Send a forward output", "to">;
def Pipe_RecvActivationOp
    : Pipe_CommOp<"recv_activation", "Receive a forward output", "from">;
def Pipe_SendGradientOp
    : Pipe_CommOp<"send_gradient", "Send an input gradient", "to">;
def Pipe_RecvGradientOp
    : Pipe_CommOp<"recv_gradient", "Receive an input gradient", "from">;

def Pipe_AttentionMessage : I32EnumAttr<"AttentionMessage",
    "what travels between a stage and the attention that follows it", [
      I32EnumAttrCase<"qkv", 0>,
      I32EnumAttrCase<"output", 1>,
      I32EnumAttrCase<"output_grad", 2>,
      I32EnumAttrCase<"qkv_grad", 3>]> {
  let cppNamespace = "::stagecraft::pipe";
}

class Pipe_AttentionCommOp<string mnemonic, string summaryText,
                           string direction>
    : Pipe_Op<mnemonic, [ParentOneOf<["RankOp", "GroupOp"]>]> {
  let summary = summaryText;
  let description = [{
    A transfer with rank `$peer` for the attention that follows `$stage`:
    `qkv` from the stage's forward to the attention forward, `output` from
    the attention forward to the next stage's forward, `output_grad` from the
    next stage's backward to the attention backward, `qkv_grad` from the
    attention backward to the stage's backward. Matching and blocking as for
    the other transfers.

    ```mlir
    pipe.send_attention qkv @b0 mb 3 to 2
    pipe.recv_attention output @b0 mb 3 from 2
    ```
  }];
  let arguments = (ins
    Pipe_AttentionMessage:$message,
    FlatSymbolRefAttr:$stage,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$microbatch,
    ConfinedAttr<I64Attr, [IntNonNegative]>:$peer
  );
  let assemblyFormat =
      "$message $stage `mb` $microbatch `" # direction # "` $peer attr-dict";
}

def Pipe_SendAttentionOp
    : Pipe_AttentionCommOp<"send_attention", "Send attention data", "to">;
def Pipe_RecvAttentionOp
    : Pipe_AttentionCommOp<"recv_attention", "Receive attention data", "from">;

def Pipe_GroupOp : Pipe_Op<"group", [
    HasParent<"RankOp">, NoTerminator, SingleBlock]> {
  let summary = "Grouped point-to-point transfers (NCCL group semantics)";
  let description = [{
    Posts all its sends and receives at once and completes when every one of
    them has been matched, like transfers between `ncclGroupStart` and
    `ncclGroupEnd` (or Megatron's batched `send_forward_recv_backward`).

    ```mlir
    pipe.group {
      pipe.send_activation @s0 mb 1 to 1
      pipe.recv_gradient @s1 mb 0 from 1
    }
    ```
  }];
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
}

#endif // STAGECRAFT_DIALECT_PIPEOPS_TD
