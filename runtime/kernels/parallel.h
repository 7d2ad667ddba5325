/* parallel.h — how libdlrt's kernels split a loop among threads (inside
 * libdlrt, not installed): OpenMP where the build has it, else one thread.
 * kernels.c's op families and int8.c's int8 joins use these; the int8
 * convolution (int8_conv.c) runs its own team, since its workers share a
 * converted operand. */
#ifndef DLRT_PARALLEL_H
#define DLRT_PARALLEL_H

#ifdef _OPENMP
#include <omp.h>
#define PRAGMA(x) _Pragma(#x)
/* PARALLEL_FOR(t, loop): the for statement `loop` split in equal static
 * chunks over t workers: a given t always gives each worker the same
 * iterations, hence the same bits.  With one worker the loop runs inline,
 * outside any OpenMP construct: libgomp makes and frees a team even for a
 * region whose `if` clause is false, which costs more than the small
 * kernels of a batch-1 inference take. */
#define PARALLEL_FOR(t, ...)                                                                    \
    do {                                                                                         \
        int parallel_for_t = (t);                                                                \
        if (parallel_for_t > 1) {                                                                \
            PRAGMA(omp parallel for num_threads(parallel_for_t) schedule(static))                \
            __VA_ARGS__                                                                          \
        } else {                                                                                 \
            __VA_ARGS__                                                                          \
        }                                                                                        \
    } while (0)
/* PARALLEL(t, block): the block run by t workers at once, each telling
 * itself apart by worker(), with BARRIER() between its phases; with one
 * worker, inline (as PARALLEL_FOR). */
#define PARALLEL(t, ...)                                                                        \
    do {                                                                                         \
        int parallel_t = (t);                                                                    \
        if (parallel_t > 1) {                                                                    \
            PRAGMA(omp parallel num_threads(parallel_t))                                         \
            __VA_ARGS__                                                                          \
        } else {                                                                                 \
            __VA_ARGS__                                                                          \
        }                                                                                        \
    } while (0)
#define BARRIER() PRAGMA(omp barrier)
static inline int worker(void) { return omp_get_thread_num(); }
#else
#define PARALLEL_FOR(t, ...)                                                                    \
    do {                                                                                         \
        (void)(t); /* one thread: t is 1 */                                                      \
        __VA_ARGS__                                                                              \
    } while (0)
#define PARALLEL(t, ...) PARALLEL_FOR(t, __VA_ARGS__)
#define BARRIER() ((void)0)
static inline int worker(void) { return 0; }
#endif

#endif
