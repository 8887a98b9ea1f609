// RUN: stagecraft-opt %s --pipe-schedule=kind=1f1b --pipe-simulate | FileCheck %s --check-prefix=TORCH
// RUN: stagecraft-opt %s --pipe-schedule="kind=1f1b reduce=bucketed bucket=1.0" --pipe-simulate | FileCheck %s --check-prefix=BUCKET
// RUN: stagecraft-opt %s --pipe-schedule=kind=auto --pipe-simulate | FileCheck %s --check-prefix=AUTO
// RUN: stagecraft-opt %S/Inputs/long-tail-dp.mlir --pipe-schedule="kind=auto time-limit=1 memory-limit=14" --pipe-verify-schedule --pipe-simulate | FileCheck %s --check-prefix=ORDER
// RUN: not stagecraft-opt %s --pipe-schedule="kind=1f1b reduce=megatron" 2>&1 | FileCheck %s --check-prefix=BADREDUCE
// RUN: not stagecraft-opt %s --pipe-schedule="kind=1f1b reduce=bucketed bucket=0" 2>&1 | FileCheck %s --check-prefix=BADBUCKET
// RUN: not stagecraft-opt %s --pipe-schedule="kind=auto objective=span" 2>&1 | FileCheck %s --check-prefix=SPAN

// Tests the step inside data parallelism, worked by hand. 1F1B on 2 ranks x
// 2 microbatches (F = I = W = 1) ends at 9: rank 1's last backward at 7,
// rank 0's at 9. Each stage's 2-byte gradient all-reduced over 2 replicas
// (latency 0, bandwidth 1) takes 2 (2 - 1) (2 / 2) = 2:
// - torch's rule: rank 1 reduces over [7, 9], rank 0 over [9, 11]; the step
//   is 11 and rank 0 exposes 2.
// - buckets of 1 byte (1 each), released halfway through and at the end of
//   the last backward: rank 0's run [8, 9] and [9, 10]; the step is 10.
// - fully sharded: each stage's weights all-gathered first (1), so the
//   pipeline starts 1 late; reduce-scatters take 1: rank 0's over [10, 11].
// auto chooses the schedule and placement together: below every one of
// these (zb-h1's 7 with small buckets here).

// TORCH-LABEL: pipe.schedule @ddp_1f1b
// TORCH-SAME: dp_exposed = array<f64: 2.000000e+00, 0.000000e+00>, dp_placement = "torch", dp_step = 1.100000e+01
// TORCH-SAME: makespan = 9.000000e+00
// TORCH-LABEL: pipe.schedule @fsdp_1f1b
// TORCH-SAME: dp_exposed = array<f64: 2.000000e+00, 1.000000e+00>, dp_placement = "torch", dp_step = 1.100000e+01

// BUCKET-LABEL: pipe.schedule @ddp_1f1b
// BUCKET-SAME: dp_bucket = 1.000000e+00 : f64, dp_exposed = array<f64: 1.000000e+00, 0.000000e+00>, dp_placement = "bucketed", dp_step = 1.000000e+01

// AUTO-LABEL: pipe.schedule @ddp_auto
// AUTO-SAME: auto_choice = "zb-h1; bucketed 0.125 bytes"
// AUTO-SAME: dp_placement = "bucketed", dp_step = 8.062500e+00
// AUTO-SAME: kind = "auto", makespan = 7.000000e+00

// With lengths, auto may run the microbatches in another order: the
// schedule carries it, and verifies and simulates with it.
// ORDER: auto_choice = "auto (zb-h1; microbatches shortest first); bucketed
// ORDER-SAME: dp_step =
// ORDER-SAME: microbatch_order = array<i64: 7, 5, 3, 1, 0, 4, 6, 2>

// BADREDUCE: reduce=megatron is not one of torch, bucketed
// BADBUCKET: bucket=0 must be a finite number of bytes > 0
// SPAN: kind=auto with data_parallel(...) minimizes the step with its collectives; objective=span is not supported with it
pipe.pipeline @ddp ranks(2) microbatches(2) data_parallel(degree = 2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0)
}
pipe.pipeline @fsdp ranks(2) microbatches(2) data_parallel(degree = 2, sharding = full) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0)
}
