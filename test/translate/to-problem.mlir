// RUN: stagecraft-translate --pipe-to-problem %s --pipeline-name=linked | FileCheck %s
// RUN: not stagecraft-translate --pipe-to-problem %s 2>&1 | FileCheck %s --check-prefix=SEVERAL
// RUN: not stagecraft-translate --pipe-to-problem %s --pipeline-name=none 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: stagecraft-translate --pipe-to-problem %s --pipeline-name=branch | FileCheck %s --check-prefix=BRANCH

// Tests that --pipe-to-problem writes every field of a spec's pipeline as
// problem JSON (what the Python wheel's sc.load reads): devices, links,
// outputs, capacity, lengths and scaling, branching inputs and pins; and
// that the pipeline is named when there are several.
// CHECK: "format": "stagecraft-problem",
// CHECK-NEXT: "version": 1,
// CHECK-NEXT: "name": "linked",
// CHECK-NEXT: "ranks": 2,
// CHECK-NEXT: "microbatches": 4,
// CHECK-NEXT: "latency": 0,
// CHECK-NEXT: "message_overhead": 0,
// CHECK-NEXT: "receive_overhead": 0,
// CHECK-NEXT: "capacity": 50,
// CHECK-NEXT: "stages": [
// CHECK: "name": "s0",
// CHECK-NEXT: "forward": 1,
// CHECK: "output": 2,
// CHECK-NEXT: "scaling_linear": 1,
// CHECK-NEXT: "scaling_quadratic": 0.5,
// CHECK: "devices": [
// CHECK-NEXT: {
// CHECK-NEXT: "name": "fast",
// CHECK-NEXT: "speed": 1,
// CHECK-NEXT: "memory": 40
// CHECK: "name": "slow",
// CHECK-NEXT: "speed": 0.5
// CHECK-NEXT: }
// CHECK: "links": {
// CHECK-NEXT: "node": 1,
// CHECK-NEXT: "intra": {
// CHECK-NEXT: "latency": 0,
// CHECK-NEXT: "bandwidth": 4
// CHECK: "lengths": [
// CHECK-NEXT: 1,
// CHECK-NEXT: 2,
// CHECK-NEXT: 1,
// CHECK-NEXT: 2
// CHECK-NEXT: ],
// CHECK-NEXT: "reference_length": 1,
// CHECK-NEXT: "microbatch_order": []
// SEVERAL: error: several pipelines; choose one with --pipeline-name
// NONE: error: no pipe.pipeline named @none
// BRANCH: "latency": 0.25,
// BRANCH: "name": "c",
// BRANCH: "inputs": [
// BRANCH-NEXT: 0,
// BRANCH-NEXT: 1
// BRANCH-NEXT: ],
// BRANCH-NEXT: "rank": 1,
pipe.pipeline @linked ranks(2) microbatches(4) capacity(50.0) lengths(1.0, 2.0, 1.0, 2.0) reference_length(1.0) devices(@fast x 1, @slow x 1) links(node = 1, intra = (latency = 0.0, bandwidth = 4.0), inter = (latency = 0.0, bandwidth = 1.0)) {
  pipe.device @fast speed(1.0) memory(40.0)
  pipe.device @slow speed(0.5)
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) output(2.0) scaling(linear = 1.0, quadratic = 0.5)
  pipe.stage @s1 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 1.0) output(2.0)
}
pipe.pipeline @branch ranks(2) microbatches(2) latency(0.25) {
  pipe.stage @a inputs() rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @b inputs() rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @c inputs(@a, @b) rank(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// A spec of layers has no stages until --pipe-partition cuts it.
// RUN: not stagecraft-translate --pipe-to-problem %examples/cluster.mlir 2>&1 | FileCheck %s --check-prefix=LAYERS
// RUN: stagecraft-opt --pipe-partition %examples/cluster.mlir | stagecraft-translate --pipe-to-problem | FileCheck %s --check-prefix=CUT
// LAYERS: cluster.mlir:7:1: error: pipeline @cluster has no stages to write; a spec of pipe.layer ops is cut into stages first: stagecraft-opt --pipe-partition
// CUT: "name": "cluster",
// CUT: "stages": [
// CUT-NEXT: {
