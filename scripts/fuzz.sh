#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-19 from Debian, ASan + UBSan, the
# fuzzer's coverage) in build-fuzz and runs each for SECONDS (default 60)
# on a working corpus seeded from fuzz/corpus/<target>. A crash, hang
# (-timeout) or sanitizer report stops the run with the input saved under
# build-fuzz/findings/<target>/ and a non-zero exit.
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(spec csv plan policy train-options)
bash scripts/install-deps.sh
missing=()
for p in clang-19 libclang-rt-19-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -f build-fuzz/build.ninja ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DSTAGECRAFT_FUZZ=ON -DSTAGECRAFT_ENABLE_CUDA=OFF
fi
cmake --build build-fuzz -j2 --target $(printf 'stagecraft-fuzz-%s ' "${targets[@]}")
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t
  findings=build-fuzz/findings/$t
  mkdir -p "$work" "$findings"
  echo "== stagecraft-fuzz-$t for ${seconds}s"
  if ! build-fuzz/bin/stagecraft-fuzz-$t "$work" "fuzz/corpus/$t" \
      -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" \
      2> "build-fuzz/$t.log"; then
    status=1
    echo "stagecraft-fuzz-$t: FAILED; see build-fuzz/$t.log and $findings/"
  fi
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" \
    "build-fuzz/$t.log" || true
  echo "corpus: $(ls "$work" | wc -l) inputs"
done
exit $status
