#!/usr/bin/env bash
# The recurrent networks on an NVIDIA GPU, in one go for a session that is
# lent a device machine (issue 34, item 5): `check` (one training step on
# both devices from the same weights and batch, every gradient and updated
# tensor compared) on the recurrent models and the parity tests' recurrent
# networks, then LSTM and GRU training on the GPU against PyTorch's
# nn.LSTM / nn.GRU (cuDNN), and where the LSTM's step goes.
#
#   bench/gpu_recurrent_check.sh build [--build DIR] [--bin BIN]   (here)
#   bench/gpu_recurrent_check.sh run [--bin BIN]                   (on the GPU machine)
#
# The device machine has no LLVM to build dlc with, so `build` compiles the
# programs here (build/dlc by default, into gpu-recurrent/) with the shared
# libraries they load (OpenBLAS and its Fortran runtime, libgomp, zlib)
# beside them in BIN/lib, and prints the device call to make: BIN must be
# ignored by git (.git/info/exclude) and carried.  `run` writes its report
# to $OUT/gpu_recurrent.txt (the device's folder that comes back) and to
# standard output: each check's verdict and worst error, then a table of
# training images per second (batch 64, Adam, the batch sent from the host
# each step, medians of 3 runs of 200 steps) for dlc in f32 and TF32 and for
# PyTorch, and the 15 longest rows of DLRT_CUDA_PROFILE for lstm_fashion.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-}
[ $# -gt 0 ] && shift
build=build
bin=gpu-recurrent
while [ $# -gt 0 ]; do
    case "$1" in
        --build) build=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        *) cmd=usage; break ;;
    esac
done
# name, source, check batch[, check's tolerance flag: charlm's Adam step, see check_recurrent.test]
nets=(
    "rnnnet tests/codegen/Inputs/rnnnet.dl 8"
    "lstmnet tests/codegen/Inputs/lstmnet.dl 8"
    "grunet tests/codegen/Inputs/grunet.dl 8"
    "lmnet tests/codegen/Inputs/lmnet.dl 8"
    "lstm_fashion models/lstm_fashion.dl 64"
    "gru_fashion models/gru_fashion.dl 64"
    "charlm models/charlm.dl 8 --tolerance 1e-3"
)

case "$cmd" in
build)
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j2 >/dev/null
    mkdir -p "$bin/lib" "$bin/tf32"
    for entry in "${nets[@]}"; do
        set -- $entry
        "$build/dlc" "$2" --target=cpu,cuda -o "$bin/$1"
    done
    for m in lstm_fashion gru_fashion; do
        "$build/dlc" "models/$m.dl" --target=cpu,cuda --gpu-math=tf32 -o "$bin/tf32/$m"
    done
    # the libraries the programs load, but the C library's own
    ldd "$bin/charlm" | awk '/=> \// {print $3}' | grep -Ev '/(libc|libm|libpthread|libdl|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$bin/lib/"; done
    # a folder of the checkout travels to the device only when git ignores it and it is carried
    exclude="$(git rev-parse --git-common-dir)/info/exclude"
    case "$bin" in
        /*) ;;
        *) grep -qx "/$bin/" "$exclude" 2>/dev/null || echo "/$bin/" >> "$exclude" ;;
    esac
    du -sh "$bin"
    echo "then, with the device tool: run(command=\"bash bench/gpu_recurrent_check.sh run --bin $bin\", carry=[\"$bin\"], timeout_s=540)"
    ;;
run)
    report=${OUT:-/tmp}/gpu_recurrent.txt
    export LD_LIBRARY_PATH="$PWD/$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    py=${PYTHON:-python3}
    set +e +o pipefail # report every part, whatever fails
    {
        nvidia-smi -L || true
        echo
        echo "== check (DLRT_CUDA_SYNC=1: a fault names its op)"
        for entry in "${nets[@]}"; do
            set -- $entry
            if DLRT_CUDA_SYNC=1 timeout 300 "$bin/$1" check --batch "$3" ${4:+"$4" "$5"} > "/tmp/check_$1.txt" 2>&1; then
                verdict=passed
            else
                verdict="FAILED (exit $?)"
            fi
            printf '%-14s batch %-3s %s\n' "$1" "$3" "$verdict"
            # the rows over the tolerance (FAIL), then the summary or the error
            { grep -E ' FAIL$' "/tmp/check_$1.txt" | head -10; tail -n 2 "/tmp/check_$1.txt"; } | sed 's/^/    /'
        done
        echo
        echo "== training, batch 64, images/s (medians of 3 runs of 200 steps)"
        median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
        printf '%-16s %12s %12s %12s %10s\n' model "dlc f32" "dlc tf32" "PyTorch" "f32 ratio"
        for m in lstm_fashion gru_fashion; do
            : > /tmp/r_d; : > /tmp/r_d32; : > /tmp/r_t
            for r in 1 2 3; do
                "$bin/$m" bench --device cuda --mode train --batch 64 --iters 200 --warmup 20 --report /tmp/r.json > /dev/null
                $py -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' /tmp/r.json >> /tmp/r_d
                "$bin/tf32/$m" bench --device cuda --mode train --batch 64 --iters 200 --warmup 20 --report /tmp/r.json > /dev/null
                $py -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' /tmp/r.json >> /tmp/r_d32
                $py bench/pytorch_peer.py bench --device cuda --model "$m" --mode train --batch 64 --iters 200 --warmup 20 |
                    tail -n 1 | $py -c 'import json,sys; print(json.loads(sys.stdin.read())["images_per_second"])' >> /tmp/r_t
            done
            d=$(median < /tmp/r_d) d32=$(median < /tmp/r_d32) t=$(median < /tmp/r_t)
            printf '%-16s %12.0f %12.0f %12.0f %10.2f\n' "$m" "$d" "$d32" "$t" "$(awk -v a="$d" -v b="$t" 'BEGIN {print a / b}')"
        done
        "$bin/charlm" bench --device cuda --mode train --batch 32 --iters 20 --warmup 3 --report /tmp/r.json > /dev/null
        $py -c 'import json,sys; r = json.load(open(sys.argv[1])); print("charlm training, batch 32: %.0f sequences/s, %.0f characters/s" % (r["images_per_second"], 128 * r["images_per_second"]))' /tmp/r.json
        echo
        echo "== where lstm_fashion's training step goes (DLRT_CUDA_PROFILE=1, 20 steps)"
        DLRT_CUDA_PROFILE=1 "$bin/lstm_fashion" bench --device cuda --mode train --batch 64 --iters 20 --warmup 2 2>&1 >/dev/null | head -18
    } 2>&1 | tee "$report"
    ;;
*)
    sed -n '9,10p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
