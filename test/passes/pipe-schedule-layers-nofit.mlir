// RUN: not stagecraft-opt %s --pipe-schedule=kind=auto 2>&1 | FileCheck %s --check-prefix=NOFIT

// Nothing fits: the head alone needs more than the small device holds, and
// every order puts a stage with it on some small device or leaves a rank
// too little room.
// NOFIT: error: cannot schedule layer pipeline @tight as auto: no partition, device order and kind fits: {{.*}}stage 0 (rank 0) cannot fit even one layer: {{.*}} above its 3
pipe.pipeline @tight ranks(2) microbatches(4) devices(@big, @small) {
  pipe.device @big memory(12.0)
  pipe.device @small memory(3.0)
  pipe.layer @block count(2) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) params(4.0)
  pipe.layer @head cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) params(8.0)
}
