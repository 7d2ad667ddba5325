#!/usr/bin/env bash
# The main job: builds dlc (installing what is missing) and compiles
# models/lenet5.dl, printing its IR: every layer with its shapes and
# parameters, and the training defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)"
build/dlc models/lenet5.dl --emit=ir
