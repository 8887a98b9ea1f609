#!/usr/bin/env bash
# Packs what bench/gpu-check.sh needs into one folder for a GPU machine that
# has CUDA 13 and Python but none of the build's Debian packages (no MLIR,
# LLVM, fmt or OpenBLAS): a cuda build of stagecraft-run relinked against
# LLVM's and MLIR's static archives, the shared libraries it still needs
# from Debian (fmt, OpenBLAS's Fortran runtime), and lit, FileCheck, not and
# count for the GPU lit tests. Usage, from the repository root:
#   bench/gpu-bundle.sh BUNDLE_DIR        (builds build-gpu first)
# On the GPU machine: bench/gpu-check.sh OUT_DIR --bundle=BUNDLE_DIR
set -euo pipefail
bundle=${1:?usage: bench/gpu-bundle.sh BUNDLE_DIR}
cd "$(dirname "$0")/.."
build=build-gpu
llvm=/usr/lib/llvm-19
if [ ! -f $build/build.ninja ]; then
  # Hopper (H100, H200) only: the bundle is for one such machine. No MPI:
  # one GPU, and the machine has no Open MPI.
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
fi
cmake --build $build -j2 --target stagecraft-run
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/llvm/bin"
# The link line ninja ran, with the shared libMLIR and libLLVM swapped for
# their static archives and OpenBLAS for its archive; the linker takes only
# the members the program uses.
link=$(ninja -C $build -t commands bin/stagecraft-run | tail -1)
link=${link#: && }
link=${link% && :}
archives="-Wl,--start-group $(ls $llvm/lib/libMLIR*.a | grep -v -e Test -e libMLIRTblgen \
  | tr '\n' ' ') $(ls $llvm/lib/libLLVM*.a | grep -v -e TableGen -e libLLVMgold | tr '\n' ' ') -Wl,--end-group"
link=${link//$llvm\/lib\/libMLIR.so.19.1/}
link=${link//$llvm\/lib\/libLLVM.so.1/$archives}
link=${link//\/usr\/lib\/x86_64-linux-gnu\/libopenblas.so/\/usr\/lib\/x86_64-linux-gnu\/libopenblas.a -lgfortran}
link=${link/-o bin\/stagecraft-run/-o bin\/stagecraft-run.static}
(cd $build && eval "$link -l:libz.so.1 -l:libzstd.so.1 -l:libtinfo.so.6 -ldl -lrt")
cp $build/bin/stagecraft-run.static "$bundle/bin/stagecraft-run"
strip "$bundle/bin/stagecraft-run"
# Libraries a CUDA 13 machine lacks: everything ldd finds outside glibc,
# libstdc++/libgcc and the CUDA toolkit, which the GPU machine brings.
copy_libs() {
  ldd "$1" | awk '/=> \//{print $3}' | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
      libcuda*|libcublas*|libnccl*|libcudart*|libnvidia*) ;;
      *) cp -L "$lib" "$bundle/lib/" ;;
    esac
  done
}
copy_libs "$bundle/bin/stagecraft-run"
for tool in FileCheck not count; do
  cp $llvm/bin/$tool "$bundle/llvm/bin/"
  copy_libs $llvm/bin/$tool
done
cp -r $llvm/build/utils/lit "$bundle/lit"
find "$bundle/lit" -name __pycache__ -prune -exec rm -rf {} +
# The lit site config of build-gpu, for the tests' paths.
mkdir -p "$bundle/test"
cp $build/test/lit.site.cfg.py "$bundle/test/"
echo "bundle in $bundle: $(du -sh "$bundle" | cut -f1)"
ldd "$bundle/bin/stagecraft-run" | awk '{print "  " $1}'
