// RUN: stagecraft-opt %s --pipe-partition | FileCheck %s
// RUN: stagecraft-opt %s --pipe-partition=stages=8 | FileCheck %s --check-prefix=EIGHT
// RUN: stagecraft-opt %s --pipe-partition --pipe-schedule=kind=zb-h1 | stagecraft-translate --pipe-to-summary | FileCheck %s --check-prefix=SUMMARY

// Tests that --pipe-partition cuts a layer pipeline into stages (one per
// rank by default): the slowest stage's (F + I + W) / speed is smallest,
// so the half-speed ranks get half the work; sums of costs, memory and
// params; layer counts and ranges; devices kept. Then every kind schedules
// the result, and the summary shows each rank's device and capacity.

// CHECK-LABEL: pipe.pipeline @llm ranks(4) microbatches(8) devices(@h100 x 2, @a100 x 2) {
// CHECK-NEXT: pipe.device @h100 speed(1.0) memory(40.0)
// CHECK-NEXT: pipe.device @a100 speed(0.5) memory(20.0)
// CHECK-NEXT: pipe.stage @s0 layers(6) cost(forward = 5.5, backward_input = 5.5, backward_weight = 5.5) memory(activation = 6.0, weight_grad = 6.0) params(7.0) {layer_range = array<i64: 0, 6>}
// CHECK-NEXT: pipe.stage @s1 layers(5) cost(forward = 5.0, backward_input = 5.0, backward_weight = 5.0) memory(activation = 5.0, weight_grad = 5.0) params(5.0) {layer_range = array<i64: 6, 11>}
// CHECK-NEXT: pipe.stage @s2 layers(3) cost(forward = 3.0, backward_input = 3.0, backward_weight = 3.0) memory(activation = 3.0, weight_grad = 3.0) params(3.0) {layer_range = array<i64: 11, 14>}
// CHECK-NEXT: pipe.stage @s3 layers(2) cost(forward = 3.0, backward_input = 3.0, backward_weight = 3.0) memory(activation = 3.0, weight_grad = 3.0) params(5.0) {layer_range = array<i64: 14, 16>}
// CHECK-NEXT: }

// Eight stages: two per rank, stage s on rank s mod 4.
// EIGHT: pipe.stage @s0 layers(3) {{.*}}layer_range = array<i64: 0, 3>
// EIGHT: pipe.stage @s7 layers(1) {{.*}}layer_range = array<i64: 15, 16>

// SUMMARY: makespan 160.5, bubble ratio 0.1589, lower bound 160.5
// SUMMARY: rank        busy        span   peak memory      params    capacity      recomputed F  device (speed)  stages
// SUMMARY-NEXT: 0         132 {{.*}} 40 {{.*}} @h100 (1)       @s0
// SUMMARY-NEXT: 1         120 {{.*}} 40 {{.*}} @h100 (1)       @s1
// SUMMARY-NEXT: 2         144 {{.*}} 20 {{.*}} @a100 (0.5)     @s2
// SUMMARY-NEXT: 3         144 {{.*}} 20 {{.*}} @a100 (0.5)     @s3
pipe.pipeline @llm ranks(4) microbatches(8) devices(@h100 x 2, @a100 x 2) {
  pipe.device @h100 speed(1.0) memory(40.0)
  pipe.device @a100 speed(0.5) memory(20.0)
  pipe.layer @embed cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 1.0) params(2.0)
  pipe.layer @block count(14) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) params(1.0)
  pipe.layer @head cost(forward = 2.0, backward_input = 2.0, backward_weight = 2.0) memory(activation = 2.0) params(4.0)
}
