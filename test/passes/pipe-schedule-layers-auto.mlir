// RUN: stagecraft-opt %s --pipe-schedule=kind=auto --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-partition --pipe-schedule=kind=zb-h1 --pipe-simulate | FileCheck %s --check-prefix=FIXED

// Tests that kind=auto on a layer pipeline chooses stages per rank, the
// device order, the cut and the kind together: it becomes a stage pipeline
// (the devices in the chosen order) with the schedule and its choice, and
// it is faster than zb-h1 on the default cut (160.5).

// CHECK: pipe.pipeline @llm ranks(4) microbatches(8) devices(@a100 x 2, @h100 x 2) {
// CHECK: pipe.stage @s0 layers(1) {{.*}}layer_range = array<i64: 0, 1>
// CHECK: pipe.stage @s7 layers(1) {{.*}}layer_range = array<i64: 15, 16>
// CHECK: pipe.schedule @llm_auto for @llm attributes {auto_choice = "dualpipev on 8 stages (layers 0-0 | 1-1 | 2-4 | 5-7 | 8-10 | 11-13 | 14-14 | 15-15); devices by rank: @a100 @a100 @h100 @h100", {{.*}}makespan = 1.540000e+02
// FIXED: makespan = 1.605000e+02
pipe.pipeline @llm ranks(4) microbatches(8) devices(@h100 x 2, @a100 x 2) {
  pipe.device @h100 speed(1.0) memory(40.0)
  pipe.device @a100 speed(0.5) memory(20.0)
  pipe.layer @embed cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 1.0) params(2.0)
  pipe.layer @block count(14) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) params(1.0)
  pipe.layer @head cost(forward = 2.0, backward_input = 2.0, backward_weight = 2.0) memory(activation = 2.0) params(4.0)
}

