// A model given as layers on mixed devices: two ranks at full speed, two at
// half speed with half the memory. --pipe-partition (or stagecraft-run,
// which partitions a layer spec first) cuts it into one stage per rank so
// that the slowest stage is fastest: the half-speed ranks get fewer layers.
//   build/bin/stagecraft-opt examples/layers.mlir --pipe-partition --pipe-schedule=kind=zb-h1
//   build/bin/stagecraft-run examples/layers.mlir --schedule=zb-h1 --train
pipe.pipeline @llm ranks(4) microbatches(8) devices(@h100 x 2, @a100 x 2) {
  pipe.device @h100 speed(1.0) memory(40.0)
  pipe.device @a100 speed(0.5) memory(20.0)
  pipe.layer @embed cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 1.0) params(2.0)
  pipe.layer @block count(14) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) params(1.0)
  pipe.layer @head cost(forward = 2.0, backward_input = 2.0, backward_weight = 2.0) memory(activation = 2.0) params(4.0)
}
