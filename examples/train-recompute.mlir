// The reference transformer of train.mlir on ranks that hold 7.0 memory
// units each: every stage keeps 1.0 of parameters and 2.0 of activation per
// microbatch in flight, or 0.1 (its input) under full recomputation, or 1.5
// under selective recomputation (the attention probabilities re-derived from
// Q, K and V, at cost 0.2). recompute=auto (the default with a capacity)
// recomputes the forwards in flight longest until every rank fits:
//   stagecraft-run examples/train-recompute.mlir --schedule=zb-h1 --train
pipe.pipeline @train ranks(2) microbatches(4) capacity(7.0) {
  pipe.stage @s0 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, selective = 0.2) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.1, selective = 1.5) params(1.0)
  pipe.stage @s1 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, selective = 0.2) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.1, selective = 1.5) params(1.0)
  pipe.stage @s2 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, selective = 0.2) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.1, selective = 1.5) params(1.0)
  pipe.stage @s3 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, selective = 0.2) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.1, selective = 1.5) params(1.0)
}
