/* qconv_shapes: the speed of libdlrt's int8 convolution (dlrt_qconv_s8,
 * runtime/kernels/int8_conv.c) on the convolution shapes of ResNet-18,
 * GoogLeNet and LeNet-5, in GMAC/s (multiply-adds of the real taps).
 *
 *   cc -O2 -fopenmp -I runtime bench/qconv_shapes.c build-rel/libdlrt.a -lm -o qconv_shapes
 *   ./qconv_shapes [REPEATS [THREADS [BATCH [vnni|avx2|portable [NAME]]]]]
 *
 * Each shape runs REPEATS times (101) on THREADS workers (1) over BATCH
 * samples (1), the weights packed beforehand (as NAME_freeze does), and
 * prints the shortest and the median time; NAME keeps the shapes whose
 * name contains it.  The shortest is the figure to
 * compare on a machine that other work shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"
#include "qconv_shapes.h"
#include "timing.h"

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 101, threads = argc > 2 ? atoi(argv[2]) : 1;
    int64_t n = argc > 3 ? atoll(argv[3]) : 1;
    const char *way = argc > 4 ? argv[4] : dlrt_cpu_has_vnni() ? "vnni" : "avx2";
    bool vnni = strcmp(way, "vnni") == 0, avx2 = strcmp(way, "avx2") == 0;
    if (repeats < 1 || threads < 1 || n < 1 || (!vnni && !avx2 && strcmp(way, "portable") != 0)) {
        fprintf(stderr, "usage: qconv_shapes [REPEATS [THREADS [BATCH [vnni|avx2|portable [NAME]]]]]\n");
        return 2;
    }
    printf("%-26s %10s %10s %8s  (%d threads, batch %lld, %s)\n", "shape", "min ms", "median ms",
           "GMAC/s", threads, (long long)n, way);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const Shape *sh = &shapes[i];
        if (argc > 5 && !strstr(sh->name, argv[5]))
            continue;
        int64_t o = (sh->h + 2 * sh->p - sh->k) / sh->s + 1;
        DlrtQConv q = {.c = sh->c, .h = sh->h, .w = sh->h, .f = sh->f, .oh = o, .ow = o,
                       .kh = sh->k, .kw = sh->k, .sh = sh->s, .sw = sh->s, .ph = sh->p,
                       .pw = sh->p, .dh = 1, .dw = 1, .groups = 1, .relu = true, .vnni = vnni,
                       .avx2 = avx2};
        size_t nx = (size_t)(n * q.c * q.h * q.w), nw = (size_t)(q.f * q.c * q.kh * q.kw);
        int8_t *x = malloc(nx), *w = malloc(nw), *y = malloc((size_t)(n * q.f * o * o));
        for (size_t j = 0; j < nx; j++)
            x[j] = (int8_t)(rand() % 128);
        for (size_t j = 0; j < nw; j++)
            w[j] = (int8_t)(rand() % 255 - 127);
        DlrtRequant *rq = malloc(sizeof *rq * (size_t)q.f);
        for (int64_t f = 0; f < q.f; f++)
            dlrt_requant_init(1e-4, 0.1, 0.05, &rq[f]);
        void *packed = dlrt_alloc(dlrt_qconv_s8_packed(&q), 1);
        void *work = dlrt_alloc(dlrt_qconv_s8_work(&q, threads), 1);
        dlrt_qconv_s8_pack(&q, w, packed);
        double *t = malloc(sizeof *t * (size_t)repeats);
        for (int r = 0; r < repeats; r++) {
            double t0 = now();
            dlrt_qconv_s8(&q, n, x, w, rq, y, NULL, packed, work, threads);
            t[r] = now() - t0;
        }
        qsort(t, (size_t)repeats, sizeof *t, by_value);
        double macs = (double)n * (double)nw * (double)(o * o);
        printf("%-26s %10.4f %10.4f %8.1f\n", sh->name, t[0] * 1e3, t[repeats / 2] * 1e3,
               macs / t[0] * 1e-9);
        free(x), free(w), free(y), free(rq), free(packed), free(work), free(t);
    }
    return 0;
}
