#!/usr/bin/env bash
# Issue 40's checks and figures, in one go for a session that is lent a GPU:
# the tensor cores' products in TF32 and bf16 against the CPU (`check`),
# LeNet-5's Fashion-MNIST accuracy trained on the device in f32, TF32 and
# bf16, where ResNet-18's step goes, CUDA graphs against launches one by
# one (medians of 3), and bench/gpu_vs_pytorch.sh.
#
#   bench/gpu_session.sh build [--build DIR] [--bin BIN] [--more]   (here)
#   bench/gpu_session.sh run [--bin BIN] [--repeats N] [--more]     (on the GPU machine)
#
# The device machine has no LLVM to build dlc with, so `build` compiles the
# programs here (build/dlc by default, into gpu-session/: BIN/MATH/NAME, the
# layout gpu_vs_pytorch.sh --bin takes), copies Fashion-MNIST and the shared
# libraries the programs load (programs and libraries in an xz archive, to
# fit the 64 MiB that travel) and prints the device call to make.  --more adds GoogLeNet
# and ResNet-50 (TF32 and bf16; about 20 MiB more).  `run` writes its
# report to $OUT/gpu_session.txt and standard output, phase by phase, so
# that a run cut short still reports what it did.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-}
[ $# -gt 0 ] && shift
build=build
bin=gpu-session
repeats=3
more=0
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --repeats) repeats=$2; shift 2 ;;
        --more) more=1; shift ;;
        *) cmd=usage; break ;;
    esac
done
# each program: its math, its name and its source
programs=(
    "f32 lenet5 models/lenet5.dl" "tf32 lenet5 models/lenet5.dl" "bf16 lenet5 models/lenet5.dl"
    "f32 resnet18 models/resnet18.dl" "tf32 resnet18 models/resnet18.dl" "bf16 resnet18 models/resnet18.dl"
    "tf32 tcnet tests/gpu/Inputs/tcnet.dl" "bf16 tcnet tests/gpu/Inputs/tcnet.dl"
    "tf32 partsnet tests/gpu/Inputs/partsnet.dl" "bf16 partsnet tests/gpu/Inputs/partsnet.dl"
    "tf32-128 tcnet tests/gpu/Inputs/tcnet.dl" "bf16-128 tcnet tests/gpu/Inputs/tcnet.dl"
    "tf32-128 resnet18 models/resnet18.dl" "bf16-128 resnet18 models/resnet18.dl"
)
[ "$more" = 1 ] && programs+=(
    "tf32 googlenet models/googlenet.dl" "bf16 googlenet models/googlenet.dl"
    "tf32 resnet50 models/resnet50.dl" "bf16 resnet50 models/resnet50.dl"
)
# check: math, name, batch, tolerance (docs/gpu.md, "Accuracy")
checks=(
    "tf32 tcnet 8 0.15" "bf16 tcnet 8 0.3" "tf32 partsnet 8 0.1" "bf16 partsnet 8 0.3"
    "tf32-128 tcnet 8 0.15" "bf16-128 tcnet 8 0.3"
    "f32 lenet5 64 1e-4" "tf32 lenet5 64 0.1" "bf16 lenet5 64 0.3"
)

