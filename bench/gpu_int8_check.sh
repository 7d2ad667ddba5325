#!/usr/bin/env bash
# int8 inference on an NVIDIA GPU, in one go for a session that is lent a
# device machine (issue 36, item 3): LeNet-5 and the small residual and
# inception networks of tests/program (int8 joins), compiled with --quantize=int8 --target=cpu,cuda and
# calibrated here, run on the device against the CPU (`check --mode infer`:
# the forward pass of one batch on both, every score the same bits), then
# evaluated on the device and on the CPU (the same accuracy), and timed
# (inference, batch 1 and 64, int8 against f32, on the device).
#
#   bench/gpu_int8_check.sh build [--build DIR] [--bin BIN]   (here)
#   bench/gpu_int8_check.sh run [--bin BIN]                   (on the GPU machine)
#
# The device machine has no LLVM to build dlc with, so `build` compiles the
# programs here (build/dlc by default, into gpu-int8/), trains LeNet-5 and
# the residual network briefly in f32 on a subset of Fashion-MNIST (2000
# training, 1000 test images, copied into BIN/data), calibrates them on the
# CPU into BIN/*.int8.safetensors, copies the shared libraries the programs
# load (OpenBLAS and its Fortran runtime, libgomp, zlib) into BIN/lib, and
# prints the device call to make: BIN must be ignored by git
# (.git/info/exclude) and carried.  `run` writes its report to
# $OUT/gpu_int8.txt (the device's folder that comes back) and to standard
# output: each check's verdict and its "same bit for bit" line, both
# devices' test accuracy, and the device's inference images per second.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-}
[ $# -gt 0 ] && shift
build=build
bin=gpu-int8
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        *) cmd=usage; break ;;
    esac
done
# name, source, check batch
nets=(
    "lenet5 models/lenet5.dl 64"
    "int8_resnet tests/program/Inputs/int8_resnet.dl 32"
    "int8_inception tests/program/Inputs/int8_inception.dl 32"
)

case "$cmd" in
build)
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j2 >/dev/null
    mkdir -p "$bin/lib" "$bin/data"
    python3 tests/program/Inputs/idx_subset.py /usr/share/datasets/fashion-mnist "$bin/data" 2000 1000
    for entry in "${nets[@]}"; do
        set -- $entry
        "$build/dlc" "$2" --quantize=int8 --target=cpu,cuda -o "$bin/$1.int8"
        "$build/dlc" "$2" --target=cpu,cuda -o "$bin/$1.f32"
        "$bin/$1.int8" train --data "$bin/data" --epochs 1 --save "$bin/$1.f32.safetensors" > /dev/null
        "$bin/$1.int8" calibrate --weights "$bin/$1.f32.safetensors" --data "$bin/data" --samples 500 \
            --save "$bin/$1.int8.safetensors" | tail -n 2
    done
    # the libraries the programs load, but the C library's own
    ldd "$bin/lenet5.int8" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libpthread|libdl|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$bin/lib/"; done
    # a folder of the checkout travels to the device only when git ignores it and it is carried
    exclude="$(git rev-parse --git-common-dir)/info/exclude"
    case "$bin" in
        /*) ;;
        *) grep -qx "/$bin/" "$exclude" 2>/dev/null || echo "/$bin/" >> "$exclude" ;;
    esac
    du -sh "$bin"
    echo "then, with the device tool: run(command=\"bash bench/gpu_int8_check.sh run --bin $bin\", carry=[\"$bin\"], timeout_s=400)"
    ;;
run)
    report=${OUT:-/tmp}/gpu_int8.txt
    export LD_LIBRARY_PATH="$PWD/$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    set +e +o pipefail # report every part, whatever fails
    {
        nvidia-smi -L || true
        echo
        echo "== check --mode infer (DLRT_CUDA_SYNC=1: a fault names its op)"
        for entry in "${nets[@]}"; do
            set -- $entry
            if DLRT_CUDA_SYNC=1 timeout 120 "$bin/$1.int8" check --mode infer --batch "$3" \
                --weights "$bin/$1.int8.safetensors" --data "$bin/data" > "/tmp/check_$1.txt" 2>&1; then
                verdict=passed
            else
                verdict="FAILED (exit $?)"
            fi
            printf '%-12s batch %-3s %s\n' "$1" "$3" "$verdict"
            { grep -E ' FAIL$|bit for bit' "/tmp/check_$1.txt"; tail -n 1 "/tmp/check_$1.txt"; } | sed 's/^/    /'
        done
        echo
        echo "== eval, 1000 test images: the same accuracy on both devices"
        for entry in "${nets[@]}"; do
            set -- $entry
            for dev in cpu cuda; do
                printf '%-12s %-5s ' "$1" "$dev"
                timeout 120 "$bin/$1.int8" eval --device "$dev" --data "$bin/data" \
                    --weights "$bin/$1.int8.safetensors" 2>&1 | tail -n 1
            done
        done
        echo
        echo "== inference on the device, images/s (bench --mode infer, 200 iterations)"
        printf '%-12s %6s %12s %12s %8s\n' model batch "int8" "f32" ratio
        for entry in "${nets[@]}"; do
            set -- $entry
            for batch in 1 64; do
                i8=$("$bin/$1.int8" bench --device cuda --mode infer --batch $batch --iters 200 --warmup 20 --report /tmp/r.json > /dev/null &&
                     python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' /tmp/r.json)
                f=$("$bin/$1.f32" bench --device cuda --mode infer --batch $batch --iters 200 --warmup 20 --report /tmp/r.json > /dev/null &&
                    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' /tmp/r.json)
                printf '%-12s %6s %12.0f %12.0f %8.2f\n' "$1" "$batch" "$i8" "$f" "$(awk -v a="$i8" -v b="$f" 'BEGIN {print a / b}')"
            done
        done
        echo
        echo "== where LeNet-5 int8's inference goes (DLRT_CUDA_PROFILE=1, batch 64, 50 iterations)"
        DLRT_CUDA_PROFILE=1 "$bin/lenet5.int8" bench --device cuda --mode infer --batch 64 --iters 50 --warmup 5 2>&1 >/dev/null | head -12
    } 2>&1 | tee "$report"
    ;;
*)
    sed -n '10,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
