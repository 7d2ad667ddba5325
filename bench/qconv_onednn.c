/* qconv_onednn: oneDNN's int8 convolution (Debian's libdnnl-dev) on the
 * shapes of qconv_shapes.h, beside libdlrt's (qconv_shapes.c), to measure
 * before choosing between them (issue 36 asked for the measurement).
 *
 *   apt-get install libdnnl-dev
 *   cc -O2 -fopenmp -I bench bench/qconv_onednn.c -ldnnl -o qconv_onednn
 *   ./qconv_onednn [REPEATS [THREADS [NAME]]]
 *
 * Each shape is one convolution at batch 1 as an int8 network runs it:
 * u8 activations (after a ReLU), s8 weights, s32 sums, per-channel output
 * scales, a bias and the ReLU, into u8.  Two figures each:
 *   - blocked: every tensor in the layout oneDNN prefers (format "any"),
 *     the weights reordered once beforehand: what a runtime that keeps
 *     oneDNN's layouts between its layers (OpenVINO) pays;
 *   - plain: the source and result in NCHW as dlc keeps int8 tensors, the
 *     reorders into and out of oneDNN's layouts timed with the call.
 * The shortest of REPEATS (101) runs on THREADS OpenMP threads (1), in
 * GMAC/s of the real taps, and the implementation oneDNN chose. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

#include "qconv_shapes.h"
#include "timing.h"

#define CHECK(call)                                                                              \
    do {                                                                                         \
        dnnl_status_t s_ = (call);                                                               \
        if (s_ != dnnl_success) {                                                                \
            fprintf(stderr, "qconv_onednn: %s failed (%d)\n", #call, (int)s_);                  \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static dnnl_memory_t memory(dnnl_engine_t eng, const dnnl_memory_desc_t *md) {
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
    return m;
}

/* Fill a memory's bytes with small values (u8 activations, s8 weights alike). */
static void fill(dnnl_memory_t m, const dnnl_memory_desc_t *md) {
    void *p;
    CHECK(dnnl_memory_get_data_handle(m, &p));
    size_t bytes = dnnl_memory_desc_get_size(md);
    for (size_t i = 0; i < bytes; i++)
        ((unsigned char *)p)[i] = (unsigned char)(rand() % 64);
}