case "$cmd" in
build)
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j2 >/dev/null
    rm -rf "$bin"
    mkdir -p "$bin/lib" "$bin/data"
    for entry in "${programs[@]}"; do
        read -r math name src <<< "$entry"
        mkdir -p "$bin/$math"
        # MATH-128: the tensor cores' large products in tiles of 128 (emit_gemm.c, gemm_tile)
        tile=64
        [ "${math%-128}" != "$math" ] && tile=128
        DLC_NVPTX_TILE=$tile "$build/dlc" "$src" --target=cpu,cuda --gpu-math="${math%-128}" -o "$bin/$math/$name"
    done
    cp /usr/share/datasets/fashion-mnist/*.gz "$bin/data/"
    # the libraries the programs load, but the C library's own
    ldd "$bin/f32/lenet5" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libpthread|libdl|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$bin/lib/"; done
    # programs and libraries in one xz archive (68 MB become 40 with the data)
    (cd "$bin" && tar -cf - lib f32 tf32 bf16 tf32-128 bf16-128 | xz -T2 -6 > bundle.tar.xz &&
        rm -rf lib f32 tf32 bf16 tf32-128 bf16-128)
    # a folder of the checkout travels to the device only when git ignores it and it is carried
    exclude="$(git rev-parse --git-common-dir)/info/exclude"
    case "$bin" in
        /*) ;;
        *) grep -qx "/$bin/" "$exclude" 2>/dev/null || echo "/$bin/" >> "$exclude" ;;
    esac
    du -sh "$bin"
    extra=""
    [ "$more" = 1 ] && extra=" --more"
    echo "then, with the device tool: run(command=\"bash bench/gpu_session.sh run --bin $bin$extra\", carry=[\"$bin\"], timeout_s=540)"
    ;;
run)
    report=${OUT:-/tmp}/gpu_session.txt
    [ -e "$bin/bundle.tar.xz" ] && { xz -d < "$bin/bundle.tar.xz" | tar -C "$bin" -xf - && rm "$bin/bundle.tar.xz"; }
    export LD_LIBRARY_PATH="$PWD/$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    py=${PYTHON:-python3}
    ips() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$1"; }
    . bench/lib.sh # peak_mib
    set +e +o pipefail # report every part, whatever fails
    {
        nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
        git log -1 --format='commit %h %s' 2>/dev/null
        echo
        echo "== check: one training step on both devices (docs/gpu.md)"
        for entry in "${checks[@]}"; do
            read -r math name batch tol <<< "$entry"
            printf '%-8s %-9s batch %-3s tolerance %-5s ' "$math" "$name" "$batch" "$tol"
            timeout 120 "$bin/$math/$name" check --batch "$batch" --tolerance "$tol" > "/tmp/check.txt" 2>&1
            echo "exit $?: $(tail -n 1 /tmp/check.txt)"
        done
        echo
        echo "== LeNet-5 on Fashion-MNIST, trained on the device (the train section's 10 epochs, seed 1)"
        for math in f32 tf32 bf16; do
            printf '%-5s ' "$math"
            timeout 120 "$bin/$math/lenet5" train --device cuda --data "$bin/data" --seed 1 \
                --save "/tmp/lenet5.$math.safetensors" > "/tmp/train.txt" 2>&1
            tail -n 1 /tmp/train.txt
        done
        echo "-- tf32, 2 epochs: two steps at a time with graphs (the default), one at a time, launches one by one"
        for v in X=1 DLRT_CUDA_OVERLAP=0 DLRT_CUDA_GRAPHS=0; do
            printf '%-20s ' "$v"
            env "$v" timeout 120 "$bin/tf32/lenet5" train --device cuda --data "$bin/data" --seed 1 --epochs 2 2>&1 | tail -n 1
        done
        echo
        echo "== where ResNet-18's step goes (DLRT_CUDA_PROFILE=1, batch 128, 3 iterations): the longest rows, and the weight gradients'"
        for math in tf32 bf16; do
            echo "-- $math"
            DLRT_CUDA_PROFILE=1 timeout 120 "$bin/$math/resnet18" bench --device cuda --mode train --batch 128 \
                --iters 3 --warmup 1 2>/tmp/profile.txt >/dev/null
            head -n 8 /tmp/profile.txt
            awk '/conv2d_grad_weight/ {w += $1} /conv2d_grad_input/ {i += $1} /\(conv2d, / {f += $1}
                 END {printf "conv2d %.1f ms, conv2d_grad_input %.1f ms, conv2d_grad_weight %.1f ms\n", f, i, w}' /tmp/profile.txt
        done
        echo
        echo "== CUDA graphs: training images/s with the step replayed as a graph (the default) and launched one by one"
        printf '%-22s %12s %12s %8s\n' case graphs launches ratio
        for c in "tf32 lenet5 64 300" "bf16 lenet5 64 300" "tf32 resnet18 128 10" "bf16 resnet18 128 10"; do
            read -r math name batch iters <<< "$c"
            for r in 1 2 3; do
                for gr in 1 0; do
                    DLRT_CUDA_GRAPHS=$gr timeout 60 "$bin/$math/$name" bench --device cuda --mode train --batch "$batch" \
                        --iters "$iters" --warmup 5 --report /tmp/r.json > /dev/null && ips /tmp/r.json >> "/tmp/graphs.$gr"
                done
            done
            a=$(sort -g /tmp/graphs.1 | sed -n 2p) b=$(sort -g /tmp/graphs.0 | sed -n 2p)
            printf '%-22s %12.0f %12.0f %8.2f\n' "$name $math b$batch" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {print a / b}')"
            rm -f /tmp/graphs.1 /tmp/graphs.0
        done
        echo
        echo "== ResNet-18 training images/s (batch 128, medians of 3): the tensor cores' products in tiles of 64 (the default) and 128"
        printf '%-10s %12s %12s %8s\n' math "tiles 64" "tiles 128" ratio
        for math in tf32 bf16; do
            for r in 1 2 3; do
                for v in "$math" "$math-128"; do
                    timeout 60 "$bin/$v/resnet18" bench --device cuda --mode train --batch 128 --iters 10 --warmup 3 \
                        --report /tmp/r.json > /dev/null && ips /tmp/r.json >> "/tmp/tiles.$v"
                done
            done
            a=$(sort -g "/tmp/tiles.$math" | sed -n 2p) b=$(sort -g "/tmp/tiles.$math-128" | sed -n 2p)
            printf '%-10s %12.0f %12.0f %8.2f\n' "$math" "$a" "$b" "$(awk -v a="$b" -v b="$a" 'BEGIN {print a / b}')"
            rm -f "/tmp/tiles.$math" "/tmp/tiles.$math-128"
        done
        echo
        echo "== device memory (MiB, nvidia-smi): the stack limit at the least (the default) and at the driver's 1024 bytes"
        for c in "tf32 lenet5 64 300" "tf32 resnet18 128 10"; do
            read -r math name batch iters <<< "$c"
            least=$(peak_mib "$bin/$math/$name" bench --device cuda --mode train --batch "$batch" --iters "$iters" --warmup 5)
            kib=$(DLRT_CUDA_STACK=1024 peak_mib "$bin/$math/$name" bench --device cuda --mode train --batch "$batch" --iters "$iters" --warmup 5)
            printf '%-22s least %6s MiB   1024 bytes %6s MiB\n' "$name $math b$batch" "$least" "$kib"
        done
        echo
        echo "== bench/gpu_vs_pytorch.sh --repeats $repeats"
        cases="lenet5:64:300 resnet18:128:10"
        timeout 400 bash bench/gpu_vs_pytorch.sh --bin "$bin" --repeats "$repeats" --cases "$cases"
        if [ "$more" = 1 ]; then
            timeout 300 bash bench/gpu_vs_pytorch.sh --bin "$bin" --repeats 1 --maths "tf32 bf16" \
                --cases "googlenet:128:10 resnet50:64:10"
        fi
    } 2>&1 | tee "$report"
    ;;
*)
    sed -n '7,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
