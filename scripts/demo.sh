#!/usr/bin/env bash
# The README's first command: installs dependencies, builds, compiles the
# example specs with several schedule kinds and prints each summary (makespan,
# bubble ratio, peak memory per rank, ASCII timeline), then runs one on
# threads and under MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
opt=build/bin/stagecraft-opt
translate=build/bin/stagecraft-translate
run() { # spec kind-options
  echo
  echo "== $1 --pipe-schedule=\"$2\""
  "$opt" "$1" --pipe-schedule="$2" --pipe-verify-schedule --pipe-simulate |
    "$translate" --pipe-to-summary
}
run examples/demo.mlir "kind=gpipe"
run examples/demo.mlir "kind=1f1b"
run examples/interleaved.mlir "kind=1f1b"
run examples/interleaved.mlir "kind=interleaved-1f1b chunks=2"
run examples/heterogeneous.mlir "kind=1f1b"
run examples/heterogeneous.mlir "kind=auto"
echo
echo "== stagecraft-run examples/demo.mlir --schedule=zb-h1 --time-unit=2ms (threads)"
build/bin/stagecraft-run examples/demo.mlir --schedule=zb-h1 --time-unit=2ms
if command -v mpirun > /dev/null; then
  echo
  echo "== mpirun -np 4 stagecraft-run --backend=mpi examples/demo.mlir --schedule=zb-h1"
  mpirun --allow-run-as-root --oversubscribe -np 4 build/bin/stagecraft-run \
    --backend=mpi examples/demo.mlir --schedule=zb-h1 --time-unit=2ms
fi
echo
echo "== stagecraft-run examples/train.mlir --schedule=zb-h1 --train --steps=12 --lr=0.3"
build/bin/stagecraft-run examples/train.mlir --schedule=zb-h1 --train --steps=12 --lr=0.3
