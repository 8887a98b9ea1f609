// RUN: stagecraft-opt %s --pipe-schedule="kind=interleaved-1f1b chunks=2" | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=interleaved-1f1b" | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=interleaved-1f1b" --pipe-simulate | FileCheck %s --check-prefix=SIM

// Tests Megatron's interleaved order: stage s on rank s mod 2, microbatches
// in rounds of 2, chunk 0 of a round before chunk 1, backwards with chunks
// reversed; rank r warms up with (2 - r - 1) * 2 + (2 - 1) * 2 forwards, then
// runs one forward and one backward in turn.
// CHECK-LABEL: pipe.schedule @four_interleaved_1f1b for @four attributes {kind = "interleaved-1f1b"}
// CHECK:      pipe.rank 0 stages [@s0, @s2] {
// CHECK-NEXT:   pipe.forward @s0 mb 0
// CHECK-NEXT:   pipe.forward @s0 mb 1
// CHECK-NEXT:   pipe.forward @s2 mb 0
// CHECK-NEXT:   pipe.forward @s2 mb 1
// CHECK-NEXT:   pipe.forward @s0 mb 2
// CHECK-NEXT:   pipe.backward @s2 mb 0
// CHECK:      pipe.rank 1 stages [@s1, @s3] {
// CHECK-NEXT:   pipe.forward @s1 mb 0
// CHECK-NEXT:   pipe.forward @s1 mb 1
// CHECK-NEXT:   pipe.forward @s3 mb 0
// CHECK-NEXT:   pipe.backward @s3 mb 0
// CHECK-NEXT:   pipe.forward @s3 mb 1
// CHECK-NEXT:   pipe.backward @s3 mb 1

// Tests Megatron's bubble: (m v + p - 1) chunk steps = (4 * 2 + 1) * 3.
// SIM: makespan = 2.700000e+01 : f64
pipe.pipeline @four ranks(2) microbatches(4) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
