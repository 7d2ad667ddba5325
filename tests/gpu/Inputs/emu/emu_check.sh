#!/bin/sh
# emu_check.sh DLC CLANG PYTHON OUT NAME FILE.dl BATCH [dlc flags]: builds
# FILE.dl and its emulated driver (emu_build.sh) and runs `check --batch
# BATCH` with that driver in place of libcuda.so.1, and the words of
# $CHECK_ARGS after it (--mode infer --weights F: an int8 network's
# inference, emulated_int8.test).
set -e
dlc=$1 clang=$2 python=$3 out=$4 name=$5 file=$6 batch=$7
shift 7
here=$(dirname "$0")
sh "$here/emu_build.sh" "$dlc" "$clang" "$python" "$out" "$name" "$file" "$@"
# the emulator's block threads wait at a barrier until the process ends:
# LeakSanitizer, stopping them to scan for leaks, crashes on them
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    DLRT_CUDA_LIBRARY="$out/$name.emu.so" "$out/$name" check --batch "$batch" ${CHECK_ARGS:-}
