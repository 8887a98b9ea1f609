// RUN: stagecraft-opt %s --pipe-schedule="kind=1f1b" --pipe-simulate | FileCheck %s
// RUN: stagecraft-opt %s --pipe-schedule="kind=gpipe" --pipe-simulate | FileCheck %s --check-prefix=GPIPE

// Tests the recorded figures for 4 ranks x 8 microbatches: makespan
// (m + p - 1)(F + B + W) = 33 for both kinds, bubble (p - 1)/(m + p - 1) =
// 3/11; 1F1B peaks at p - r activations on rank r, GPipe at m everywhere.
// CHECK-LABEL: pipe.schedule @demo_1f1b for @demo
// CHECK-SAME: bubble_ratio = 0.27272727272727271 : f64
// CHECK-SAME: makespan = 3.300000e+01 : f64
// CHECK-SAME: peak_memory = array<f64: 4.000000e+00, 3.000000e+00, 2.000000e+00, 1.000000e+00>
// GPIPE-LABEL: pipe.schedule @demo_gpipe for @demo
// GPIPE-SAME: makespan = 3.300000e+01 : f64
// GPIPE-SAME: peak_memory = array<f64: 8.000000e+00, 8.000000e+00, 8.000000e+00, 8.000000e+00>
pipe.pipeline @demo ranks(4) microbatches(8) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// Tests latency on the links: one microbatch crosses one link each way.
// CHECK-LABEL: pipe.schedule @lat_1f1b for @lat
// CHECK-SAME: makespan = 7.000000e+00 : f64
pipe.pipeline @lat ranks(2) microbatches(1) latency(0.5) {
  pipe.stage @a cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @b cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
