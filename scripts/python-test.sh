#!/usr/bin/env bash
# Builds the `stagecraft` Python package into a virtual environment
# (build-python/venv, made once) and runs its tests with pytest. Part of the
# README's test command. PyPI provides nanobind, scikit-build-core, pytest
# and torch; the C++ side needs what scripts/install-deps.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$PWD/build-python/venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check \
  nanobind scikit-build-core pytest numpy torch
"$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation .
# Outside the checkout's python/ folder, so that the installed package is
# the one tested.
cd build-python
timeout 1800 "$venv/bin/python" -m pytest -q ../python/tests
