/* threads.c — how many threads the kernels use.
 *
 * In a build with OpenMP the kernels split their work among OpenMP's
 * threads (the batch of a convolution, the features of a dense layer) and
 * OpenBLAS runs single-threaded inside each; without OpenMP, OpenBLAS
 * threads the products itself.  Both libraries hold their thread
 * count as process-wide state, so this is the one setting of libdlrt that
 * is not carried in an object: a program sets it once, before its work.
 * The count matters for results as well as speed: OpenBLAS splits a
 * product's sums between its threads, so another count may change the last
 * bits, and a run is reproducible for a given seed and thread count.
 *
 * It also makes sure OpenBLAS runs the kernels of this CPU.  Debian 12's
 * OpenBLAS 0.3.21 does not recognize some AVX-512 Xeons and falls back to
 * its generic Prescott kernels, which use none of the CPU's wide vectors;
 * OPENBLAS_CORETYPE set before it loads corrects that (docs/program.md,
 * "OpenBLAS").
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dlrt.h"

/* OpenBLAS's name for the kernels it chose (cblas.h declares it). */
const char *dlrt_blas_core(void) {
    const char *core = openblas_get_corename();
    return core ? core : "unknown";
}

/* The kernels OpenBLAS should have chosen on this CPU, when it fell back to
 * its generic x86-64 ones (Prescott), or NULL. */
static const char *better_core(void) {
    if (strcasecmp(dlrt_blas_core(), "prescott") != 0)
        return NULL;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

void dlrt_fix_blas_core(char **argv) {
    if (getenv("OPENBLAS_CORETYPE")) /* the user's choice, or done already */
        return;
    const char *core = better_core();
    if (!core)
        return;
    /* OpenBLAS reads OPENBLAS_CORETYPE once, when it is loaded, so the
       program starts again with it set */
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "warning: OpenBLAS uses its generic Prescott kernels on this CPU, and "
            "restarting with OPENBLAS_CORETYPE=%s failed; set it to make products about 5 "
            "times as fast\n", core);
}

void dlrt_set_threads(int n) {
    if (n < 1)
        n = 1;
#ifdef _OPENMP
    /* the kernels split their work among OpenMP's threads, and each calls
       BLAS on its own block: OpenBLAS's threads would only compete */
    openblas_set_num_threads(1);
    omp_set_num_threads(n);
#else
    openblas_set_num_threads(n);
#endif
}
