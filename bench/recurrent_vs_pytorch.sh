#!/usr/bin/env bash
# The recurrent models compiled by dlc against the same networks in PyTorch
# (torch.nn.LSTM and GRU, Debian's PyTorch 1.13), on this machine and on 2
# threads each: models/lstm_fashion.dl and gru_fashion.dl (Fashion-MNIST
# read row by row: T = 28 steps of 28 pixels, 128 hidden units), training
# images per second at batch 64 with Adam, the latency of one inference at
# batch 1, each process's peak resident memory, and the GFLOP/s of the
# training step against this machine's 2-thread sgemm (bench/sgemm_peak.c).
#
#   bench/recurrent_vs_pytorch.sh [--repeats 5] [--build build] [--accuracy]
#
# Builds dlc, compiles the models, then runs each measurement --repeats
# times, alternating dlc (`./MODEL bench`) and PyTorch
# (bench/pytorch_peer.py with /usr/bin/python3 and the OPENBLAS_CORETYPE it
# should have: bench/lib.sh), so that a slow spell of the machine hits both;
# each run reports the median of its iterations, and the table gives the
# median of the runs and the ratio.  The FLOPs of a training step are three
# forward passes' products: per image T (G·H)(F + H) multiply-adds for a
# recurrent layer of G gates (4 for the LSTM, 3 for the GRU), and the
# classifier's.  --accuracy also trains lstm_fashion and its PyTorch twin
# on Fashion-MNIST with the train section's recipe (20 epochs: an hour).
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=5
build=build
accuracy=false
while [ $# -gt 0 ]; do
    case "$1" in
        --repeats) repeats=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --accuracy) accuracy=true; shift ;;
        *) sed -n '10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
threads=2
python=/usr/bin/python3
. bench/lib.sh
openblas_cores "$python"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
models="lstm_fashion gru_fashion"
for m in $models; do
    "$build/dlc" "models/$m.dl" -o "$tmp/$m"
done
cc -O2 bench/sgemm_peak.c -o "$tmp/sgemm_peak" -lopenblas
OPENBLAS_NUM_THREADS=$threads OPENBLAS_CORETYPE=$peer_core "$tmp/sgemm_peak" 3 1024 2048 \
    | tail -n 1 >"$tmp/peak.json"

# one measurement: model, who (dlc or torch), mode, batch, iterations,
# warm-up, run; leaves $tmp/MODEL-WHO-MODE-RUN.json (and .kib, the peak RSS)
measure() {
    local m=$1 who=$2 mode=$3 batch=$4 iters=$5 warmup=$6 run=$7
    local base="$tmp/$m-$who-$mode-$run"
    if [[ $who == dlc ]]; then
        timed_run "$base" "dlc $m $mode" "$tmp/$m" bench --threads "$threads" --mode "$mode" \
            --batch "$batch" --iters "$iters" --warmup "$warmup" --report "$base.json"
    else
        OPENBLAS_CORETYPE=$peer_core timed_run "$base" "PyTorch $m $mode" \
            "$python" bench/pytorch_peer.py bench --model "$m" --lr 0.001 --threads "$threads" \
            --mode "$mode" --batch "$batch" --iters "$iters" --warmup "$warmup"
        cp "$base.out" "$base.json"
    fi
}

for run in $(seq "$repeats"); do
    echo "run $run of $repeats" >&2
    order="dlc torch"
    [ $((run % 2)) = 0 ] && order="torch dlc"
    for m in $models; do
        for who in $order; do
            measure "$m" "$who" train 64 60 10 "$run"
            measure "$m" "$who" infer 1 500 50 "$run"
        done
    done
done

"$python" - "$tmp" "$repeats" "$threads" "$peer_core" <<'PY'
import glob, json, os, statistics, sys
import torch
tmp, repeats, threads, core = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
peak = json.load(open(f"{tmp}/peak.json"))["peak_gflops"]
T, F, H = 28, 28, 128
flops = {m: 3 * 2 * (T * g * H * (F + H) + H * 10) for m, g in
         (("lstm_fashion", 4), ("gru_fashion", 3))}

def runs(m, who, mode):
    """The median of the runs' median milliseconds, and of their peak RSS (MiB)."""
    files = sorted(glob.glob(f"{tmp}/{m}-{who}-{mode}-*.json"))
    assert len(files) == repeats, files
    ms = statistics.median(json.load(open(p))["median_ms"] for p in files)
    kib = statistics.median(int(open(p[:-5] + ".kib").read().split()[-1]) for p in files)
    return ms, kib / 1024

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "?")
print(f"{threads} threads, {os.cpu_count()} CPUs ({cpu}); PyTorch {torch.__version__}; "
      f"OpenBLAS core for PyTorch: {core}; sgemm peak {peak:.0f} GFLOP/s")
print(f"median of {repeats} runs, each the median of its iterations\n")
print("| model | case | dlc | PyTorch | ratio |")
print("| --- | --- | ---: | ---: | ---: |")
for m in flops:
    d, t = runs(m, "dlc", "train"), runs(m, "torch", "train")
    ips = lambda ms: 64 * 1000 / ms
    print(f"| {m} | training, batch 64 (images/s) | {ips(d[0]):,.0f} | {ips(t[0]):,.0f} | "
          f"{ips(d[0]) / ips(t[0]):.2f} |")
    g = lambda ms: flops[m] * ips(ms) / 1e9
    print(f"| {m} | training GFLOP/s (share of sgemm peak) | {g(d[0]):.1f} "
          f"({100 * g(d[0]) / peak:.0f}%) | {g(t[0]):.1f} ({100 * g(t[0]) / peak:.0f}%) | |")
    print(f"| {m} | training peak memory (MiB) | {d[1]:.0f} | {t[1]:.0f} | "
          f"{d[1] / t[1]:.2f} |")
    d, t = runs(m, "dlc", "infer"), runs(m, "torch", "infer")
    print(f"| {m} | inference, batch 1 (ms) | {d[0]:.3f} | {t[0]:.3f} | {t[0] / d[0]:.2f} |")
print("\nratio: dlc's speed over PyTorch's (higher is better for dlc); for memory, "
      "dlc's over PyTorch's (lower is better)")
PY

if $accuracy; then
    echo "training lstm_fashion 20 epochs on Fashion-MNIST with each (an hour)" >&2
    "$tmp/lstm_fashion" train --threads "$threads" --report "$tmp/dlc-acc.json" >/dev/null
    OPENBLAS_CORETYPE=$peer_core "$python" bench/pytorch_peer.py accuracy --model lstm_fashion \
        --threads "$threads" --epochs 20 >"$tmp/torch-acc.json"
    "$python" - "$tmp" <<'PY'
import json, sys
d = json.load(open(f"{sys.argv[1]}/dlc-acc.json"))
t = json.load(open(f"{sys.argv[1]}/torch-acc.json"))
print(f"\nlstm_fashion, test accuracy after 20 epochs: dlc {d['test_accuracy']:.4f} "
      f"({d['seconds']:.0f} s), PyTorch {t['test_accuracy']:.4f} ({t['seconds']:.0f} s)")
PY
fi
