#!/usr/bin/env bash
# Installs what dlc needs on Debian 12, skipping what is already there.
#   scripts/deps.sh build   the compiler and runtime: a C compiler, CMake,
#                           flex, bison, zlib, OpenBLAS
#   scripts/deps.sh main    also Debian's Fashion-MNIST, for the main job
#   scripts/deps.sh test    also the test tools: LLVM's FileCheck and not
#                           (llvm-16-tools), clang-16 with libFuzzer, Graphviz,
#                           Python with venv, PyTorch and NumPy (the numeric
#                           oracle), torchvision (the model zoo's reference),
#                           Debian's Fashion-MNIST, and LLVM's lit
#                           from PyPI in .venv
#   scripts/deps.sh bench   the compiler's packages, and what the benchmarks
#                           against PyTorch run and plot with: PyTorch,
#                           torchvision, NumPy, GNU time (peak memory) and
#                           gnuplot
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-build}

pkgs=(build-essential cmake flex bison zlib1g-dev libopenblas-dev)
if [ "$what" = main ]; then
    pkgs+=(dataset-fashion-mnist)
fi
if [ "$what" = test ]; then
    pkgs+=(llvm-16-tools clang-16 libclang-rt-16-dev graphviz python3 python3-venv
           python3-torch python3-numpy python3-torchvision dataset-fashion-mnist)
fi

if [ "$what" = bench ]; then
    pkgs+=(python3 python3-torch python3-numpy python3-torchvision time gnuplot-nox)
fi

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$what" = test ] && ! .venv/bin/lit --version >/dev/null 2>&1; then
    echo "deps: installing lit into .venv"
    # Debian's own python3, so that later test oracles (python3-torch) are visible
    /usr/bin/python3 -m venv --system-site-packages .venv
    .venv/bin/pip install -q lit
fi
