#!/bin/sh
# ab_generated.sh: times two builds of one network's generated code in one
# process, in alternation (bench/ab_generated.c), the way to see a change of
# a few percent on a machine whose noise is larger than that.
#
#   bench/ab_generated.sh A_DIR B_DIR [BATCH [PAIRS [THREADS [infer|train]]]]
#
# A_DIR and B_DIR hold `dlc NET.dl --emit=c -o DIR` output of the same
# network (NET.h and NET.c), e.g. from two dlc builds or two sets of flags:
#
#   git worktree add /tmp/old HEAD~1 && cmake -S /tmp/old -B /tmp/old/build \
#       -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/old/build -j2
#   /tmp/old/build/dlc models/googlenet.dl --emit=c -o /tmp/a
#   build/dlc models/googlenet.dl --emit=c -o /tmp/b
#   bench/ab_generated.sh /tmp/a /tmp/b 1 200 2 infer
#
# BATCH 1, PAIRS 100, THREADS 2 and infer by default.  It compiles both as
# dlc does (-O3 -march=native), renames each build's exported functions
# (A_... and B_...) with objcopy, links them with build/libdlrt.a (BUILD=dir
# for another build folder) and runs bench/ab_generated.c.  B/A below 1
# means B is faster.
set -eu
if [ $# -lt 2 ]; then
    sed -n '2,22s/^# \{0,1\}//p' "$0" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=${BUILD:-$root/build}
a=$1 b=$2 batch=${3:-1} pairs=${4:-100} threads=${5:-2} mode=${6:-infer}
header=
for h in "$a"/*.h; do
    header=$h
    break
done
if [ ! -f "$header" ]; then
    echo "ab_generated.sh: no NET.h in $a (dlc NET.dl --emit=c -o $a)" >&2
    exit 1
fi
name=$(basename "$header" .h)
upper=$(echo "$name" | tr '[:lower:]' '[:upper:]')
# NAME_input_SIZE (the first input's) and NAME_OUTPUT0_SIZE
in=$(awk -v p="${upper}_" '$1 == "#define" && index($2, p) == 1 &&
                           $2 ~ /_SIZE$/ && $2 !~ /OUTPUT/ {print $3; exit}' "$header")
out=$(awk -v p="${upper}_OUTPUT0_SIZE" '$1 == "#define" && $2 == p {print $3; exit}' "$header")
if [ -z "$in" ] || [ -z "$out" ] || [ ! -f "$b/$name.c" ]; then
    echo "ab_generated.sh: $a and $b must hold $name.h and $name.c of one network" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for side in A B; do
    dir=$a
    [ "$side" = B ] && dir=$b
    cc -c -std=c11 -O3 -march=native -fopenmp -I "$root/runtime" -I "$dir" "$dir/$name.c" \
        -o "$work/$side.o"
    rename=""
    for sym in $(nm "$work/$side.o" | awk '$2 ~ /^[TDRB]$/ {print $3}'); do
        rename="$rename --redefine-sym $sym=${side}_${sym#"${name}_"}"
    done
    # shellcheck disable=SC2086 # one word per option
    objcopy $rename "$work/$side.o"
done
cc -O2 -DIN="$in" -DOUT="$out" -I "$root/runtime" -I "$here" "$here/ab_generated.c" \
    "$work/A.o" "$work/B.o" "$build/libdlrt.a" -lopenblas -lz -fopenmp -lm -o "$work/ab"
"$work/ab" "$batch" "$pairs" "$threads" "$mode"
