#!/usr/bin/env bash
# Installs what Stagecraft builds and tests with, from Debian 12's packages.
# Runs as root (or with sudo); does nothing when everything is present.
set -euo pipefail
packages=(
  build-essential cmake ninja-build python3 python3-venv
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libfmt-dev libgtest-dev libopenblas-dev
  libopenmpi-dev openmpi-bin
  pkg-config coinor-libcbc-dev
  clang-format-19
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
