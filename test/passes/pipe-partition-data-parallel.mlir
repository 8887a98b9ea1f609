// RUN: stagecraft-opt %s --pipe-partition | FileCheck %s
// RUN: stagecraft-opt %s --pipe-partition --pipe-schedule=kind=auto --pipe-simulate | FileCheck %s --check-prefix=AUTO
// RUN: stagecraft-opt %s | stagecraft-opt | FileCheck %s --check-prefix=ROUNDTRIP

// Tests data_parallel(...) on a pipeline of pipe.layer ops: each layer gives
// gradient(X), the bytes of its gradient; --pipe-partition gives each stage
// its layers' sum (the embedding's 3 + one block's 1 on the first, the
// head's 3 + one block's 1 on the last), and the step with the reductions
// is then scheduled and simulated as for a pipeline of stages.

pipe.pipeline @llm ranks(4) microbatches(8) data_parallel(degree = 8, latency = 0.01, bandwidth = 4.0) {
  pipe.layer @embed cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) gradient(3.0)
  pipe.layer @block count(6) cost(forward = 2.0, backward_input = 2.0, backward_weight = 2.0) memory(activation = 1.0) gradient(1.0)
  pipe.layer @head cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) gradient(3.0)
}

// CHECK-LABEL: pipe.pipeline @llm ranks(4) microbatches(8) data_parallel(degree = 8, latency = 0.01, bandwidth = 4.0) {
// CHECK-NEXT: pipe.stage @s0 layers(2) {{.*}} gradient(4.0) {layer_range = array<i64: 0, 2>}
// CHECK-NEXT: pipe.stage @s1 layers(2) {{.*}} gradient(2.0) {layer_range = array<i64: 2, 4>}
// CHECK-NEXT: pipe.stage @s2 layers(2) {{.*}} gradient(2.0) {layer_range = array<i64: 4, 6>}
// CHECK-NEXT: pipe.stage @s3 layers(2) {{.*}} gradient(4.0) {layer_range = array<i64: 6, 8>}
// CHECK-NEXT: }

// AUTO: pipe.schedule @llm_auto
// AUTO-SAME: dp_bound =
// AUTO-SAME: dp_exposed = array<f64:
// AUTO-SAME: dp_step =

// ROUNDTRIP: pipe.layer @embed cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 1.0) gradient(3.0)
// ROUNDTRIP: pipe.layer @block count(6) {{.*}} gradient(1.0)
