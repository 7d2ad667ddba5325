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
 */
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "dlrt.h"

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
