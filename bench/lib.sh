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

# timed_run BASE LABEL CMD...: runs CMD with its standard output in BASE.out,
# its standard error in BASE.log and its peak resident memory (KiB, from GNU
# time) in BASE.kib.  When CMD fails, writes the end of its log to BASE.err,
# removes BASE.json, says so on standard error and returns 1.
timed_run() {
    local base=$1 label=$2
    shift 2
    /usr/bin/time -f %M -o "$base.kib" "$@" >"$base.out" 2>"$base.log" && return 0
    { tail -n 3 "$base.log"; tail -n 1 "$base.kib"; } | tr '\n' ' ' >"$base.err"
    rm -f "$base.json"
    echo "  $label failed: $(cat "$base.err")" >&2
    return 1
}

# peak_mib CMD...: runs CMD (its standard output dropped) and prints the
# peak MiB of device memory that nvidia-smi reports for its process,
# sampled every 0.1 s (the sampling can slow the process it watches);
# returns CMD's status.
peak_mib() {
    "$@" > /dev/null &
    local pid=$! peak=0 used
    while kill -0 $pid 2>/dev/null; do
        used=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
               awk -F', ' -v p=$pid '$1 == p {print $2}' | head -1)
        [ -n "$used" ] && [ "$used" -gt "$peak" ] && peak=$used
        sleep 0.1
    done
    wait $pid
    local status=$?
    echo "$peak"
    return $status
}
