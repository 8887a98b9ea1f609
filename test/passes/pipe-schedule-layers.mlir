// RUN: stagecraft-opt %s -verify-diagnostics --pipe-schedule=kind=1f1b

// Tests that a layer pipeline must be cut into stages before scheduling.
// expected-error @below {{pipeline @layers holds pipe.layer ops: cut it into stages first with --pipe-partition (e.g. --pipe-partition="stages=auto" --pipe-schedule=...)}}
pipe.pipeline @layers ranks(2) microbatches(2) {
  pipe.layer @l count(4) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
