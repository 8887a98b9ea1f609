// RUN: stagecraft-opt %s | stagecraft-opt | FileCheck %s
// RUN: stagecraft-opt %S/Inputs/lengths-invalid.mlir -split-input-file -verify-diagnostics

// Tests that lengths(...), reference_length(X) and scaling(...) round-trip;
// scaling(quadratic = b) alone means linear = 0.

// CHECK: pipe.pipeline @var ranks(2) microbatches(3) lengths(512.0, 4096.0, 1024.0) reference_length(2048.0) {
// CHECK-NEXT: pipe.stage @s0 {{.*}} scaling(linear = 1.0, quadratic = 0.0005)
// CHECK-NEXT: pipe.stage @s1 {{.*}} scaling(linear = 0.0, quadratic = 1.0)
// CHECK-NEXT: pipe.stage @s2
// CHECK-NOT: scaling
pipe.pipeline @var ranks(2) microbatches(3) lengths(512, 4096, 1024) reference_length(2048) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = 0.0005)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(quadratic = 1.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
