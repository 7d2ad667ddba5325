# shellcheck shell=bash
# Shell functions that the benchmark scripts share; source it:
#   . bench/lib.sh

# openblas_cores PYTHON: sets `core`, the kernels Debian's OpenBLAS picks on
# this machine by itself (asked through PYTHON's ctypes), and `peer_core`,
# the OPENBLAS_CORETYPE to give a peer that uses that OpenBLAS (PyTorch 1.13
# from Debian), so that it runs at its best.  OpenBLAS 0.3.21 takes AVX-512
# Xeons for its generic Prescott target; a peer then gets SkylakeX (or
# Haswell where there is AVX2 but no AVX-512).  dlc runs with whatever
# OpenBLAS picks by itself: its programs fix a Prescott on their own
# (docs/program.md).
# shellcheck disable=SC2034  # core and peer_core are for the caller
openblas_cores() {
    local python=$1
    core=$("$python" -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0")
l.openblas_get_corename.restype = ctypes.c_char_p
print(l.openblas_get_corename().decode())')
    peer_core=$core
    if [ "${core,,}" = prescott ]; then
        if grep -qw avx512f /proc/cpuinfo; then peer_core=SkylakeX
        elif grep -qw avx2 /proc/cpuinfo; then peer_core=Haswell
        fi
    fi
}
