#!/bin/sh
# distributed.sh: what data-parallel training (mpirun -np K ./net train,
# docs/distributed.md) gives on one machine: the training speed of one
# process against two ranks, the reducer's progress by a thread against
# polling between ops, and the share of the gradients' sums that the
# backward pass hides.
#
#   bench/distributed.sh [BUILD [REPEATS [NETS]]]
#
# BUILD is a dlc build folder (build-rel), REPEATS the runs of each case
# (5), NETS the zoo's networks (lenet5 simplecnn).  Each case trains 2
# epochs of 2,000 Fashion-MNIST samples (batch 64) and takes the training
# steps' images per second from --report; the table gives each case's
# median.  The cases:
#
#   1x1, 1x2                 one process, 1 and 2 threads
#   2x1 thread|poll vader|tcp   2 ranks of 1 thread: the reducer's progress
#                            by its thread (the default) or by polling
#                            between ops; Open MPI's shared-memory
#                            transport, or TCP over the loopback interface
#                            (--mca btl self,tcp: the path between hosts)
#   ... no-overlap           the same with every bucket's sum started at
#                            the end of the backward pass (DLRT_DIST_OVERLAP=0)
#
# "hidden" is the share of the sums alone (DLRT_DIST_STATS=1: rank 0's
# median of 31 sums of every bucket, nothing else running) that the overlap
# saves: (step without overlap - step with) / sums alone.  On a shared
# 2-core machine the figures move by 10-30% between runs: quote medians.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build-rel}
repeats=${2:-5}
nets=${3:-lenet5 simplecnn}
out=${OUT:-/tmp/dlc-distributed-bench}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
python3 "$root/tests/program/Inputs/idx_subset.py" /usr/share/datasets/fashion-mnist \
    "$out/data" 2000 500

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
ips() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$1"; }

for net in $nets; do
    "$build/dlc" "$root/models/$net.dl" -o "$out/$net"
    "$out/$net" info --ranks 2 | sed -n '/^data-parallel/,$p'
    args="train --data $out/data --epochs 2 --batch 64 --seed 1"
    : > "$out/$net.results"
    for r in $(seq "$repeats"); do
        for t in 1 2; do
            "$out/$net" $args --threads $t --report "$out/r.json" > /dev/null
            echo "1x$t $(ips "$out/r.json")" >> "$out/$net.results"
        done
        for btl in vader tcp; do
            for mode in thread poll; do
                for overlap in 1 0; do
                    name="2x1 $mode $btl"
                    [ $overlap = 1 ] || name="$name no-overlap"
                    DLRT_DIST_PROGRESS=$mode DLRT_DIST_OVERLAP=$overlap DLRT_DIST_STATS=1 \
                        timeout 300 mpirun --oversubscribe --mca btl self,$btl -np 2 \
                        "$out/$net" $args --threads 1 --report "$out/r.json" \
                        > /dev/null 2> "$out/stats.txt"
                    echo "$name $(ips "$out/r.json")" >> "$out/$net.results"
                    alone=$(sed -n 's/.*rank 0 of 2.*the sums alone \([0-9.]*\) ms.*/\1/p' "$out/stats.txt")
                    echo "alone $mode $btl $alone" >> "$out/$net.results"
                done
            done
        done
    done
    echo "$net, batch 64, medians of $repeats runs (images/s of the training steps):"
    printf '  %-28s %10s\n' case images/s
    for c in "1x1" "1x2" "2x1 thread vader" "2x1 thread vader no-overlap" "2x1 poll vader" \
             "2x1 poll vader no-overlap" "2x1 thread tcp" "2x1 thread tcp no-overlap" \
             "2x1 poll tcp" "2x1 poll tcp no-overlap"; do
        v=$(grep "^$c [0-9]" "$out/$net.results" | awk '{print $NF}' | median)
        printf '  %-28s %10.0f\n' "$c" "$v"
    done
    for mode in thread poll; do
        for btl in vader tcp; do
            on=$(grep "^2x1 $mode $btl [0-9]" "$out/$net.results" | awk '{print $NF}' | median)
            off=$(grep "^2x1 $mode $btl no-overlap" "$out/$net.results" | awk '{print $NF}' | median)
            alone=$(grep "^alone $mode $btl" "$out/$net.results" | awk '{print $NF}' | median)
            python3 -c "
import sys
on, off, alone = map(float, sys.argv[1:4])
step_on, step_off = 64e3 / on, 64e3 / off   # ms per step
print(f'  {sys.argv[4]:6} {sys.argv[5]:5}: sums alone {alone:.3f} ms/step, step {step_on:.3f} ms '
      f'with overlap, {step_off:.3f} ms without: hidden {100 * (step_off - step_on) / alone:.0f}%')
" "$on" "$off" "$alone" "$mode" "$btl"
        done
    done
done
