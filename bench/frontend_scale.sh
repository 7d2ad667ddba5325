#!/usr/bin/env bash
# How compile time grows with network size: generates networks of 1,000 to
# 100,000 layers (bench/gen_deep_network.py), and times dlc on each --
# frontend, verifier and the default passes (--emit=ir to /dev/null) --
# and, separately, reading the printed IR back (.dlir input).  Prints the
# median of 5 runs per size and the time per layer, which stays flat when
# compilation is linear.
#   bench/frontend_scale.sh [path/to/dlc]
set -euo pipefail
cd "$(dirname "$0")/.."
dlc=${1:-build/dlc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_of() {  # seconds for one run of the command
    local t0 t1
    t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
}

printf "%8s %14s %14s %16s\n" layers "dl (s)" "dlir (s)" "dl us/layer"
for n in 1000 10000 100000; do
    python3 bench/gen_deep_network.py "$n" > "$tmp/net.dl"
    "$dlc" "$tmp/net.dl" -o "$tmp/net.dlir"
    dl=$(for i in 1 2 3 4 5; do time_of "$dlc" "$tmp/net.dl" --emit=ir -o /dev/null; done | median)
    ir=$(for i in 1 2 3 4 5; do time_of "$dlc" "$tmp/net.dlir" --emit=ir -o /dev/null; done | median)
    printf "%8d %14.4f %14.4f %16.2f\n" "$n" "$dl" "$ir" "$(awk -v t="$dl" -v n="$n" 'BEGIN { print t * 1000000 / n }')"
done
