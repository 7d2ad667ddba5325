#!/usr/bin/env bash
# Checks that a restructuring changed no generated code: builds dlc at BASE
# (a commit, in a temporary worktree) and from the working tree, compiles
# every model of models/ with both in each variant below (C in f32 and f64,
# without fuse, without tile, for two CPUs' tiles, for the CPU and the GPU,
# TF32, IR before and after the training passes), and compares the outputs
# and diagnostics byte for byte.  Exits 0 when they are identical, 1 with the
# differences otherwise.
#
#   scripts/codegen_identical.sh BASE [MODEL.dl ...]
#
# BASE's outputs are kept in build-identical/BASE-SHA/ and reused.
# DLC_IDENTICAL_VARIANTS="c c-f64 ..." checks only the variants named (the
# GPU ones take most of the time: LLVM builds the kernels).
# DLC_IDENTICAL_BUILD=DIR builds the working tree in DIR (build-identical/head);
# DLC_IDENTICAL_STORE=DIR keeps the outputs there instead of build-identical/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 ]]; then
    echo "usage: scripts/codegen_identical.sh BASE [MODEL.dl ...]" >&2
    exit 2
fi
base=$1
shift
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(models/*.dl)
for m in "${models[@]}"; do
    [[ $m != /* ]] || { echo "codegen_identical: give models by their path in the tree: $m" >&2; exit 2; }
done

sha=$(git rev-parse --short "$base")
store="${DLC_IDENTICAL_STORE:-$PWD/build-identical}"
mkdir -p "$store"
tmp=$(mktemp -d)
cleanup() {
    git worktree remove --force "$tmp/src" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

build() { # SRC BUILD_DIR
    cmake -S "$1" -B "$2" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$2" -j"$(nproc)" --target dlc >/dev/null
}
head_build=${DLC_IDENTICAL_BUILD:-$store/head}
build . "$head_build"

# each variant: a name and dlc's options
variants=(
    "c|--emit=c"
    "c-f64|--emit=c --dtype=f64"
    "c-nofuse|--emit=c -fno-fuse"
    "c-notile|--emit=c -fno-tile"
    "c-avx512|--emit=c --target-cpu=l1=48K,l2=1M,vector=64,registers=32"
    "c-avx2|--emit=c --target-cpu=l1=32K,l2=512K,vector=32,registers=16"
    "cuda|--emit=c --target=cpu,cuda"
    "cuda-tf32|--emit=c --target=cpu,cuda --gpu-math=tf32"
    "cuda-bf16|--emit=c --target=cpu,cuda --gpu-math=bf16"
    "ir|--emit=ir"
    "ir-train|--emit=ir --passes=autodiff,optimizer,cse,dce,fuse,tile"
)

if [[ -n "${DLC_IDENTICAL_VARIANTS:-}" ]]; then
    chosen=()
    for v in "${variants[@]}"; do
        [[ " $DLC_IDENTICAL_VARIANTS " == *" ${v%%|*} "* ]] && chosen+=("$v")
    done
    variants=("${chosen[@]}")
fi

generate() { # DLC OUT_DIR: every model in every variant, each into OUT_DIR/MODEL/VARIANT
    local dlc=$1 out=$2 model name opts dir rc target
    mkdir -p "$out"
    for model in "${models[@]}"; do
        for v in "${variants[@]}"; do
            name=${v%%|*}
            opts=${v#*|}
            dir="$(basename "$model" .dl)/$name"
            [[ -f "$out/$dir/status" ]] && continue
            mkdir -p "$out/$dir"
            case $name in
                c*|cuda*) target="$dir" ;;
                *) target="$dir/out" ;;
            esac
            rc=0
            # the model by its path in the tree (the C's #line directives
            # name it), the output's folder left out of diagnostics
            # shellcheck disable=SC2086
            "$dlc" "$model" $opts -o "$out/$target" 2>"$out/$dir/stderr" || rc=$?
            sed -i "s|$out/||g" "$out/$dir/stderr"
            echo "$rc" > "$out/$dir/status"
        done
    done
}

# BASE's outputs once (in the background, while the working tree's run)
if [[ ! -x "$store/base-$sha/dlc" ]]; then
    git worktree add --detach "$tmp/src" "$base" >/dev/null 2>&1
    build "$tmp/src" "$tmp/build-base"
    mkdir -p "$store/base-$sha"
    cp "$tmp/build-base/dlc" "$store/base-$sha/dlc"
fi
generate "$store/base-$sha/dlc" "$store/base-$sha/out" &
base_job=$!
rm -rf "$tmp/head"
generate "$head_build/dlc" "$tmp/head"
wait "$base_job"

# compare the variants and models of this run only
status=0
for model in "${models[@]}"; do
    for v in "${variants[@]}"; do
        dir="$(basename "$model" .dl)/${v%%|*}"
        diff -r "$store/base-$sha/out/$dir" "$tmp/head/$dir" >>"$tmp/diff" || status=1
    done
done
if [[ $status == 0 ]]; then
    n=$(find "$tmp/head" -type f ! -name status ! -name stderr | wc -l)
    echo "identical: ${#models[@]} models, ${#variants[@]} variants, $n files (base $sha)"
else
    head -c 20000 "$tmp/diff"
    echo "codegen_identical: outputs differ from $base" >&2
    exit 1
fi
