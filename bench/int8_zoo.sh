#!/usr/bin/env bash
# The int8 quantization's fidelity on the zoo's ImageNet networks (issue
# 36, item 5): per network, each layer's SQNR and the agreement of the
# top-1 class between the int8 program and the f32 one, on a fixed set of
# real images.
#
#   bench/int8_zoo.sh [--nets "alexnet googlenet resnet18 resnet50 vgg16"]
#                     [--methods "minmax"] [--build build] [--cache DIR]
#                     [--out bench/int8_zoo.md] [--batch 20] [--reuse]
#
# No ImageNet data and no pretrained weights are packaged, so:
#   - the weights are each network's own initialization: the f32 program's
#     `train --epochs 1 --limit 1 --batch 1 --lr 1e-30 --seed 0 --save F`
#     (there is no zero-epoch train; one step at a learning rate of 1e-30
#     moves no weight by more than 1e-30: biases that start at 0 become
#     about 1e-31, the others stay as they were; but it moves the
#     batchnorms' running statistics a tenth of the way to those of one
#     random image: ResNet-18's variances 0.90 to 0.98, means up to 0.33);
#   - the inputs are Fashion-MNIST images (/usr/share/datasets/fashion-mnist)
#     resized to 224x224 (bilinear) and replicated to 3 channels, written
#     once by bench/int8_zoo_data.py under --cache: the first 200 training
#     images (calibration) and the first 200 test images (held out).
# The figures measure how closely int8 follows f32 on these networks, not
# ImageNet accuracy: a network at its initialization gives nearly equal
# scores to its 1000 classes, so its top-1 class is fragile, a harder test
# of agreement than a trained network's confident one.
#
# Per network: `BUILD/dlc models/X.dl -o X` and `--quantize=int8 -o X8`;
# the f32 weights as above; for each method `X8 calibrate --weights F
# --data DIR --samples N --method M --save I` (its per-layer table and its
# scores' SQNR and top-1 agreement on the N calibration images); then
# `X predict --weights F` and `X8 predict --weights I` on the held-out
# images, whose classes are compared here; `X info` (trainable
# parameters: the f32 weights at 4 bytes each) and `X8 info --weights I`
# (the int8 checkpoint's tensors).  The int8 kernels are a first slice
# (docs/quantization.md), slowest on VGG-16's large convolutions, so
# VGG-16 gets 50 images of each set (net_samples below).  A network that
# fails (compile, crash, NaN) is a row of the table with the failing
# command and its message; the others go on.  Programs, weights and data
# live in --cache (default ${XDG_CACHE_HOME:-~/.cache}/dlc-int8-zoo);
# --reuse keeps programs and weights found there instead of making them
# again.  Takes about 19 minutes on a busy 2-core Xeon, 10 of them
# VGG-16's; each further method of --methods adds its calibrating and
# int8 predicting (percentile on all five with --reuse: 13 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
command_line=bench/int8_zoo.sh
for a in "$@"; do
    case "$a" in
        *[!A-Za-z0-9_./=-]*) command_line+=" \"$a\"" ;;
        *) command_line+=" $a" ;;
    esac
done
nets="alexnet googlenet resnet18 resnet50 vgg16"
methods=minmax
build=build
cache=${XDG_CACHE_HOME:-$HOME/.cache}/dlc-int8-zoo
out=bench/int8_zoo.md
batch=20
reuse=false
while [ $# -gt 0 ]; do
    case "$1" in
        --nets) nets=$2; shift 2 ;;
        --methods) methods=$2; shift 2 ;;
        --build) build=$2; shift 2 ;;
        --cache) cache=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --batch) batch=$2; shift 2 ;;
        --reuse) reuse=true; shift ;;
        *) sed -n '/^#   bench\/int8_zoo.sh/,/--reuse\]/p' "$0" | sed 's/^# \{0,1\}//' >&2
           exit 2 ;;
    esac
done

# network -> calibration images, held-out images (at most 200 each)
net_samples() {
    case "$1" in
        vgg16) echo 50 50 ;;
        *) echo 200 200 ;;
    esac
}

start=$(date +%s)
cmake --build "$build" --target dlc >/dev/null
dlc=$build/dlc
data=$cache/data
mkdir -p "$cache"
if [ ! -s "$data/t10k-labels-idx1-ubyte" ]; then
    echo "writing the images to $data" >&2
    /usr/bin/python3 bench/int8_zoo_data.py "$data" --calib 200 --held-out 200 >&2
