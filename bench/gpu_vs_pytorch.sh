#!/usr/bin/env bash
# dlc against PyTorch (cuDNN) on one NVIDIA GPU: training images per second and
# peak device memory, medians of --repeats runs.
#
#   bench/gpu_vs_pytorch.sh [--repeats N] [--bin DIR] [--cases "NAME:BATCH:ITERS ..."]
#                           [--maths "f32 tf32 bf16"]
#
# DIR/MATH/NAME are programs built with `dlc models/NAME.dl --target=cpu,cuda
# --gpu-math=MATH` (default: built with build/dlc into build/gpu-bench).  Cases:
# LeNet-5 at batch 64 and ResNet-18 at batch 128 (224x224), the issue's; add
# e.g. googlenet:128:10 resnet50:64:10.  dlc in f32 and TF32 is compared with
# PyTorch at its defaults (cuDNN's convolutions in TF32, its matrix products in
# f32: the settings are printed); dlc in bf16 with PyTorch's automatic mixed
# precision (torch.autocast in bf16, bench/pytorch_peer.py --amp bf16).  Each
# repeat runs every variant in turn, so that drifts of the machine hit all.
# Peak device memory is what nvidia-smi reports for the process (driver context
# included, for both), sampled every 0.1 s in a run of its own (the first
# repeat's), since the sampling slows the process.  Prints one table; needs
# nvidia-smi and a python3 with torch and torchvision.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=3
bin=""
cases="lenet5:64:300 resnet18:128:10"
maths="f32 tf32 bf16"
while [ $# -gt 0 ]; do
    case "$1" in
        --repeats) repeats=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --cases) cases=$2; shift 2 ;;
        --maths) maths=$2; shift 2 ;;
        *) echo "usage: $0 [--repeats N] [--bin DIR] [--cases \"NAME:BATCH:ITERS ...\"] [--maths \"f32 tf32 bf16\"]" >&2
           exit 2 ;;
    esac
done
if [ -z "$bin" ]; then
    bin=build/gpu-bench
    for c in $cases; do
        for v in $maths; do
            mkdir -p "$bin/$v"
            build/dlc "models/${c%%:*}.dl" --target=cpu,cuda --gpu-math="$v" -o "$bin/$v/${c%%:*}"
        done
    done
fi
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# peak_mib
. bench/lib.sh

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# PyTorch's variant that dlc's math is compared with
peer_of() { [ "$1" = bf16 ] && echo amp || echo default; }

$py -c 'import torch; print("PyTorch", torch.__version__, "on", torch.cuda.get_device_name(0), "| cudnn.allow_tf32:", torch.backends.cudnn.allow_tf32, "| cuda.matmul.allow_tf32:", torch.backends.cuda.matmul.allow_tf32)'
printf "%-36s %14s %14s %8s %12s %12s %8s\n" case "dlc img/s" "torch img/s" ratio "dlc MiB" "torch MiB" ratio
for c in $cases; do
    IFS=: read -r m b it <<< "$c"
    peers=$(for v in $maths; do peer_of "$v"; done | sort -u)
    for r in $(seq "$repeats"); do
        for v in $maths; do
            prog="$bin/$v/$m"
            # memory in the first repeat only, from a run of its own: nvidia-smi's
            # polling can slow the process it watches
            [ "$r" = 1 ] && peak_mib "$prog" bench --device cuda --mode train --batch "$b" --iters "$it" --warmup 5 >> "$tmp/dm.$v"
            "$prog" bench --device cuda --mode train --batch "$b" --iters "$it" --warmup 5 --report "$tmp/rep" > /dev/null
            $py -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$tmp/rep" >> "$tmp/d.$v"
        done
        for p in $peers; do
            amp=()
            [ "$p" = amp ] && amp=(--amp bf16)
            [ "$r" = 1 ] && peak_mib $py bench/pytorch_peer.py bench --device cuda --model "$m" --mode train --batch "$b" --iters "$it" --warmup 5 "${amp[@]}" >> "$tmp/tm.$p"
            $py bench/pytorch_peer.py bench --device cuda --model "$m" --mode train --batch "$b" --iters "$it" --warmup 5 "${amp[@]}" > "$tmp/out"
            $py -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["images_per_second"])' "$tmp/out" >> "$tmp/t.$p"
        done
    done
    for v in $maths; do
        p=$(peer_of "$v")
        d=$(median < "$tmp/d.$v") dm=$(median < "$tmp/dm.$v") t=$(median < "$tmp/t.$p") tm=$(median < "$tmp/tm.$p")
        printf "%-36s %14.0f %14.0f %8.2f %12.0f %12.0f %8.2f\n" "$m train b$b $v vs $p" "$d" "$t" \
            "$(awk -v a="$d" -v b="$t" "BEGIN {print a / b}")" "$dm" "$tm" "$(awk -v a="$dm" -v b="$tm" "BEGIN {print a / b}")"
    done
    rm -f "$tmp"/d.* "$tmp"/dm.* "$tmp"/t.* "$tmp"/tm.*
done
