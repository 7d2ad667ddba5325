#!/usr/bin/env bash
# dlc against PyTorch (cuDNN, its default settings) on one NVIDIA GPU: training
# images per second and peak device memory, medians of --repeats runs.
#
#   bench/gpu_vs_pytorch.sh [--repeats N] [--bin DIR]
#
# DIR holds programs built with `dlc models/NAME.dl --target=cpu,cuda -o DIR/NAME`
# for lenet5 and resnet18, and with `--gpu-math=tf32 -o DIR/tf32/NAME` (default:
# builds them with build/dlc into build/gpu-bench).  Cases: LeNet-5 at batch 64
# and ResNet-18 at batch 128 (224x224), the issue's; each for dlc in f32 and in
# TF32 (tensor cores), against PyTorch at its defaults (cuDNN's convolutions in
# TF32, its matrix products in f32: the settings are printed).  Peak device memory is what nvidia-smi reports for
# the process (driver context included, for both), sampled every 0.1 s in a
# run of its own (the first repeat's), since the sampling slows the process.
# Prints one table; needs nvidia-smi and a python3 with torch and torchvision.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=3
bin=""
while [ $# -gt 0 ]; do
    case "$1" in
        --repeats) repeats=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        *) echo "usage: $0 [--repeats N] [--bin DIR]" >&2; exit 2 ;;
    esac
done
if [ -z "$bin" ]; then
    bin=build/gpu-bench
    mkdir -p "$bin"
    mkdir -p "$bin/tf32"
    for m in lenet5 resnet18; do
        build/dlc models/$m.dl --target=cpu,cuda -o "$bin/$m"
        build/dlc models/$m.dl --target=cpu,cuda --gpu-math=tf32 -o "$bin/tf32/$m"
    done
fi
py=${PYTHON:-python3}

# peak MiB of device memory used by the command's process (and its children)
peak_mib() {
    "$@" > /tmp/gpu_bench_out.$$ &
    local pid=$! peak=0 used
    while kill -0 $pid 2>/dev/null; do
        used=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
               awk -F', ' -v p=$pid '$1 == p {print $2}' | head -1)
        [ -n "$used" ] && [ "$used" -gt "$peak" ] && peak=$used
        sleep 0.1
    done
    wait $pid
    echo "$peak"
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

$py -c 'import torch; print("PyTorch", torch.__version__, "on", torch.cuda.get_device_name(0), "| cudnn.allow_tf32:", torch.backends.cudnn.allow_tf32, "| cuda.matmul.allow_tf32:", torch.backends.cuda.matmul.allow_tf32)'
printf "%-24s %14s %14s %8s %12s %12s %8s\n" case "dlc img/s" "torch img/s" ratio "dlc MiB" "torch MiB" ratio
for c in "lenet5 64 300" "resnet18 128 10"; do
    set -- $c
    m=$1 b=$2 it=$3
    : > /tmp/gpu_d.$$; : > /tmp/gpu_d32.$$; : > /tmp/gpu_t.$$; : > /tmp/gpu_dm.$$; : > /tmp/gpu_dm32.$$; : > /tmp/gpu_tm.$$
    for r in $(seq "$repeats"); do
        # dlc in f32, dlc in TF32, PyTorch: interleaved, so that drifts of the machine hit all three
        for v in f32 tf32; do
            prog="$bin/$m" d=/tmp/gpu_d.$$ dm=/tmp/gpu_dm.$$
            [ $v = tf32 ] && prog="$bin/tf32/$m" d=/tmp/gpu_d32.$$ dm=/tmp/gpu_dm32.$$
            # memory in the first repeat only, from a run of its own: nvidia-smi's
            # polling can slow the process it watches
            [ "$r" = 1 ] && peak_mib "$prog" bench --device cuda --mode train --batch "$b" --iters "$it" --warmup 5 >> $dm
            "$prog" bench --device cuda --mode train --batch "$b" --iters "$it" --warmup 5 --report /tmp/gpu_rep.$$ > /dev/null
            $py -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' /tmp/gpu_rep.$$ >> $d
        done
        [ "$r" = 1 ] && peak_mib $py bench/pytorch_peer.py bench --device cuda --model "$m" --mode train --batch "$b" --iters "$it" --warmup 5 >> /tmp/gpu_tm.$$
        $py bench/pytorch_peer.py bench --device cuda --model "$m" --mode train --batch "$b" --iters "$it" --warmup 5 > /tmp/gpu_bench_out.$$
        $py -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["images_per_second"])' /tmp/gpu_bench_out.$$ >> /tmp/gpu_t.$$
    done
    t=$(median < /tmp/gpu_t.$$) tm=$(median < /tmp/gpu_tm.$$)
    for v in f32 tf32; do
        d=$(median < /tmp/gpu_d.$$) dm=$(median < /tmp/gpu_dm.$$)
        [ $v = tf32 ] && d=$(median < /tmp/gpu_d32.$$) dm=$(median < /tmp/gpu_dm32.$$)
        printf "%-24s %14.0f %14.0f %8.2f %12.0f %12.0f %8.2f\n" "$m train b$b $v" "$d" "$t" \
            "$(awk -v a="$d" -v b="$t" "BEGIN {print a / b}")" "$dm" "$tm" "$(awk -v a="$dm" -v b="$tm" "BEGIN {print a / b}")"
    done
done
rm -f /tmp/gpu_*.$$
