#!/bin/sh
# emu_build.sh DLC CLANG PYTHON OUT NAME FILE.dl [dlc flags]: builds
# FILE.dl with --target=cpu,cuda into OUT/NAME, and its kernels for the
# host (ll_to_host.py, CLANG) into the emulated driver OUT/NAME.emu.so,
# which the program loads through DLRT_CUDA_LIBRARY in place of
# libcuda.so.1.  With EMU_NCCL=1, also the emulated NCCL, OUT/emu_nccl.so
# (DLRT_NCCL_LIBRARY), over the program's MPI (Open MPI's mpicc gives its
# flags).
set -e
dlc=$1 clang=$2 python=$3 out=$4 name=$5 file=$6
shift 6
here=$(dirname "$0")
DLC_NVPTX_DUMP_LL="$out/$name.ll" $dlc "$file" --target=cpu,cuda "$@" -o "$out/$name"
"$python" "$here/ll_to_host.py" "$out/$name.ll" "$out/$name.host.ll"
"$clang" -O1 -fPIC -Wno-override-module -c "$out/$name.host.ll" -o "$out/$name.kernels.o"
"$clang" -std=c11 -O1 -fPIC -shared -Wall -Wextra "$here/emu_driver.c" "$out/$name.kernels.o" \
    -o "$out/$name.emu.so" -lpthread -lm -ldl
if [ "${EMU_NCCL:-0}" = 1 ]; then
    # shellcheck disable=SC2046 # mpicc's flags are words
    "$clang" -std=c11 -O1 -fPIC -shared -Wall -Wextra -Werror $(mpicc --showme:compile) \
        "$here/emu_nccl.c" -o "$out/emu_nccl.so" $(mpicc --showme:link)
fi