fi
image_bytes=$((3 * 224 * 224))

# held_out N: the first N held-out images as an IDX file of their own
# (predict classifies every image of a file), made once
held_out() {
    local n=$1 f=$cache/held-out-$1
    if [ ! -s "$f" ]; then
        { head -c 4 "$data/t10k-images-idx3-ubyte"
          printf '%b' "$(printf '\\x%02x' $((n >> 24 & 255)) $((n >> 16 & 255)) \
              $((n >> 8 & 255)) $((n & 255)))"
          head -c $((20 + n * image_bytes)) "$data/t10k-images-idx3-ubyte" | tail -c +9
        } >"$f.tmp"
        mv "$f.tmp" "$f"
    fi
    echo "$f"
}

# run LOG CMD...: runs CMD (niced) with its output in LOG; on failure says
# so, with the command and the end of its output, and returns 1
run() {
    local log=$1
    shift
    echo "  $*" >>"$cache/commands.txt"
    if ! nice -n 10 "$@" >"$log" 2>&1; then
        failure="\`$(echo "$*" | sed "s|$cache/||g")\` failed: $(tail -n 2 "$log" | tr '\n' ' ' |
            sed "s|$cache/||g")"
        echo "    $failure" >&2
        return 1
    fi
}

# classes FILE: the class of each line of predict's output
classes() { sed -n 's/.*: class \([0-9]*\).*/\1/p' "$1"; }

rows=$cache/rows.md
details=$cache/details.md
: >"$rows"
: >"$details"
: >"$cache/commands.txt"
for net in $nets; do
    read -r ncal nheld <<<"$(net_samples "$net")"
    dir=$cache/$net
    mkdir -p "$dir"
    t0=$(date +%s)
    echo "$net: $ncal calibration and $nheld held-out images" >&2
    failure=
    f32=$dir/$net.f32.safetensors
    ok=true
    if ! $reuse || [ ! -x "$dir/$net" ]; then
        run "$dir/dlc.log" "$dlc" "models/$net.dl" -o "$dir/$net" || ok=false
    fi
    if $ok && { ! $reuse || [ ! -x "$dir/${net}8" ]; }; then
        run "$dir/dlc8.log" "$dlc" "models/$net.dl" --quantize=int8 -o "$dir/${net}8" || ok=false
    fi
    if $ok && { ! $reuse || [ ! -s "$f32" ]; }; then
        run "$dir/init.log" "$dir/$net" train --epochs 1 --limit 1 --batch 1 --lr 1e-30 \
            --seed 0 --save "$f32" || ok=false
    fi
    if $ok; then
        run "$dir/info.log" "$dir/$net" info || ok=false
    fi
    if $ok; then
        held=$(held_out "$nheld")
        run "$dir/f32.pred" "$dir/$net" predict --weights "$f32" --batch "$batch" "$held" ||
            ok=false
    fi
    if ! $ok; then
        echo "| $net | | $failure | | | | | | |" >>"$rows"
        continue
    fi
    params=$(sed -n 's/^trainable parameters: //p' "$dir/info.log")
    f32_mib=$(awk -v p="$params" 'BEGIN { printf "%.1f", p * 4 / 1048576 }')
    distinct=$(classes "$dir/f32.pred" | sort -u | wc -l)
    for method in $methods; do
        i8=$dir/$net.$method.int8.safetensors
        cal=$dir/calibrate.$method.log
        failure=
        if ! run "$cal" "$dir/${net}8" calibrate --weights "$f32" --data "$data" \
                --samples "$ncal" --method "$method" --batch "$batch" --save "$i8" ||
           ! run "$dir/int8.$method.pred" "$dir/${net}8" predict --weights "$i8" \
                --batch "$batch" "$held" ||
           ! run "$dir/info8.$method.log" "$dir/${net}8" info --weights "$i8"; then
            echo "| $net | $method | $failure | | | | | | |" >>"$rows"
            continue
        fi
        # calibrate: "scores: SQNR 30.78 dB against ...; the same top-1 class
        # for 194 of 200 samples (97.00%)"
        scores=$(grep '^scores: SQNR' "$cal")
        sqnr=$(echo "$scores" | sed 's/^scores: SQNR \([^ ]*\) dB.*/\1/')
        cal_agree=$(echo "$scores" | sed 's/.* for \([0-9]*\) of \([0-9]*\) samples.*/\1 of \2/')
        held_agree=$(paste <(classes "$dir/f32.pred") <(classes "$dir/int8.$method.pred") |
            awk '{ n++; s += $1 == $2 } END { printf "%d of %d", s, n }')
        # the per-scale table: "  NAME  VALUE  SQNR dB" between its header
        # and the scores; the per-layer one: "  NAME  SQNR dB  IN  OUT"
        sed -n '/^  activation scale/,/^scores:/p' "$cal" | sed '1d;$d' >"$dir/act.$method"
        sed -n '/^  layer /,/^  activation scale/p' "$cal" | sed '1d;$d' >"$dir/weights.$method"
        # (awk reads all that sort writes: a head that stops early would
        # kill sort with SIGPIPE, and pipefail the script)
        worst=$(sort -g -k3 "$dir/act.$method" |
            awk 'NR <= 3 { printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $3 }')
        worst_w=$(sort -g -k2 "$dir/weights.$method" | awk 'NR == 1 { print $1, $2 }')
        int8_mib=$(sed -n 's/^int8 weights .*: \([0-9.]*\) KiB of tensors$/\1/p' \
            "$dir/info8.$method.log" | awk '{ printf "%.1f", $1 / 1024 }')
        nan=
        cat "$dir/act.$method" "$dir/weights.$method" - <<<"$scores" | grep -iw nan >/dev/null &&
            nan=" (NaN in calibrate's output)"
        echo "| $net | $method | $cal_agree | $held_agree | $sqnr dB$nan | $worst | $worst_w |" \
             "$distinct of $nheld | $f32_mib / $int8_mib |" >>"$rows"
        {
            echo "### $net, $method ($ncal calibration images)"
            echo
            echo '```'
            sed -n '/^  layer /,/^scores:/p' "$cal"
            echo '```'
            echo
        } >>"$details"
    done
    echo "  $net: $(($(date +%s) - t0)) s" >&2
