#!/usr/bin/env bash
# Installs what dlc needs on Debian 12, skipping what is already there.
#   scripts/deps.sh build   the compiler and runtime: a C compiler, CMake,
#                           flex, bison, zlib, libpng, libjpeg-turbo, OpenBLAS
#   scripts/deps.sh main    also the data: Debian's Fashion-MNIST (images)
#                           and fortunes (English text, for the
#                           character-level language models)
#   scripts/deps.sh test    also the test tools: LLVM's FileCheck and not
#                           (llvm-16-tools), clang-16 with libFuzzer, Graphviz,
#                           Python with venv, PyTorch and NumPy (the numeric
#                           oracle), torchvision (the model zoo's reference),
#                           the data (Fashion-MNIST and fortunes), pkg-config
#                           and man (the installed dlrt.pc and man pages), Open
#                           MPI and iproute2 (data-parallel training under
#                           mpirun, between network namespaces), and LLVM's lit
#                           from PyPI in .venv
#   scripts/deps.sh bench   the compiler's packages, and what the benchmarks
#                           against PyTorch run and plot with: PyTorch,
#                           torchvision, NumPy, GNU time (peak memory) and
#                           gnuplot
#   scripts/deps.sh peers   also the other peers of bench/peers_vs_dlc.sh, from
#                           PyPI in bench/.venv-peers: JAX (CPU), PyTorch 2
#                           with torch.compile (its PyPI wheel without the
#                           CUDA libraries it does not load), torchvision,
#                           ONNX Runtime, ONNX, OpenVINO and Apache TVM
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-build}

pkgs=(build-essential cmake flex bison zlib1g-dev libpng-dev libjpeg62-turbo-dev
      libopenblas-dev llvm-16-dev)
if [ "$what" = main ]; then
    pkgs+=(dataset-fashion-mnist fortunes)
fi
if [ "$what" = test ]; then
    pkgs+=(llvm-16-tools clang-16 libclang-rt-16-dev graphviz python3 python3-venv
           python3-torch python3-numpy python3-torchvision dataset-fashion-mnist fortunes
           pkg-config man-db libopenmpi-dev openmpi-bin iproute2)
fi

if [ "$what" = bench ] || [ "$what" = peers ]; then
    pkgs+=(python3 python3-torch python3-numpy python3-torchvision time gnuplot-nox)
fi
if [ "$what" = peers ]; then
    pkgs+=(python3-venv python3-dev)
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

if [ "$what" = peers ] && ! bench/.venv-peers/bin/python -c 'import jax, torch, torchvision, onnxruntime, openvino, tvm' >/dev/null 2>&1; then
    echo "deps: installing the peers into bench/.venv-peers (about 5.3 GB)"
    /usr/bin/python3 -m venv bench/.venv-peers
    pip=bench/.venv-peers/bin/pip
    $pip install -q "jax[cpu]==0.10.2" onnxruntime==1.31.1 onnx==1.23.2 numpy \
        openvino==2026.4.1 apache-tvm==0.27.0.post1
    # PyPI's torch is the CUDA build (PyPI has no CPU-only one): it does not
    # load without the CUDA libraries it is linked against, though it never
    # uses them on the CPU. Only those are installed, not its other
    # dependencies on CUDA (Triton, which makes GPU kernels, cuSOLVER,
    # cuRAND, CUPTI, NVTX): half a gigabyte of wheels less (Triton's is
    # 248 MB, cuSOLVER's 201 MB); the CUDA libraries still take 2.8 GB.
    $pip install -q --no-deps torch==2.14.1 torchvision==0.29.2
    $pip install -q filelock "typing-extensions>=4.10" "setuptools>=77.0.3" "sympy>=1.13.3" \
        "networkx>=2.5.1" jinja2 "fsspec>=0.8.5" pillow
    $pip install -q "cuda-toolkit[cublas,cudart,cufft,cufile,cusparse,nvjitlink,nvrtc]==13.0.3" \
        nvidia-cudnn-cu13==9.24.0.43 nvidia-cusparselt-cu13==0.8.1 \
        nvidia-nccl-cu13==2.30.7 nvidia-nvshmem-cu13==3.4.5
fi
