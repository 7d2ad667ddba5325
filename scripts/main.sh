#!/usr/bin/env bash
# The main job: builds dlc (installing what is missing, Debian's
# Fashion-MNIST included), compiles models/lenet5.dl into a program and
# trains it with its train section's settings (10 epochs, batch 64, SGD with
# momentum), saving the weights and a report in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh main
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)"
build/dlc models/lenet5.dl -o build/lenet5
build/lenet5 info
build/lenet5 train --save build/lenet5.safetensors --log build/lenet5.csv --report build/lenet5.json
