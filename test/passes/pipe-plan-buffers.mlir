// RUN: stagecraft-opt %s --pipe-schedule="kind=1f1b" --pipe-plan-buffers="unit-bytes=1024" | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=gpipe" --pipe-plan-buffers="unit-bytes=1024" | FileCheck %s --check-prefix=GPIPE
// RUN: not stagecraft-opt %s --pipe-schedule --pipe-plan-buffers="unit-bytes=0" 2>&1 | FileCheck %s --check-prefix=BAD

// Tests slots by liveness for 4 ranks x 8 microbatches (weight_grad = 0.5:
// a stash half for I and one for W, 512 bytes each). 1F1B's rank 0 holds at
// most 4 microbatches: 4 x 2 stash halves + the outgoing activation + the
// incoming gradient = 10 slots, 7.5 KiB against 24 KiB with one buffer per
// microbatch; GPipe holds all 8 and needs 18.
// CHECK-LABEL: pipe.schedule @demo_1f1b for @demo
// CHECK-SAME: buffer_bytes = array<i64: 7680, 6144, 4608, 2560>
// CHECK-SAME: buffer_slots = array<i64: 10, 8, 6, 3>
// CHECK-SAME: naive_buffer_bytes = array<i64: 24576, 40960, 40960, 24576>
// GPIPE: buffer_bytes = array<i64: 13824, 13824, 13824, 9216>
// GPIPE-SAME: buffer_slots = array<i64: 18, 18, 18, 17>
// BAD: error: unit-bytes must be at least 1, got 0
pipe.pipeline @demo ranks(4) microbatches(8) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
}
