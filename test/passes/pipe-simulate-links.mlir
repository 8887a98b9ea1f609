// RUN: stagecraft-opt %s --pipe-schedule=kind=1f1b --pipe-simulate | FileCheck %s

// Tests that links(...) time a transfer as the crossed link's latency plus
// the stage's output over its bandwidth: with node = 1 every transfer
// crosses an inter link (0.5 + 1.0 / 2 = 1.0), the same makespan as
// latency(1.0); with node = 2 both ranks share a node (0.0 + 1.0 / 4 =
// 0.25), the same as latency(0.25).

// CHECK-LABEL: pipe.schedule @inter_1f1b
// CHECK-SAME: makespan = [[INTER:[0-9.e+]+]]
// CHECK-LABEL: pipe.schedule @latency_1f1b
// CHECK-SAME: makespan = [[INTER]]
// CHECK-LABEL: pipe.schedule @intra_1f1b
// CHECK-SAME: makespan = [[INTRA:[0-9.e+]+]]
// CHECK-LABEL: pipe.schedule @short_1f1b
// CHECK-SAME: makespan = [[INTRA]]
pipe.pipeline @inter ranks(2) microbatches(4) links(node = 1, intra = (latency = 0.0, bandwidth = 4.0), inter = (latency = 0.5, bandwidth = 2.0)) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) output(1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) output(1.0)
}
pipe.pipeline @latency ranks(2) microbatches(4) latency(1.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
pipe.pipeline @intra ranks(2) microbatches(4) links(node = 2, intra = (latency = 0.0, bandwidth = 4.0), inter = (latency = 0.5, bandwidth = 2.0)) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) output(1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) output(1.0)
}
pipe.pipeline @short ranks(2) microbatches(4) latency(0.25) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
