#!/bin/sh
# emu_check.sh DLC CLANG PYTHON OUT NAME FILE.dl BATCH [dlc flags]: builds
# FILE.dl with --target=cpu,cuda into OUT/NAME, its kernels for the host
# (ll_to_host.py, CLANG) into the emulated driver OUT/NAME.emu.so, and runs
# `check --batch BATCH` with that driver in place of libcuda.so.1, and the
# words of $CHECK_ARGS after it (--mode infer --weights F: an int8 network's
# inference, emulated_int8.test).
set -e
dlc=$1 clang=$2 python=$3 out=$4 name=$5 file=$6 batch=$7
shift 7
here=$(dirname "$0")
DLC_NVPTX_DUMP_LL="$out/$name.ll" $dlc "$file" --target=cpu,cuda "$@" -o "$out/$name"
"$python" "$here/ll_to_host.py" "$out/$name.ll" "$out/$name.host.ll"
"$clang" -O1 -fPIC -Wno-override-module -c "$out/$name.host.ll" -o "$out/$name.kernels.o"
"$clang" -std=c11 -O1 -fPIC -shared -Wall -Wextra "$here/emu_driver.c" "$out/$name.kernels.o" \
    -o "$out/$name.emu.so" -lpthread -lm -ldl
# the emulator's block threads wait at a barrier until the process ends:
# LeakSanitizer, stopping them to scan for leaks, crashes on them
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    DLRT_CUDA_LIBRARY="$out/$name.emu.so" "$out/$name" check --batch "$batch" ${CHECK_ARGS:-}
