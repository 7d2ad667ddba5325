#!/usr/bin/env bash
# LeNet-5 compiled by dlc against the same network in PyTorch, on this
# machine and on 2 threads each: training images per second at batch 64
# (SGD, learning rate 0.01, momentum 0.9) and the latency of one inference
# at batch 1.  Builds dlc, compiles models/lenet5.dl, then runs each
# measurement 5 times, alternating dlc (`./lenet5 bench`) and PyTorch
# (bench/pytorch_peer.py, with Debian's /usr/bin/python3), so that a slow
# spell of the machine hits both; each run reports the median of its
# iterations, and the table gives the median of the 5 runs and the ratio
# dlc / PyTorch.  With --accuracy it also trains both 10 epochs on
# Fashion-MNIST and prints their test accuracy (several minutes).
#   bench/lenet5_vs_pytorch.sh [--accuracy]
set -euo pipefail
cd "$(dirname "$0")/.."
accuracy=false
case "${1:-}" in
    "") ;;
    --accuracy) accuracy=true ;;
    *) echo "usage: bench/lenet5_vs_pytorch.sh [--accuracy]" >&2; exit 2 ;;
esac
threads=2
repeats=5
python=/usr/bin/python3

cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/dlc models/lenet5.dl -o "$tmp/lenet5"

# one measurement: which (dlc or torch), mode, batch, iterations, warm-up,
# run number; leaves a JSON object with median_ms in $tmp
measure() {
    local who=$1 mode=$2 batch=$3 iters=$4 warmup=$5 run=$6
    local out="$tmp/$who-$mode-$run.json"
    if [[ $who == dlc ]]; then
        "$tmp/lenet5" bench --threads "$threads" --mode "$mode" --batch "$batch" \
            --iters "$iters" --warmup "$warmup" --report "$out" >/dev/null
    else
        "$python" bench/pytorch_peer.py bench --threads "$threads" --mode "$mode" \
            --batch "$batch" --iters "$iters" --warmup "$warmup" >"$out"
    fi
}

for run in $(seq "$repeats"); do
    echo "run $run of $repeats" >&2
    for who in dlc torch; do
        measure "$who" train 64 200 20 "$run"
        measure "$who" infer 1 2000 200 "$run"
    done
done

"$python" - "$tmp" "$repeats" "$threads" <<'PY'
import glob, json, os, statistics, sys
import torch
tmp, repeats, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def runs(who, mode):
    """The median, lowest and highest of the runs' median milliseconds."""
    ms = [json.load(open(p))["median_ms"] for p in glob.glob(f"{tmp}/{who}-{mode}-*.json")]
    assert len(ms) == repeats, ms
    return statistics.median(ms), min(ms), max(ms)

def ips(ms):
    return 64 * 1000 / ms

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "?")
print(f"LeNet-5, {threads} threads, {os.cpu_count()} CPUs ({cpu}); PyTorch {torch.__version__}")
print(f"median of {repeats} runs, each the median of its iterations (the runs' range)\n")
print(f"{'':28}{'dlc':22}{'PyTorch':22}dlc/PyTorch")
d, t = runs("dlc", "train"), runs("torch", "train")
cell = lambda m, lo, hi: f"{ips(m):.0f} ({ips(hi):.0f}-{ips(lo):.0f})"
print(f"{'training, batch 64 (img/s)':28}{cell(*d):22}{cell(*t):22}{ips(d[0]) / ips(t[0]):.2f}")
d, t = runs("dlc", "infer"), runs("torch", "infer")
cell = lambda m, lo, hi: f"{m:.3f} ({lo:.3f}-{hi:.3f})"
print(f"{'inference, batch 1 (ms)':28}{cell(*d):22}{cell(*t):22}{d[0] / t[0]:.2f}")
print("\nimages/s: higher is better; ms: lower is better")
PY

if $accuracy; then
    echo "training 10 epochs on Fashion-MNIST with each (minutes)" >&2
    "$tmp/lenet5" train --threads "$threads" --epochs 10 --report "$tmp/dlc-acc.json" >/dev/null
    "$python" bench/pytorch_peer.py accuracy --threads "$threads" --epochs 10 >"$tmp/torch-acc.json"
    "$python" - "$tmp" <<'PY'
import json, sys
d = json.load(open(f"{sys.argv[1]}/dlc-acc.json"))
t = json.load(open(f"{sys.argv[1]}/torch-acc.json"))
print(f"\ntest accuracy after 10 epochs: dlc {d['test_accuracy']:.4f} ({d['seconds']:.0f} s), "
      f"PyTorch {t['test_accuracy']:.4f} ({t['seconds']:.0f} s)")
PY
fi
