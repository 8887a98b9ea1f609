#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, nvcc and the build's
# Debian packages installed: builds with the cuda backend, runs every test
# (the GPU ones included: lit marks them UNSUPPORTED only without a device;
# cuda-train.test checks training on the GPU against the CPU reference for
# every kind), runs the runtime benchmark on the cuda backend (every kind,
# ranks sharing the GPU, measured / simulated step time) and the training
# benchmark (tokens/s per kind for a ~110M-parameter model, measured /
# simulated with profiled costs). Results go to OUT_DIR:
#   bench/gpu-check.sh OUT_DIR
# Writes nvidia-smi.txt, build.log, tests.log, lit-cuda.log,
# runtime-cuda.md, train-cuda.md and summary.txt.
set -uo pipefail
out=${1:?usage: bench/gpu-check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
build=build-gpu
status=0
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 ||
  echo "nvidia-smi failed: no GPU visible" >> "$out/nvidia-smi.txt"
{
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSTAGECRAFT_ENABLE_CUDA=ON &&
    cmake --build "$build" -j"$(nproc)"
} > "$out/build.log" 2>&1 || { echo "build failed" > "$out/summary.txt"; exit 1; }
grep -q "cuda backend: ON" "$out/build.log" ||
  { echo "build has no cuda backend (nvcc not found)" > "$out/summary.txt"; exit 1; }
ctest --test-dir "$build" -j4 --output-on-failure > "$out/tests.log" 2>&1 || status=1
/usr/lib/llvm-19/build/utils/lit/lit.py -v "$build/test" \
  --filter cuda > "$out/lit-cuda.log" 2>&1 || status=1
BACKENDS=cuda bench/runtime-bench.sh "$build" > "$out/runtime-cuda.md" 2>&1 || status=1
bench/train-gpu-bench.sh "$build" > "$out/train-cuda.md" 2>&1 || status=1
{
  echo "gpu-check: $( [ $status = 0 ] && echo passed || echo FAILED )"
  grep -E "tests passed|tests failed" "$out/tests.log"
  grep -E "^(PASS|FAIL|UNSUPPORTED):" "$out/lit-cuda.log"
  cat "$out/runtime-cuda.md"
  echo
  cat "$out/train-cuda.md"
} > "$out/summary.txt"
cat "$out/summary.txt"
exit $status
