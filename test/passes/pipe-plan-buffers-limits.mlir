// RUN: stagecraft-opt %s --pipe-schedule | not stagecraft-opt --pipe-plan-buffers=unit-bytes=9223372036854775807 2>&1 | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule | not stagecraft-translate --pipe-to-plan --unit-bytes=9223372036854775807 2>&1 | FileCheck %s
// RUN: not stagecraft-run %s --schedule=1f1b --unit-bytes=9223372036854775807 2>&1 | FileCheck %s

// Tests that a unit size whose buffers overflow 64-bit byte counts is an
// error (it used to wrap and exit 0).
// CHECK: error: unit-bytes=9223372036854775807 makes buffers of up to 9.223e+18 bytes (1 units), and all of them together overflow 64-bit sizes
pipe.pipeline @p ranks(2) microbatches(4) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
