// RUN: stagecraft-opt %s | FileCheck %s
// RUN: stagecraft-opt %s | stagecraft-opt | FileCheck %s

// Tests that layer pipelines and devices print as they are written (defaults
// filled in, runs of a device as `@name x N`) and read back the same.

// CHECK-LABEL: pipe.pipeline @llm ranks(4) microbatches(8) capacity(50.0) devices(@h100 x 2, @a100, @h100) {
// CHECK-NEXT: pipe.device @h100 speed(1.0) memory(40.0)
// CHECK-NEXT: pipe.device @a100 speed(0.5){{$}}
// CHECK-NEXT: pipe.layer @embed cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 1.0, weight_grad = 1.0) params(2.0){{$}}
// CHECK-NEXT: pipe.layer @block count(14) cost(forward = 1.0, backward_input = 1.0, backward_weight = 0.8) memory(activation = 1.0, weight_grad = 0.5) params(1.0) output(1.0)
pipe.pipeline @llm ranks(4) microbatches(8) capacity(50.0) devices(@h100 x 2, @a100 x 1, @h100) {
  pipe.device @h100 memory(40.0) speed(1.0)
  pipe.device @a100 speed(0.5)
  pipe.layer @embed count(1) cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) params(2.0)
  pipe.layer @block count(14) cost(forward = 1.0, backward_input = 1.0, backward_weight = 0.8) output(1.0) memory(activation = 1.0, weight_grad = 0.5) params(1.0)
}

// Devices on a stage pipeline.
// CHECK-LABEL: pipe.pipeline @staged ranks(2) microbatches(2) devices(@fast, @slow) {
pipe.pipeline @staged ranks(2) microbatches(2) devices(@fast, @slow) {
  pipe.device @fast speed(2.0)
  pipe.device @slow
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// Links between ranks, and a stage's output.
// CHECK-LABEL: pipe.pipeline @linked ranks(2) microbatches(2) links(node = 4, intra = (latency = 0.01, bandwidth = 8.0), inter = (latency = 0.05, bandwidth = 1.0)) {
// CHECK-NEXT: pipe.stage @s0 {{.*}} output(2.0)
pipe.pipeline @linked ranks(2) microbatches(2) links(inter = (bandwidth = 1.0, latency = 0.05), node = 4, intra = (latency = 0.01, bandwidth = 8.0)) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) output(2.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
