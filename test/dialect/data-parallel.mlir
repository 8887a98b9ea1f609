// RUN: stagecraft-opt %s | stagecraft-opt | FileCheck %s
// RUN: stagecraft-opt %S/Inputs/data-parallel-invalid.mlir -split-input-file -verify-diagnostics

// Tests that data_parallel(...) on a pipeline and gradient(X) on its stages
// round-trip, entries in any order, defaults left out.

// CHECK: pipe.pipeline @ddp ranks(2) microbatches(4) data_parallel(degree = 8) {
// CHECK-NEXT: pipe.stage @s0 {{.*}} gradient(2000000000.0)
// CHECK: pipe.pipeline @fsdp ranks(2) microbatches(4) data_parallel(degree = 4, sharding = full, latency = 1.0e-05, bandwidth = 50000000000.0, optimizer = 1.0e-12) {
// CHECK: pipe.pipeline @hsdp ranks(2) microbatches(4) data_parallel(degree = 8, sharding = hybrid, shard_group = 4, latency = 1.0e-05, bandwidth = 50000000000.0, inter_latency = 2.0e-05, inter_bandwidth = 12000000000.0) {
pipe.pipeline @ddp ranks(2) microbatches(4) data_parallel(degree = 8) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0e9)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0e9)
}
pipe.pipeline @fsdp ranks(2) microbatches(4) data_parallel(optimizer = 1.0e-12, bandwidth = 5.0e10, latency = 1.0e-5, sharding = full, degree = 4) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0e9)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0e9)
}
pipe.pipeline @hsdp ranks(2) microbatches(4) data_parallel(degree = 8, sharding = hybrid, shard_group = 4, latency = 1.0e-5, bandwidth = 5.0e10, inter_latency = 2.0e-5, inter_bandwidth = 1.2e10) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0e9)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(2.0e9)
}
