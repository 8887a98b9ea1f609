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
#
# A GPU machine without the Debian packages (no MLIR or LLVM to build with)
# takes a bundle made by bench/gpu-bundle.sh on the build machine instead:
#   bench/gpu-check.sh OUT_DIR --bundle=BUNDLE_DIR
# Then nothing is built and only the GPU tests (lit --filter cuda) and the
# benchmarks run: the rest of the suite needs no GPU and runs in CI.
set -uo pipefail
out=${1:?usage: bench/gpu-check.sh OUT_DIR [--bundle=BUNDLE_DIR]}
bundle=""
case "${2:-}" in
  --bundle=*) bundle=$(cd "${2#--bundle=}" && pwd) ;;
  "") ;;
  *) echo "usage: bench/gpu-check.sh OUT_DIR [--bundle=BUNDLE_DIR]" >&2; exit 2 ;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
build=build-gpu
status=0
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 ||
  echo "nvidia-smi failed: no GPU visible" >> "$out/nvidia-smi.txt"
if [ -n "$bundle" ]; then
  {
    # The lit site config names the build machine's paths: the source at
    # /work/main and LLVM's tools in /usr/lib/llvm-19/bin.
    src=$(grep -oP 'stagecraft_src_root = "\K[^"]+' "$bundle/test/lit.site.cfg.py")
    if [ "$(cd "$src" 2>/dev/null && pwd -P)" != "$(pwd -P)" ]; then
      [ ! -e "$src" ] || { echo "$src exists and is not this checkout"; exit 1; }
      mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"
    fi
    [ -e /usr/lib/llvm-19/bin/FileCheck ] ||
      { mkdir -p /usr/lib/llvm-19 && ln -sfn "$bundle/llvm/bin" /usr/lib/llvm-19/bin; }
    mkdir -p "$build/bin" "$build/test"
    cp "$bundle/bin/stagecraft-run" "$build/bin/"
    cp "$bundle/test/lit.site.cfg.py" "$build/test/"
    # CUDA's libraries: the toolkit's, else the ones pip installed.
    cudalibs=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/lib /opt \
      -name 'libcublas.so.13' -o -name 'libnccl.so.2' -o -name 'libcudart.so.13' 2>/dev/null |
      xargs -r -n1 dirname | sort -u | tr '\n' ':')
    export LD_LIBRARY_PATH="$bundle/lib:$cudalibs${LD_LIBRARY_PATH:-}"
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    ldd "$build/bin/stagecraft-run"
    "$build/bin/stagecraft-run" --version
  } > "$out/build.log" 2>&1 || { echo "bundle set-up failed" > "$out/summary.txt"; exit 1; }
  echo "bundle: only the GPU tests run here (the rest run in CI)" > "$out/tests.log"
  lit="python3 $bundle/lit/lit.py"
else
  {
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DSTAGECRAFT_ENABLE_CUDA=ON &&
      cmake --build "$build" -j"$(nproc)"
  } > "$out/build.log" 2>&1 || { echo "build failed" > "$out/summary.txt"; exit 1; }
  grep -q "cuda backend: ON" "$out/build.log" ||
    { echo "build has no cuda backend (nvcc not found)" > "$out/summary.txt"; exit 1; }
  ctest --test-dir "$build" -j4 --output-on-failure > "$out/tests.log" 2>&1 || status=1
  lit=/usr/lib/llvm-19/build/utils/lit/lit.py
fi
$lit -v "$build/test" --filter cuda > "$out/lit-cuda.log" 2>&1 || status=1
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