done
minutes=$(awk -v s=$(($(date +%s) - start)) 'BEGIN { printf "%.1f", s / 60 }')

cpu=$(sed -n '/^model name/{s/^model name[[:space:]]*: //p;q}' /proc/cpuinfo)
vnni=without
grep -qw avx512_vnni /proc/cpuinfo && vnni=with
{
    echo "# int8 against f32 on the zoo's ImageNet networks"
    echo
    echo "Written by \`$command_line\` on $(date -u +%Y-%m-%d), commit" \
         "$(git rev-parse --short HEAD), $cpu ($(nproc) cores, $vnni AVX-512 VNNI)," \
         "in $minutes minutes."
    echo
    echo "Random-init networks (each network's own initialization, seed 0: no"
    echo "pretrained weights are packaged) on Fashion-MNIST images resized to"
    echo "224x224 and replicated to 3 channels: the figures measure the"
    echo "quantization's fidelity to f32, not ImageNet accuracy."
    echo
    echo "| network | method | same top-1, calibration images | same top-1, held-out images |" \
         "scores' SQNR (calibration) | worst 3 activations' SQNR (dB) | worst weights' SQNR (dB) |" \
         "distinct f32 classes, held out | weights f32 / int8 (MiB) |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    cat "$rows"
    echo
    echo "- same top-1: images whose highest int8 score is the class of the"
    echo "  highest f32 score; on the calibration images calibrate's own figure,"
    echo "  on the held-out images the classes of \`predict\` compared."
    echo "- SQNR: 10 log10 of the signal's power over the error's. The scores':"
    echo "  the int8 network's scores against the f32 network's, errors of every"
    echo "  layer accumulated. An activation's: that tensor of the f32 network"
    echo "  against itself quantized and dequantized at its scale (its own"
    echo "  rounding and clipping, no error carried from earlier layers). A"
    echo "  layer's weights: per output channel, the batchnorm folded in."
    echo "- distinct f32 classes: how many of the 1000 classes the f32 network"
    echo "  gives as its top-1 on the held-out images (few: the inputs are alike"
    echo "  to a network at its initialization)."
    echo "- weights: f32, the trainable parameters at 4 bytes (\`info\`); int8,"
    echo "  the int8 checkpoint's tensors (\`info --weights\`: int8 weights, f32"
    echo "  scales and biases)."
    echo
    echo "## Every layer"
    echo
    echo "calibrate's tables: per int8 layer, its weights' SQNR and its input"
    echo "and output scales; per activation scale, its value and its SQNR."
    echo
    cat "$details"
} >"$out"
echo "wrote $out ($minutes minutes)" >&2
cat "$rows"
