#!/usr/bin/env bash
# models/charlm.dl (a character-level language model: an embedding, a 2-layer
# LSTM of 256 units, 128 steps, 113 characters) compiled by dlc against the
# same network in PyTorch (Debian's 1.13, torch.nn.LSTM), and, where
# bench/.venv-peers is installed (scripts/deps.sh peers), against ONNX
# Runtime running the PyTorch twin's step exported to ONNX: on this machine,
# 2 threads each.
#
#   bench/charlm_vs_peers.sh [--repeats 5] [--build build] [--accuracy EPOCHS]
#
# Two cases:
#   - training: characters per second of a training step at batch 32
#     (Adam), and each process's peak resident memory;
#   - generating: one character at batch 1, the LSTM going on from its
#     state: dlc's NAME_forward_step (`./charlm bench --mode step`, what
#     `./charlm sample` calls per character), PyTorch's module called on one
#     step with the state it returned, ONNX Runtime's session on the
#     exported step (an LSTM node per layer, the state as inputs and
#     outputs).
# Each measurement runs --repeats times, alternating the systems; each run
# reports the median of its iterations and the table gives the median of
# the runs and dlc's speed over each peer's.  --accuracy E also trains
# charlm and its PyTorch twin (bench/pytorch_peer.py accuracy --model
# charlm: the same text, split, vocabulary and recipe) for E epochs on
# Debian's fortunes and compares their validation bits per character.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=5
build=build
accuracy=0
while [ $# -gt 0 ]; do
    case "$1" in
        --repeats) repeats=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --accuracy) accuracy=$2; shift 2 ;;
        *) sed -n '9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
threads=2
python=/usr/bin/python3
peers=bench/.venv-peers/bin/python
. bench/lib.sh
openblas_cores "$python"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/dlc" models/charlm.dl -o "$tmp/charlm"
have_ort=false
if [ -x "$peers" ] && "$peers" -c 'import onnxruntime, torch' 2>/dev/null; then
    have_ort=true
    OPENBLAS_CORETYPE=$peer_core "$peers" bench/charlm_onnx.py export "$tmp/charlm_step.onnx"
fi

# one measurement: who, mode (train or step), run; leaves $tmp/WHO-MODE-RUN.json (and .kib)
measure() {
    local who=$1 mode=$2 run=$3 batch=32 iters=20 warmup=3
    [[ $mode == step ]] && batch=1 iters=2000 warmup=200
    local base="$tmp/$who-$mode-$run"
    case $who in
    dlc)
        timed_run "$base" "dlc $mode" "$tmp/charlm" bench --threads "$threads" --mode "$mode" \
            --batch "$batch" --iters "$iters" --warmup "$warmup" --report "$base.json" ;;
    torch)
        OPENBLAS_CORETYPE=$peer_core timed_run "$base" "PyTorch $mode" \
            "$python" bench/pytorch_peer.py bench --model charlm --lr 0.002 --threads "$threads" \
            --mode "$mode" --batch "$batch" --iters "$iters" --warmup "$warmup"
        cp "$base.out" "$base.json" ;;
    ort)
        timed_run "$base" "ONNX Runtime $mode" "$peers" bench/charlm_onnx.py bench \
            "$tmp/charlm_step.onnx" --threads "$threads" --iters "$iters" --warmup "$warmup"
        cp "$base.out" "$base.json" ;;
    esac
}

for run in $(seq "$repeats"); do
    echo "run $run of $repeats" >&2
    order="dlc torch"
    [ $((run % 2)) = 0 ] && order="torch dlc"
    for who in $order; do
        measure "$who" train "$run"
        measure "$who" step "$run"
    done
    if $have_ort; then
        measure ort step "$run"
    fi
done

"$python" - "$tmp" "$repeats" "$threads" "$peer_core" "$have_ort" <<'PY'
import glob, json, os, statistics, sys
import torch
tmp, repeats, threads, core, ort = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

def runs(who, mode):
    """The median of the runs' median milliseconds, and of their peak RSS (MiB)."""
    files = sorted(glob.glob(f"{tmp}/{who}-{mode}-*.json"))
    assert len(files) == repeats, files
    ms = statistics.median(json.load(open(p))["median_ms"] for p in files)
    kib = statistics.median(int(open(p[:-5] + ".kib").read().split()[-1]) for p in files)
    return ms, kib / 1024

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
            if l.startswith("model name")), "?")
print(f"{threads} threads, {os.cpu_count()} CPUs ({cpu}); PyTorch {torch.__version__}; "
      f"OpenBLAS core for PyTorch: {core}")
print(f"median of {repeats} runs, each the median of its iterations\n")
print("| case | dlc | PyTorch | dlc vs PyTorch |" + (" ONNX Runtime | dlc vs ONNX Runtime |" if ort == "true" else ""))
print("| --- | ---: | ---: | ---: |" + (" ---: | ---: |" if ort == "true" else ""))
d, t = runs("dlc", "train"), runs("torch", "train")
cps = lambda ms: 32 * 128 * 1000 / ms
print(f"| training, batch 32 (characters/s) | {cps(d[0]):,.0f} | {cps(t[0]):,.0f} | "
      f"{cps(d[0]) / cps(t[0]):.2f} |" + (" | |" if ort == "true" else ""))
print(f"| training peak memory (MiB) | {d[1]:.0f} | {t[1]:.0f} | {d[1] / t[1]:.2f} |"
      + (" | |" if ort == "true" else ""))
d, t = runs("dlc", "step"), runs("torch", "step")
row = f"| one character at batch 1 (µs) | {1000 * d[0]:.1f} | {1000 * t[0]:.1f} | {t[0] / d[0]:.2f} |"
if ort == "true":
    o = runs("ort", "step")
    row += f" {1000 * o[0]:.1f} | {o[0] / d[0]:.2f} |"
print(row)
print("\ndlc vs a peer: dlc's speed over the peer's (higher is better for dlc); for memory, "
      "dlc's over PyTorch's (lower is better)")
PY

if [ "$accuracy" -gt 0 ]; then
    echo "training charlm $accuracy epoch(s) on fortunes with each" >&2
    "$tmp/charlm" train --threads "$threads" --epochs "$accuracy" --report "$tmp/dlc-acc.json" \
        >/dev/null
    OPENBLAS_CORETYPE=$peer_core "$python" bench/pytorch_peer.py accuracy --model charlm \
        --threads "$threads" --epochs "$accuracy" --data /usr/share/games/fortunes \
        >"$tmp/torch-acc.json"
    "$python" - "$tmp" "$accuracy" <<'PY'
import json, math, sys
d = json.load(open(f"{sys.argv[1]}/dlc-acc.json"))
t = json.load(open(f"{sys.argv[1]}/torch-acc.json"))
db = d["test_loss"] / math.log(2)
print(f"\ncharlm, validation bits per character after {sys.argv[2]} epoch(s): dlc {db:.3f} "
      f"({d['seconds']:.0f} s), PyTorch {t['bits_per_character']:.3f} ({t['seconds']:.0f} s), "
      f"difference {db - t['bits_per_character']:+.3f}")
PY
fi
