// A heterogeneous job: an embedding, 14 transformer blocks and a heavy LM
// head on 4 ranks, two fast devices and two at half the speed and memory,
// in two nodes of 2 whose link between them has 1/8 of the bandwidth
// inside a node. Layers, not stages: kind=auto chooses the cut, the stages
// per rank, which device sits where and the kind (docs/benchmarks.md, "A heterogeneous
// job end to end").
pipe.pipeline @cluster ranks(4) microbatches(8) devices(@h100 x 2, @a100 x 2) links(node = 2, intra = (latency = 0.01, bandwidth = 8.0), inter = (latency = 0.05, bandwidth = 1.0)) {
  pipe.device @h100 speed(1.0) memory(40.0)
  pipe.device @a100 speed(0.5) memory(20.0)
  pipe.layer @embed cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 1.0) params(2.0) output(0.25)
  pipe.layer @block count(14) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) params(1.0) output(0.25)
  pipe.layer @head cost(forward = 2.0, backward_input = 2.0, backward_weight = 2.0) memory(activation = 2.0) params(4.0)
}