static void reorder(dnnl_engine_t eng, dnnl_stream_t st, dnnl_memory_t from,
                    const dnnl_memory_desc_t *from_md, dnnl_memory_t to,
                    const dnnl_memory_desc_t *to_md, dnnl_primitive_t *keep) {
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_reorder_primitive_desc_create(&pd, from_md, eng, to_md, eng, NULL));
    CHECK(dnnl_primitive_create(keep, pd));
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    CHECK(dnnl_primitive_execute(*keep, st, 2, args));
    CHECK(dnnl_primitive_desc_destroy(pd));
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 101, threads = argc > 2 ? atoi(argv[2]) : 1;
    if (repeats < 1 || threads < 1) {
        fprintf(stderr, "usage: qconv_onednn [REPEATS [THREADS [NAME]]]\n");
        return 2;
    }
    omp_set_num_threads(threads);
    dnnl_engine_t eng;
    dnnl_stream_t st;
    CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
    const dnnl_version_t *v = dnnl_version();
    printf("%-26s %10s %8s %10s %8s  impl  (oneDNN %d.%d.%d, %d threads, batch 1)\n", "shape",
           "blocked ms", "GMAC/s", "plain ms", "GMAC/s", v->major, v->minor, v->patch, threads);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const Shape *sh = &shapes[i];
        if (argc > 3 && !strstr(sh->name, argv[3]))
            continue;
        int64_t o = (sh->h + 2 * sh->p - sh->k) / sh->s + 1;
        dnnl_dims_t src_dims = {1, sh->c, sh->h, sh->h}, w_dims = {sh->f, sh->c, sh->k, sh->k},
                    b_dims = {sh->f}, dst_dims = {1, sh->f, o, o}, strides = {sh->s, sh->s},
                    pad = {sh->p, sh->p};
        dnnl_memory_desc_t src_any, w_any, b_md, dst_any, src_plain, w_plain, dst_plain;
        CHECK(dnnl_memory_desc_init_by_tag(&src_any, 4, src_dims, dnnl_u8, dnnl_format_tag_any));
        CHECK(dnnl_memory_desc_init_by_tag(&w_any, 4, w_dims, dnnl_s8, dnnl_format_tag_any));
        CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, b_dims, dnnl_s32, dnnl_a));
        CHECK(dnnl_memory_desc_init_by_tag(&dst_any, 4, dst_dims, dnnl_u8, dnnl_format_tag_any));
        CHECK(dnnl_memory_desc_init_by_tag(&src_plain, 4, src_dims, dnnl_u8, dnnl_nchw));
        CHECK(dnnl_memory_desc_init_by_tag(&w_plain, 4, w_dims, dnnl_s8, dnnl_oihw));
        CHECK(dnnl_memory_desc_init_by_tag(&dst_plain, 4, dst_dims, dnnl_u8, dnnl_nchw));
        dnnl_convolution_desc_t cd;
        CHECK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                 dnnl_convolution_direct, &src_any, &w_any,
                                                 &b_md, &dst_any, strides, pad, pad));
        /* per-channel output scales, then the ReLU */
        float *scales = malloc(sizeof *scales * (size_t)sh->f);
        for (int64_t f = 0; f < sh->f; f++)
            scales[f] = 1e-3f * (float)(1 + f % 5);
        dnnl_primitive_attr_t attr;
        dnnl_post_ops_t po;
        CHECK(dnnl_primitive_attr_create(&attr));
        CHECK(dnnl_primitive_attr_set_output_scales(attr, sh->f, 1 << 1, scales));
        CHECK(dnnl_post_ops_create(&po));
        CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
        CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
        dnnl_primitive_desc_t pd;
        CHECK(dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL));
        const char *impl = "?";
        CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
        const dnnl_memory_desc_t *src_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0),
                                 *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                                 *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        dnnl_memory_t src = memory(eng, src_md), w = memory(eng, w_md), b = memory(eng, &b_md),
                      dst = memory(eng, dst_md), splain = memory(eng, &src_plain),
                      wplain = memory(eng, &w_plain), dplain = memory(eng, &dst_plain);
        fill(splain, &src_plain), fill(wplain, &w_plain), fill(b, &b_md);
        dnnl_primitive_t conv, to_w, to_src, from_dst;
        CHECK(dnnl_primitive_create(&conv, pd));
        reorder(eng, st, wplain, &w_plain, w, w_md, &to_w); /* once, as a freeze would */
        reorder(eng, st, splain, &src_plain, src, src_md, &to_src);
        CHECK(dnnl_stream_wait(st));
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w},
                                  {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, dst}};
        dnnl_exec_arg_t in[] = {{DNNL_ARG_FROM, splain}, {DNNL_ARG_TO, src}};
        {
            dnnl_primitive_desc_t rpd;
            CHECK(dnnl_reorder_primitive_desc_create(&rpd, dst_md, eng, &dst_plain, eng, NULL));
            CHECK(dnnl_primitive_create(&from_dst, rpd));
            CHECK(dnnl_primitive_desc_destroy(rpd));
        }
        dnnl_exec_arg_t out[] = {{DNNL_ARG_FROM, dst}, {DNNL_ARG_TO, dplain}};
        double best_blocked = 1e30, best_plain = 1e30;
        for (int r = 0; r < repeats; r++) {
            double t0 = now();
            CHECK(dnnl_primitive_execute(conv, st, 4, args));
            CHECK(dnnl_stream_wait(st));
            double t1 = now();
            CHECK(dnnl_primitive_execute(to_src, st, 2, in));
            CHECK(dnnl_primitive_execute(conv, st, 4, args));
            CHECK(dnnl_primitive_execute(from_dst, st, 2, out));
            CHECK(dnnl_stream_wait(st));
            double t2 = now();
            best_blocked = t1 - t0 < best_blocked ? t1 - t0 : best_blocked;
            best_plain = t2 - t1 < best_plain ? t2 - t1 : best_plain;
        }
        double macs = (double)sh->f * (double)(sh->c * sh->k * sh->k) * (double)(o * o);
        printf("%-26s %10.4f %8.1f %10.4f %8.1f  %s\n", sh->name, best_blocked * 1e3,
               macs / best_blocked * 1e-9, best_plain * 1e3, macs / best_plain * 1e-9, impl);
        dnnl_primitive_destroy(conv), dnnl_primitive_destroy(to_w);
        dnnl_primitive_destroy(to_src), dnnl_primitive_destroy(from_dst);
        dnnl_memory_destroy(src), dnnl_memory_destroy(w), dnnl_memory_destroy(b);
        dnnl_memory_destroy(dst), dnnl_memory_destroy(splain), dnnl_memory_destroy(wplain);
        dnnl_memory_destroy(dplain);
        dnnl_primitive_desc_destroy(pd), dnnl_primitive_attr_destroy(attr);
        dnnl_post_ops_destroy(po);
        free(scales);
    }
    dnnl_stream_destroy(st), dnnl_engine_destroy(eng);
    return 0;
}
