/* test_checkpoint.c — tests of libdlrt's losses (loss.c) and checkpoints
 * (safetensors.c).
 *
 *   test_checkpoint                     the unit tests; the last line says
 *                                       "N passed, M failed" (exit 1 on any
 *                                       failure)
 *   test_checkpoint write PATH          writes the demo checkpoint (below)
 *   test_checkpoint read PATH SPEC...   loads PATH into tensors given as
 *                                       NAME:DTYPE:DIMS (c1.weight:F32:6x1x5x5;
 *                                       a scalar has empty DIMS) and prints its
 *                                       metadata and values, or the error
 *   test_checkpoint loss ce|mse [FILE]  reads a loss problem (FILE or standard
 *                                       input) and prints the loss and gradient
 *
 * The modes let lit tests (tests/runtime/checkpoint_*.test, loss_*.test)
 * compare with PyTorch, through tests/runtime/Inputs/checkpoint_torch.py and
 * loss_torch.py.  The print formats are shared with those scripts: F32 as
 * %.9g, F64 as %.17g, so that a value prints the same from C and Python. */
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlrt.h"

/* ------------------------------------------------------------------------ */
/* The harness                                                              */
/* ------------------------------------------------------------------------ */

typedef struct Tally {
    int passed;
    int failed;
    char dir[256];   /* a fresh folder for the test's files */
} Tally;

#define CHECK(t, cond) check((t), (cond), #cond, __LINE__)

static bool check(Tally *t, bool ok, const char *what, int line) {
    if (ok) {
        t->passed++;
    } else {
        t->failed++;
        fprintf(stderr, "test_checkpoint.c:%d: FAILED: %s\n", line, what);
    }
    return ok;
}

/* status is want and the message holds text. */
#define CHECK_ERR(t, status, err, want, text) \
    check_err((t), (status), (err), (want), (text), __LINE__)

static void check_err(Tally *t, DlrtStatus got, const DlrtError *err, DlrtStatus want,
                      const char *text, int line) {
    bool ok = got == want && (want == DLRT_OK || strstr(err->message, text) != NULL);
    if (!check(t, ok, "expected error", line))
        fprintf(stderr, "    got %s \"%s\", wanted %s containing \"%s\"\n",
                dlrt_status_name(got), got == DLRT_OK ? "" : err->message,
                dlrt_status_name(want), text);
}

static bool near(double a, double b, double rel, double abs) {
    return fabs(a - b) <= abs + rel * fabs(b);
}

static void tpath(const Tally *t, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", t->dir, name);
}

static bool write_bytes(const char *path, const void *bytes, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(bytes, 1, len, f) == len;
    return (fclose(f) == 0) && ok;
}

/* A safetensors file by hand: header size, header text, data. */
static bool write_raw(const char *path, uint64_t size, const char *header, size_t hlen,
                      const void *data, size_t dlen) {
    unsigned char *buf = malloc(8 + hlen + dlen + 1);
    if (!buf)
        return false;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(size >> (8 * i));
    memcpy(buf + 8, header, hlen);
    if (dlen)
        memcpy(buf + 8 + hlen, data, dlen);
    bool ok = write_bytes(path, buf, 8 + hlen + dlen);
    free(buf);
    return ok;
}

static bool write_header(const char *path, const char *header, const void *data,
                         size_t dlen) {
    return write_raw(path, strlen(header), header, strlen(header), data, dlen);
}

/* The whole file in a malloc'd buffer (NULL if it cannot be read). */
static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096;
    unsigned char *buf = malloc(cap);
    *len = 0;
    size_t got;
    while (buf && (got = fread(buf + *len, 1, cap - *len, f)) > 0) {
        *len += got;
        if (*len == cap) {
            unsigned char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    return buf;
}

static bool file_holds_bytes(const char *path, const void *bytes, size_t n) {
    size_t len;
    unsigned char *buf = read_all(path, &len);
    bool same = buf && len == n && memcmp(buf, bytes, len) == 0;
    free(buf);
    return same;
}

static bool file_holds(const char *path, const char *text) {
    return file_holds_bytes(path, text, strlen(text));
}

/* Names in dir that look like temporary files. */
static int count_temp_files(const char *dir) {
    DIR *d = opendir(dir);
    int count = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        count += strstr(e->d_name, ".tmp") != NULL;
    if (d)
        closedir(d);
    return count;
}

/* Empties and removes a folder (one level of subfolders). */
static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[600];
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            remove_tree(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* ------------------------------------------------------------------------ */
/* Losses                                                                   */
/* ------------------------------------------------------------------------ */

static void fill_random(float *x, int64_t n, float scale, DlrtRng *rng) {
    for (int64_t i = 0; i < n; i++)
        x[i] = (2.0f * dlrt_rng_uniform(rng) - 1.0f) * scale;
}

static void test_cross_entropy_by_hand(Tally *t) {
    float two[2] = {0.0f, 0.0f}, g2[2];
    int32_t label0 = 0;
    CHECK(t, near(dlrt_cross_entropy(two, &label0, 1, 2, g2), log(2.0), 1e-15, 0));
    CHECK(t, g2[0] == -0.5f && g2[1] == 0.5f);

    float three[3] = {1.0f, 2.0f, 3.0f}, g3[3];
    int32_t label2 = 2;
    double want = log(exp(1.0) + exp(2.0) + exp(3.0)) - 3.0;
    CHECK(t, near(dlrt_cross_entropy(three, &label2, 1, 3, g3), want, 1e-14, 0));
    double sum = exp(1.0) + exp(2.0) + exp(3.0);
    CHECK(t, near(g3[0], exp(1.0) / sum, 1e-7, 0) && near(g3[1], exp(2.0) / sum, 1e-7, 0) &&
                 near(g3[2], exp(3.0) / sum - 1.0, 1e-7, 0));

    /* two rows: the mean, and gradients divided by n */
    float rows[4] = {0.0f, 0.0f, 0.0f, 0.0f}, g4[4];
    int32_t labels[2] = {0, 1};
    CHECK(t, near(dlrt_cross_entropy(rows, labels, 2, 2, g4), log(2.0), 1e-15, 0));
    CHECK(t, g4[0] == -0.25f && g4[1] == 0.25f && g4[2] == 0.25f && g4[3] == -0.25f);
    /* grad may be NULL */
    CHECK(t, near(dlrt_cross_entropy(rows, labels, 2, 2, NULL), log(2.0), 1e-15, 0));
    /* one class: always right */
    CHECK(t, dlrt_cross_entropy(three, &label0, 1, 1, g3) == 0.0 && g3[0] == 0.0f);
}

/* Gradients against central differences of the loss (in double). */
static void test_cross_entropy_gradient(Tally *t) {
    enum { N = 4, C = 7 };
    DlrtRng rng;
    dlrt_rng_seed(&rng, 42);
    float x[N * C], g[N * C];
    int32_t y[N] = {0, 6, 3, 3};
    fill_random(x, N * C, 3.0f, &rng);
    dlrt_cross_entropy(x, y, N, C, g);
    int bad = 0;
    for (int i = 0; i < N * C; i++) {
        float saved = x[i];
        float hi = saved + 1e-3f, lo = saved - 1e-3f;
        x[i] = hi;
        double lhi = dlrt_cross_entropy(x, y, N, C, NULL);
        x[i] = lo;
        double llo = dlrt_cross_entropy(x, y, N, C, NULL);
        x[i] = saved;
        double numeric = (lhi - llo) / ((double)hi - (double)lo);
        bad += !near(g[i], numeric, 1e-4, 1e-6);
    }
    CHECK(t, bad == 0);
    double rowsum = 0.0;
    for (int j = 0; j < C; j++)
        rowsum += g[j];
    CHECK(t, fabs(rowsum) < 1e-7);
}

static bool all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return false;
    return true;
}

static void test_cross_entropy_extremes(Tally *t) {
    float x[3] = {1e30f, -1e30f, 0.0f}, g[3];
    int32_t y = 1;
    double loss = dlrt_cross_entropy(x, &y, 1, 3, g);
    CHECK(t, isfinite(loss) && near(loss, 2e30, 1e-7, 0));
    CHECK(t, g[0] == 1.0f && g[1] == -1.0f && g[2] == 0.0f);
    y = 0;
    CHECK(t, dlrt_cross_entropy(x, &y, 1, 3, g) == 0.0);
    CHECK(t, g[0] == 0.0f && g[1] == 0.0f && g[2] == 0.0f);

    float big[2] = {FLT_MAX, FLT_MAX};
    CHECK(t, near(dlrt_cross_entropy(big, &y, 1, 2, g), log(2.0), 1e-15, 0));
    float apart[2] = {-FLT_MAX, FLT_MAX};
    loss = dlrt_cross_entropy(apart, &y, 1, 2, g);
    CHECK(t, isfinite(loss) && near(loss, 2.0 * FLT_MAX, 1e-15, 0));
    CHECK(t, g[0] == -1.0f && g[1] == 1.0f);

    /* equal logits, many classes: log(classes), whatever their size */
    enum { C = 1000 };
    float same[C], gs[C];
    for (int j = 0; j < C; j++)
        same[j] = -3e38f;
    CHECK(t, near(dlrt_cross_entropy(same, &y, 1, C, gs), log((double)C), 1e-13, 0));

    /* rows of random magnitude, 1e-30 to 1e38: never negative, never NaN */
    enum { N = 200, K = 10 };
    float r[N * K], gr[N * K];
    int32_t labels[N];
    DlrtRng rng;
    dlrt_rng_seed(&rng, 7);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float scale = powf(10.0f, -30.0f + 68.0f * dlrt_rng_uniform(&rng));
        fill_random(r + i * K, K, scale, &rng);
        labels[i] = (int32_t)dlrt_rng_below(&rng, K);
        double one = dlrt_cross_entropy(r + i * K, &labels[i], 1, K, gr + i * K);
        bad += !(one >= 0.0 && isfinite(one));
    }
    CHECK(t, bad == 0);
    loss = dlrt_cross_entropy(r, labels, N, K, gr);
    CHECK(t, loss >= 0.0 && isfinite(loss) && all_finite(gr, N * K));
}

static void test_cross_entropy_bad_labels(Tally *t) {
    float x[6] = {1, 2, 3, 4, 5, 6}, g[6] = {9, 9, 9, 9, 9, 9};
    int32_t y[2] = {0, 3};
    CHECK(t, isnan(dlrt_cross_entropy(x, y, 2, 3, g)));
    CHECK(t, g[0] == 0.0f && g[5] == 0.0f);
    y[1] = -1;
    CHECK(t, isnan(dlrt_cross_entropy(x, y, 2, 3, NULL)));
    CHECK(t, dlrt_cross_entropy(x, y, 0, 3, g) == 0.0);
}

static void test_mse(Tally *t) {
    float p[2] = {1.0f, 2.0f}, z[2] = {0.0f, 0.0f}, g[2];
    CHECK(t, dlrt_mse(p, z, 1, 2, g) == 2.5);
    CHECK(t, g[0] == 1.0f && g[1] == 2.0f);
    CHECK(t, dlrt_mse(p, z, 2, 1, NULL) == 2.5);
    CHECK(t, dlrt_mse(p, p, 1, 2, g) == 0.0 && g[0] == 0.0f && g[1] == 0.0f);
    CHECK(t, dlrt_mse(p, z, 0, 2, g) == 0.0);

    enum { N = 3, S = 5 };
    DlrtRng rng;
    dlrt_rng_seed(&rng, 3);
    float x[N * S], y[N * S], gx[N * S];
    fill_random(x, N * S, 2.0f, &rng);
    fill_random(y, N * S, 2.0f, &rng);
    dlrt_mse(x, y, N, S, gx);
    int bad = 0;
    for (int i = 0; i < N * S; i++) {
        float saved = x[i], hi = saved + 1e-3f, lo = saved - 1e-3f;
        x[i] = hi;
        double lhi = dlrt_mse(x, y, N, S, NULL);
        x[i] = lo;
        double llo = dlrt_mse(x, y, N, S, NULL);
        x[i] = saved;
        bad += !near(gx[i], (lhi - llo) / ((double)hi - (double)lo), 1e-5, 1e-7);
    }
    CHECK(t, bad == 0);
    float huge[1] = {FLT_MAX}, tiny[1] = {-FLT_MAX};
    CHECK(t, isfinite(dlrt_mse(huge, tiny, 1, 1, g)) && g[0] == INFINITY);
}

static void test_count_correct(Tally *t) {
    float x[9] = {1, 3, 3,    /* a tie: the first of the two wins */
                  5, 5, 5,    /* all equal: class 0 */
                  -1, -2, 0};
    int32_t right[3] = {1, 0, 2}, wrong[3] = {2, 1, 0};
    CHECK(t, dlrt_count_correct(x, right, 3, 3) == 3);
    CHECK(t, dlrt_count_correct(x, wrong, 3, 3) == 0);
    int32_t out_of_range[3] = {7, -1, 2};
    CHECK(t, dlrt_count_correct(x, out_of_range, 3, 3) == 1);
    CHECK(t, dlrt_count_correct(x, right, 0, 3) == 0);
    int32_t zero = 0;
    CHECK(t, dlrt_count_correct(x, &zero, 1, 1) == 1);
}

/* ------------------------------------------------------------------------ */
/* Checkpoints: saving and loading back                                     */
/* ------------------------------------------------------------------------ */

/* The demo checkpoint: every dtype, ranks 0 to 6, an empty tensor. */
typedef struct Demo {
    float w[8], b[2], empty[1];
    double table[6];
    int64_t step;
    int32_t ids[3];
    uint8_t mask[6];
    DlrtTensor t[7];
} Demo;

static void demo_init(Demo *d) {
    for (int i = 0; i < 8; i++)
        d->w[i] = (float)(i - 4) * 0.25f;
    d->b[0] = 0.5f;
    d->b[1] = -1.5f;
    d->empty[0] = 0.0f;
    const double table[6] = {0.1, -0.2, 1e-300, 3.141592653589793, -2.5, 1e300};
    memcpy(d->table, table, sizeof table);
    d->step = 1234567890123;
    d->ids[0] = -1;
    d->ids[1] = 0;
    d->ids[2] = INT32_MAX;
    const uint8_t mask[6] = {0, 1, 2, 127, 254, 255};
    memcpy(d->mask, mask, sizeof mask);
    DlrtTensor t[7] = {
        {.name = "c1.weight", .dtype = DLRT_F32, .rank = 4, .dims = {2, 1, 2, 2}, .data = d->w},
        {.name = "c1.bias", .dtype = DLRT_F32, .rank = 1, .dims = {2}, .data = d->b},
        {.name = "table", .dtype = DLRT_F64, .rank = 2, .dims = {2, 3}, .data = d->table},
        {.name = "step", .dtype = DLRT_I64, .rank = 0, .data = &d->step},
        {.name = "ids", .dtype = DLRT_I32, .rank = 1, .dims = {3}, .data = d->ids},
        {.name = "mask", .dtype = DLRT_U8, .rank = 6, .dims = {1, 2, 1, 3, 1, 1},
         .data = d->mask},
        {.name = "empty", .dtype = DLRT_F32, .rank = 2, .dims = {0, 3}, .data = d->empty},
    };
    memcpy(d->t, t, sizeof t);
}

static const DlrtMeta demo_meta[2] = {
    {.key = "network", .value = "demo"},
    {.key = "dlc_version", .value = "0.1.0"},
};

/* A Demo with the same shapes and garbage values, to load into. */
static void demo_blank(Demo *d) {
    demo_init(d);
    memset(d->w, 0x55, sizeof d->w);
    memset(d->b, 0x55, sizeof d->b);
    memset(d->table, 0x55, sizeof d->table);
    memset(&d->step, 0x55, sizeof d->step);
    memset(d->ids, 0x55, sizeof d->ids);
    memset(d->mask, 0x55, sizeof d->mask);
}

static bool demo_equal(const Demo *a, const Demo *b) {
    return memcmp(a->w, b->w, sizeof a->w) == 0 && memcmp(a->b, b->b, sizeof a->b) == 0 &&
           memcmp(a->table, b->table, sizeof a->table) == 0 && a->step == b->step &&
           memcmp(a->ids, b->ids, sizeof a->ids) == 0 &&
           memcmp(a->mask, b->mask, sizeof a->mask) == 0;
}

static uint64_t read_u64le(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void test_round_trip(Tally *t) {
    char path[512];
    tpath(t, "demo.safetensors", path, sizeof path);
    Demo d, back;
    demo_init(&d);
    DlrtError err = {0};
    CHECK_ERR(t, dlrt_save_safetensors(path, d.t, 7, demo_meta, 2, &err), &err, DLRT_OK, "");

    /* the layout: a padded header, the data 8-aligned and in order */
    size_t len;
    unsigned char *raw = read_all(path, &len);
    CHECK(t, raw != NULL && len >= 8);
    if (raw && len >= 8) {
        uint64_t n = read_u64le(raw);
        size_t data = 32 + 8 + 48 + 8 + 12 + 6;
        CHECK(t, n % 8 == 0 && len == 8 + n + data);
        const char *start = "{\"__metadata__\":{\"network\":\"demo\",\"dlc_version\":\"0.1.0\"},"
                            "\"c1.weight\":{\"dtype\":\"F32\",\"shape\":[2,1,2,2],"
                            "\"data_offsets\":[0,32]}";
        CHECK(t, len > 8 + strlen(start) && memcmp(raw + 8, start, strlen(start)) == 0);
        CHECK(t, n > 0 && (raw[8 + n - 1] == '}' || raw[8 + n - 1] == ' '));
        CHECK(t, len == 8 + n + data && memcmp(raw + 8 + n, d.w, sizeof d.w) == 0 &&
                     memcmp(raw + len - 6, d.mask, 6) == 0);
    }
    free(raw);

    /* permissions of any new file: 0666 less the umask */
    struct stat st;
    mode_t mask = umask(022);
    umask(mask);
    CHECK(t, stat(path, &st) == 0 && (st.st_mode & 0777) == (0666 & ~mask));

    demo_blank(&back);
    DlrtMeta *meta = NULL;
    int nmeta = -1;
    CHECK_ERR(t, dlrt_load_safetensors(path, back.t, 7, &meta, &nmeta, &err), &err, DLRT_OK,
              "");
    CHECK(t, demo_equal(&d, &back));
    CHECK(t, nmeta == 2 && meta && strcmp(meta[0].key, "network") == 0 &&
                 strcmp(meta[0].value, "demo") == 0 &&
                 strcmp(meta[1].key, "dlc_version") == 0 &&
                 strcmp(meta[1].value, "0.1.0") == 0);
    dlrt_meta_free(meta, nmeta);

    /* without metadata asked for, and with the tensors in another order */
    demo_blank(&back);
    DlrtTensor reversed[7];
    for (int i = 0; i < 7; i++)
        reversed[i] = back.t[6 - i];
    CHECK_ERR(t, dlrt_load_safetensors(path, reversed, 7, NULL, NULL, &err), &err, DLRT_OK,
              "");
    CHECK(t, demo_equal(&d, &back));
    CHECK(t, count_temp_files(t->dir) == 0);
}

static void test_empty_checkpoints(Tally *t) {
    char path[512];
    tpath(t, "empty.safetensors", path, sizeof path);
    DlrtError err = {0};
    /* no metadata: no __metadata__ in the header, and none read back */
    float v = 2.5f, w = 0.0f;
    DlrtTensor one = {.name = "v", .dtype = DLRT_F32, .rank = 0, .data = &v};
    CHECK_ERR(t, dlrt_save_safetensors(path, &one, 1, NULL, 0, &err), &err, DLRT_OK, "");
    size_t len;
    unsigned char *raw = read_all(path, &len);
    const char *header = "{\"v\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}";
    size_t padded = (strlen(header) + 7) / 8 * 8;
    CHECK(t, raw && len == 8 + padded + 4 && read_u64le(raw) == padded &&
                 memcmp(raw + 8, header, strlen(header)) == 0);
    free(raw);
    DlrtMeta dummy, *meta = &dummy;
    int nmeta = 5;
    one.data = &w;
    CHECK_ERR(t, dlrt_load_safetensors(path, &one, 1, &meta, &nmeta, &err), &err, DLRT_OK, "");
    CHECK(t, w == 2.5f && meta == NULL && nmeta == 0);

    /* no tensors at all */
    CHECK_ERR(t, dlrt_save_safetensors(path, NULL, 0, NULL, 0, &err), &err, DLRT_OK, "");
    CHECK(t, file_holds_bytes(path, "\x08\0\0\0\0\0\0\0{}      ", 16));
    CHECK_ERR(t, dlrt_load_safetensors(path, NULL, 0, NULL, NULL, &err), &err, DLRT_OK, "");

    /* an empty __metadata__ object, as other writers may leave */
    CHECK(t, write_header(path, "{\"__metadata__\":{}}", NULL, 0));
    CHECK_ERR(t, dlrt_load_safetensors(path, NULL, 0, &meta, &nmeta, &err), &err, DLRT_OK, "");
    CHECK(t, meta == NULL && nmeta == 0);
}

static bool meta_equal(const DlrtMeta *a, int na, const DlrtMeta *b, int nb) {
    if (na != nb)
        return false;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i].key, b[i].key) != 0 || strcmp(a[i].value, b[i].value) != 0)
            return false;
    return true;
}

static void test_metadata_escapes(Tally *t) {
    char path[512];
    tpath(t, "meta.safetensors", path, sizeof path);
    const DlrtMeta meta[] = {
        {.key = "quote\"d", .value = "back\\slash \\\" \"\\"},
        {.key = "control", .value = "tab\tnl\ncr\rff\fbs\b\x01\x1f\x7f/end"},
        {.key = "unicode é ✓", .value = "héllo ✓ 😀 \xe2\x80\xa8"},
        {.key = "", .value = ""},
    };
    uint8_t byte = 7, back = 0;
    DlrtTensor one = {.name = "naïve.λ", .dtype = DLRT_U8, .rank = 1, .dims = {1},
                      .data = &byte};
    DlrtError err = {0};
    CHECK_ERR(t, dlrt_save_safetensors(path, &one, 1, meta, 4, &err), &err, DLRT_OK, "");
    size_t len;
    char *raw = (char *)read_all(path, &len);
    CHECK(t, raw && len > 8);
    if (raw) {
        raw[len - 1] = '\0';
        CHECK(t, strstr(raw + 8, "\"quote\\\"d\":\"back\\\\slash \\\\\\\" \\\"\\\\\"") != NULL);
        CHECK(t, strstr(raw + 8, "tab\\tnl\\ncr\\rff\\fbs\\b\\u0001\\u001f\x7f/end") != NULL);
        CHECK(t, strstr(raw + 8, "\"unicode é ✓\":\"héllo ✓ 😀") != NULL);
    }
    free(raw);
    DlrtMeta *got = NULL;
    int ngot = 0;
    one.data = &back;
    CHECK_ERR(t, dlrt_load_safetensors(path, &one, 1, &got, &ngot, &err), &err, DLRT_OK, "");
    CHECK(t, back == 7 && meta_equal(meta, 4, got, ngot));
    dlrt_meta_free(got, ngot);

    /* escapes as other writers (Python's json) produce them */
    const char *header =
        "{\"__metadata__\":{\"a\\/b\":\"\\u00e9\\u2713 \\ud83d\\ude00 \\\"\\\\\\n\","
        "\"\\u0041\\u00DF\":\"x\\ty\"},"
        " \"na\\u00efve.\\u03bb\" : {\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}\n}";
    CHECK(t, write_header(path, header, &byte, 1));
    CHECK_ERR(t, dlrt_load_safetensors(path, &one, 1, &got, &ngot, &err), &err, DLRT_OK, "");
    const DlrtMeta want[] = {{.key = "a/b", .value = "é✓ 😀 \"\\\n"},
                             {.key = "Aß", .value = "x\ty"}};
    CHECK(t, meta_equal(want, 2, got, ngot));
    dlrt_meta_free(got, ngot);
}

/* ------------------------------------------------------------------------ */
/* Checkpoints: atomic saves                                                */
/* ------------------------------------------------------------------------ */

static void expect_save_error(Tally *t, const char *path, const DlrtTensor *tensors, int n,
                              const DlrtMeta *meta, int nmeta, DlrtStatus want,
                              const char *text, int line) {
    DlrtError err = {0};
    check_err(t, dlrt_save_safetensors(path, tensors, n, meta, nmeta, &err), &err, want,
              text, line);
    check(t, file_holds(path, "OLD"), "the old file survives", line);
}

static void test_atomic_saves(Tally *t) {
    char path[512], nowhere[512], sub[512];
    tpath(t, "keep.safetensors", path, sizeof path);
    tpath(t, "no/such/dir/x.safetensors", nowhere, sizeof nowhere);
    tpath(t, "a_folder", sub, sizeof sub);
    CHECK(t, write_bytes(path, "OLD", 3));
    float v[2] = {1, 2};
    DlrtTensor ok = {.name = "v", .dtype = DLRT_F32, .rank = 1, .dims = {2}, .data = v};
    DlrtTensor bad[2] = {ok, ok};
    DlrtError err = {0};

    CHECK_ERR(t, dlrt_save_safetensors(nowhere, &ok, 1, NULL, 0, &err), &err, DLRT_E_IO,
              "No such file or directory");
    CHECK(t, mkdir(sub, 0777) == 0);
    CHECK_ERR(t, dlrt_save_safetensors(sub, &ok, 1, NULL, 0, &err), &err, DLRT_E_IO,
              "cannot write");
    struct stat st;
    CHECK(t, stat(sub, &st) == 0 && S_ISDIR(st.st_mode));

    expect_save_error(t, path, bad, 2, NULL, 0, DLRT_E_ARG, "two tensors are named 'v'",
                      __LINE__);
    bad[1].name = NULL;
    expect_save_error(t, path, bad, 2, NULL, 0, DLRT_E_ARG, "has no name", __LINE__);
    bad[1] = ok;
    bad[1].name = "w";
    bad[1].dims[0] = -2;
    expect_save_error(t, path, bad, 2, NULL, 0, DLRT_E_ARG, "negative", __LINE__);
    bad[1].dims[0] = 2;
    bad[1].rank = DLRT_MAX_RANK + 1;
    expect_save_error(t, path, bad, 2, NULL, 0, DLRT_E_ARG, "rank 7", __LINE__);
    bad[1].rank = 1;
    bad[1].data = NULL;
    expect_save_error(t, path, bad, 2, NULL, 0, DLRT_E_ARG, "has no data", __LINE__);
    bad[1].data = v;
    bad[1].dtype = (DlrtDType)9;
    expect_save_error(t, path, bad, 2, NULL, 0, DLRT_E_ARG, "invalid dtype", __LINE__);
    bad[1].dtype = DLRT_F32;
    bad[1].name = "__metadata__";
    expect_save_error(t, path, bad, 2, NULL, 0, DLRT_E_ARG, "__metadata__", __LINE__);
    bad[1].name = "bad\xff";
    expect_save_error(t, path, bad, 2, NULL, 0, DLRT_E_ARG, "UTF-8", __LINE__);
    bad[1].name = "w";
    bad[1].dims[0] = INT64_MAX / 2;
    expect_save_error(t, path, bad, 2, NULL, 0, DLRT_E_ARG, "too large", __LINE__);
    bad[1].dims[0] = 2;
    expect_save_error(t, path, bad, -1, NULL, 0, DLRT_E_ARG, "tensor list", __LINE__);
    const DlrtMeta bad_meta[2] = {{.key = "k", .value = "\xc0\xaf"}, {.key = "k", .value = "v"}};
    expect_save_error(t, path, bad, 2, bad_meta, 1, DLRT_E_ARG, "UTF-8", __LINE__);
    CHECK(t, count_temp_files(t->dir) == 0);
}

static void test_atomic_replace(Tally *t) {
    char path[512];
    tpath(t, "replace.safetensors", path, sizeof path);
    CHECK(t, write_bytes(path, "OLD", 3));
    float v[2] = {1, 2};
    DlrtTensor ok = {.name = "v", .dtype = DLRT_F32, .rank = 1, .dims = {2}, .data = v};
    const DlrtMeta twice[2] = {{.key = "k", .value = "1"}, {.key = "k", .value = "2"}};
    DlrtError err = {0};
    CHECK_ERR(t, dlrt_save_safetensors(path, &ok, 1, twice, 2, &err), &err, DLRT_E_ARG,
              "two metadata entries are named 'k'");
    CHECK(t, file_holds(path, "OLD"));
    CHECK_ERR(t, dlrt_save_safetensors(path, &ok, 1, twice, 1, &err), &err, DLRT_OK, "");
    CHECK(t, !file_holds(path, "OLD"));
    float back[2] = {0, 0};
    ok.data = back;
    CHECK_ERR(t, dlrt_load_safetensors(path, &ok, 1, NULL, NULL, &err), &err, DLRT_OK, "");
    CHECK(t, back[0] == 1 && back[1] == 2);
    /* a device is written into, never replaced */
    CHECK_ERR(t, dlrt_save_safetensors("/dev/null", &ok, 1, NULL, 0, &err), &err, DLRT_OK, "");
    struct stat st;
    CHECK(t, stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
    CHECK(t, count_temp_files(t->dir) == 0);
}

/* ------------------------------------------------------------------------ */
/* Checkpoints: load errors                                                 */
/* ------------------------------------------------------------------------ */

/* What the load tests expect: w F32 [2,2] and b F32 [2] in 24 bytes. */
static const char good_header[] =
    "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}";
static const float good_data[6] = {1, 2, 3, 4, 5, 6};

/* Loads path as w and b and checks the error; the tensors and the metadata
 * must be left untouched. */
static void expect_load_error(Tally *t, const char *path, DlrtStatus want, const char *text,
                              int line) {
    float w[4], b[2];
    memset(w, 0x55, sizeof w);
    memset(b, 0x55, sizeof b);
    DlrtTensor tensors[2] = {
        {.name = "w", .dtype = DLRT_F32, .rank = 2, .dims = {2, 2}, .data = w},
        {.name = "b", .dtype = DLRT_F32, .rank = 1, .dims = {2}, .data = b},
    };
    DlrtMeta *meta = NULL;
    int nmeta = 0;
    DlrtError err = {0};
    DlrtStatus got = dlrt_load_safetensors(path, tensors, 2, &meta, &nmeta, &err);
    check_err(t, got, &err, want, text, line);
    if (got == DLRT_OK) {
        check(t, memcmp(w, good_data, sizeof w) == 0 && memcmp(b, good_data + 4, sizeof b) == 0,
              "values loaded", line);
        dlrt_meta_free(meta, nmeta);
        return;
    }
    unsigned char pattern[16];
    memset(pattern, 0x55, sizeof pattern);
    check(t, memcmp(w, pattern, sizeof w) == 0 && memcmp(b, pattern, sizeof b) == 0,
          "tensors untouched after an error", line);
    check(t, meta == NULL && nmeta == 0, "no metadata after an error", line);
    check(t, strstr(err.message, path) == err.message || got == DLRT_E_IO,
          "the message starts with the path", line);
}

/* A header (data: the good 24 bytes) and the error it must give. */
typedef struct BadHeader {
    const char *header;
    DlrtStatus status;
    const char *text;
} BadHeader;

#define GOOD_W "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"
#define GOOD_B "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}"
#define B_WITH(shape, offsets) "\"b\":{\"dtype\":\"F32\",\"shape\":" shape ",\"data_offsets\":" offsets "}"

static const BadHeader bad_headers[] = {
    /* syntax */
    {"", DLRT_E_FORMAT, "must start with '{'"},
    {"[]", DLRT_E_FORMAT, "must start with '{'"},
    {" {" GOOD_W "," GOOD_B "}", DLRT_E_FORMAT, "must start with '{'"},
    {"{", DLRT_E_FORMAT, "at byte 9: expected a string"},
    {"{" GOOD_W "," GOOD_B, DLRT_E_FORMAT, "expected ',' or '}'"},
    {"{\"w\"}", DLRT_E_FORMAT, "expected ':'"},
    {"{\"w\":}", DLRT_E_FORMAT, "expected '{'"},
    {"{\"w\":true}", DLRT_E_FORMAT, "expected '{'"},
    {"{\"w\":null," GOOD_B "}", DLRT_E_FORMAT, "expected '{'"},
    {"{" GOOD_W "," GOOD_B ",}", DLRT_E_FORMAT, "expected a string"},
    {"{" GOOD_W ";" GOOD_B "}", DLRT_E_FORMAT, "expected ',' or '}'"},
    {"{" GOOD_W "," GOOD_B "} x", DLRT_E_FORMAT, "text after the header's object"},
    {"{" GOOD_W "," GOOD_B "}{}", DLRT_E_FORMAT, "text after the header's object"},
    {"{\"w", DLRT_E_FORMAT, "unterminated string"},
    {"{\"w\\", DLRT_E_FORMAT, "unterminated string"},
    {"{\"w\\q\":1}", DLRT_E_FORMAT, "unknown escape"},
    {"{\"\\u12G4\":1}", DLRT_E_FORMAT, "four hex digits"},
    {"{\"\\u12\"}", DLRT_E_FORMAT, "four hex digits"},
    {"{\"\\ud800\":1}", DLRT_E_FORMAT, "high surrogate"},
    {"{\"\\ud800\\u0041\":1}", DLRT_E_FORMAT, "high surrogate"},
    {"{\"\\udc00\":1}", DLRT_E_FORMAT, "lone low surrogate"},
    {"{\"a\\u0000b\":1}", DLRT_E_FORMAT, "NUL"},
    {"{\"\xff\":1}", DLRT_E_FORMAT, "UTF-8"},
    {"{\"\xc0\xaf\":1}", DLRT_E_FORMAT, "UTF-8"},
    {"{\"\xed\xa0\x80\":1}", DLRT_E_FORMAT, "UTF-8"},
    {"{\"\xf4\x90\x80\x80\":1}", DLRT_E_FORMAT, "UTF-8"},
    {"{\"\xe2\x82\":1}", DLRT_E_FORMAT, "UTF-8"},
    {"{\"\xe2\x82", DLRT_E_FORMAT, "UTF-8"},
    {"{\"a\tb\":1}", DLRT_E_FORMAT, "control character"},
    {"{\"\":{}}", DLRT_E_FORMAT, "empty name"},
    /* numbers */
    {"{" GOOD_W "," B_WITH("[2]", "[016,24]") "}", DLRT_E_FORMAT, "leading zero"},
    {"{" GOOD_W "," B_WITH("[2]", "[-16,24]") "}", DLRT_E_FORMAT, "negative"},
    {"{" GOOD_W "," B_WITH("[2]", "[16.0,24]") "}", DLRT_E_FORMAT, "expected an integer"},
    {"{" GOOD_W "," B_WITH("[2]", "[16,2.4e1]") "}", DLRT_E_FORMAT, "expected an integer"},
    {"{" GOOD_W "," B_WITH("[2]", "[16,24e0]") "}", DLRT_E_FORMAT, "expected an integer"},
    {"{" GOOD_W "," B_WITH("[2]", "[16,+24]") "}", DLRT_E_FORMAT, "expected a number"},
    {"{" GOOD_W "," B_WITH("[2]", "[16,\"24\"]") "}", DLRT_E_FORMAT, "expected a number"},
    {"{" GOOD_W "," B_WITH("[2]", "[16,99999999999999999999]") "}", DLRT_E_FORMAT, "too large"},
    {"{" GOOD_W "," B_WITH("[2]", "[16,9223372036854775808]") "}", DLRT_E_FORMAT, "too large"},
    {"{" GOOD_W "," B_WITH("[2]", "[16 24]") "}", DLRT_E_FORMAT, "expected ',' or ']'"},
    {"{" GOOD_W "," B_WITH("[2]", "[16,24,32]") "}", DLRT_E_FORMAT, "two numbers"},
    {"{" GOOD_W "," B_WITH("[2]", "[16]") "}", DLRT_E_FORMAT, "two numbers"},
    {"{" GOOD_W "," B_WITH("[2]", "[]") "}", DLRT_E_FORMAT, "two numbers"},
    {"{" GOOD_W "," B_WITH("[2]", "16") "}", DLRT_E_FORMAT, "expected '['"},
    {"{" GOOD_W "," B_WITH("2", "[16,24]") "}", DLRT_E_FORMAT, "expected '['"},
    {"{" GOOD_W "," B_WITH("[[2]]", "[16,24]") "}", DLRT_E_FORMAT, "expected a number"},
    {"{" GOOD_W "," B_WITH("[2,]", "[16,24]") "}", DLRT_E_FORMAT, "expected a number"},
    {"{" GOOD_W "," B_WITH("[1,1,1,1,1,1,2]", "[16,24]") "}", DLRT_E_FORMAT, "rank above 6"},
    /* the fields of a tensor */
    {"{" GOOD_W ",\"b\":{\"shape\":[2],\"data_offsets\":[16,24]}}", DLRT_E_FORMAT,
     "needs dtype, shape and data_offsets"},
    {"{" GOOD_W ",\"b\":{}}", DLRT_E_FORMAT, "needs dtype, shape and data_offsets"},
    {"{" GOOD_W ",\"b\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],"
     "\"data_offsets\":[16,24]}}", DLRT_E_FORMAT, "a field given twice"},
    {"{" GOOD_W ",\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24],"
     "\"extra\":1}}", DLRT_E_FORMAT, "unknown field"},
    {"{" GOOD_W ",\"b\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[16,24]}}", DLRT_E_FORMAT,
     "expected a string"},
    {"{" GOOD_W ",\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[16,20]}}",
     DLRT_E_FORMAT, "tensor 'b' has dtype 'F16', which dlc does not support"},
    {"{" GOOD_W ",\"b\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
     DLRT_E_FORMAT, "dtype 'f32'"},
    /* metadata */
    {"{\"__metadata__\":{\"a\":1}," GOOD_W "," GOOD_B "}", DLRT_E_FORMAT, "must be a string"},
    {"{\"__metadata__\":{\"a\":{}}," GOOD_W "," GOOD_B "}", DLRT_E_FORMAT, "must be a string"},
    {"{\"__metadata__\":\"x\"," GOOD_W "," GOOD_B "}", DLRT_E_FORMAT, "expected '{'"},
    {"{\"__metadata__\":{\"a\"}}", DLRT_E_FORMAT, "expected ':'"},
    {"{\"__metadata__\":{\"a\":\"1\",}}", DLRT_E_FORMAT, "expected a string"},
    {"{\"__metadata__\":{}," GOOD_W ",\"__metadata__\":{}," GOOD_B "}", DLRT_E_FORMAT,
     "__metadata__ given twice"},
    {"{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\",\"a\":\"3\"}," GOOD_W "," GOOD_B "}",
     DLRT_E_FORMAT, "the metadata key 'a' is given twice"},
    /* offsets */
    {"{" GOOD_W "," B_WITH("[2]", "[16,20]") "}", DLRT_E_FORMAT,
     "tensor 'b' has data_offsets [16,20], which do not span the 8 bytes of F32 [2]"},
    {"{" GOOD_W "," B_WITH("[2]", "[24,16]") "}", DLRT_E_FORMAT, "do not span"},
    {"{" GOOD_W "," B_WITH("[2]", "[12,20]") "}", DLRT_E_FORMAT,
     "tensor 'b' starts at data offset 12, expected 16"},
    {"{" GOOD_W "," B_WITH("[2]", "[8,16]") "}", DLRT_E_FORMAT, "starts at data offset 8"},
    {"{" GOOD_W "," B_WITH("[2]", "[20,28]") "}", DLRT_E_FORMAT, "starts at data offset 20"},
    {"{" GOOD_W "," B_WITH("[2]", "[0,8]") "}", DLRT_E_FORMAT,
     "tensor 'w' starts at data offset 0, expected 8"},
    {"{" GOOD_W "," B_WITH("[2]", "[1000,1008]") "}", DLRT_E_FORMAT, "starts at data offset 1000"},
    {"{" GOOD_W "," B_WITH("[2,4611686018427387904]", "[16,24]") "}", DLRT_E_FORMAT,
     "shape too large"},
    {"{" GOOD_W "," B_WITH("[4611686018427387904,4]", "[16,24]") "}", DLRT_E_FORMAT,
     "shape too large"},
    /* names */
    {"{" GOOD_W ",\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
     DLRT_E_FORMAT, "two tensors are named 'w'"},
    /* against the network */
    {"{" GOOD_W ",\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]}}",
     DLRT_E_SHAPE, "tensor 'b' has dtype I64, the network expects F32"},
    {"{" GOOD_W "," B_WITH("[1,2]", "[16,24]") "}", DLRT_E_SHAPE,
     "tensor 'b' has shape [1,2], the network expects [2]"},
    {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}," GOOD_B "}",
     DLRT_E_SHAPE, "tensor 'w' has shape [4], the network expects [2,2]"},
    {"{" GOOD_W ",\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
     DLRT_E_SHAPE, "missing tensor 'b'"},
    {"{\"c\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}}", DLRT_E_SHAPE,
     "missing tensors 'w', 'b'"},
    {"{" GOOD_W ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]},"
     "\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[20,24]}}", DLRT_E_SHAPE,
     "unexpected tensor 'x'"},
    /* and some that are fine */
    {"{" GOOD_B "," GOOD_W "}", DLRT_OK, ""},
    {"{\"b\":{\"data_offsets\":[16,24],\"shape\":[2],\"dtype\":\"F32\"}," GOOD_W "}", DLRT_OK, ""},
    {"{ \"w\" : { \"dtype\" : \"F32\" , \"shape\" : [ 2 , 2 ] , \"data_offsets\" : [ 0 , 16 ] }"
     " ,\r\n" GOOD_B " } \t\r\n  ", DLRT_OK, ""},
    {"{\"__metadata__\":{\"format\":\"pt\"}," GOOD_W "," GOOD_B "}", DLRT_OK, ""},
};

static void test_bad_headers(Tally *t) {
    char path[512];
    tpath(t, "bad.safetensors", path, sizeof path);
    for (size_t i = 0; i < sizeof bad_headers / sizeof bad_headers[0]; i++) {
        const BadHeader *b = &bad_headers[i];
        size_t len = strlen(b->header);
        CHECK(t, write_raw(path, len, b->header, len, good_data, sizeof good_data));
        int failed = t->failed;
        expect_load_error(t, path, b->status, b->text, __LINE__);
        if (t->failed != failed)
            fprintf(stderr, "    in bad_headers[%zu]: %s\n", i, b->header);
    }
}

static void test_bad_files(Tally *t) {
    char path[512], missing[512], folder[512];
    tpath(t, "file.safetensors", path, sizeof path);
    tpath(t, "missing.safetensors", missing, sizeof missing);
    tpath(t, "folder.safetensors", folder, sizeof folder);
    expect_load_error(t, missing, DLRT_E_IO, "cannot open", __LINE__);
    CHECK(t, mkdir(folder, 0777) == 0);
    expect_load_error(t, folder, DLRT_E_IO, "not a regular file", __LINE__);

    CHECK(t, write_bytes(path, "", 0));
    expect_load_error(t, path, DLRT_E_FORMAT, "truncated: 0 bytes", __LINE__);
    CHECK(t, write_bytes(path, "\x10\0\0\0\0", 5));
    expect_load_error(t, path, DLRT_E_FORMAT, "truncated: 5 bytes", __LINE__);
    /* the header size larger than the file */
    CHECK(t, write_raw(path, 1000, good_header, strlen(good_header), good_data, 24));
    expect_load_error(t, path, DLRT_E_FORMAT, "the header size, 1000 bytes, is larger than "
                      "the file", __LINE__);
    CHECK(t, write_raw(path, UINT64_MAX, good_header, strlen(good_header), good_data, 24));
    expect_load_error(t, path, DLRT_E_FORMAT, "larger than the file", __LINE__);
    CHECK(t, write_raw(path, strlen(good_header) + 25, good_header, strlen(good_header),
                       good_data, 24));
    expect_load_error(t, path, DLRT_E_FORMAT, "larger than the file", __LINE__);
    /* truncated data, and bytes after it */
    CHECK(t, write_header(path, good_header, good_data, 20));
    expect_load_error(t, path, DLRT_E_FORMAT, "truncated: tensor 'b' ends at data offset 24, "
                      "the file holds 20 bytes of data", __LINE__);
    CHECK(t, write_header(path, good_header, good_data, 0));
    expect_load_error(t, path, DLRT_E_FORMAT, "truncated", __LINE__);
    const float more[7] = {1, 2, 3, 4, 5, 6, 7};
    CHECK(t, write_header(path, good_header, more, sizeof more));
    expect_load_error(t, path, DLRT_E_FORMAT, "4 bytes after the last tensor's data", __LINE__);
    /* a header size above the limit, in a (sparse) file that large */
    FILE *f = fopen(path, "wb");
    CHECK(t, f && fwrite("\x01\xe1\xf5\x05\0\0\0\0", 1, 8, f) == 8);
    if (f) {
        CHECK(t, ftruncate(fileno(f), 100000100) == 0);
        fclose(f);
    }
    expect_load_error(t, path, DLRT_E_FORMAT, "100000001 bytes, is larger than the limit",
                      __LINE__);
    /* padding that is not spaces */
    char nul_padded[sizeof good_header + 8];
    memcpy(nul_padded, good_header, sizeof good_header);
    CHECK(t, write_raw(path, sizeof good_header, nul_padded, sizeof good_header, good_data, 24));
    expect_load_error(t, path, DLRT_E_FORMAT, "text after the header's object", __LINE__);
    CHECK(t, write_header(path, good_header, good_data, 24));
    expect_load_error(t, path, DLRT_OK, "", __LINE__);
}

/* The message the documentation shows, whole. */
static void test_shape_message(Tally *t) {
    char path[512], want[700];
    tpath(t, "checkpoint.safetensors", path, sizeof path);
    static float w[6 * 25];
    DlrtTensor small = {.name = "c1.weight", .dtype = DLRT_F32, .rank = 4, .dims = {6, 1, 3, 3},
                        .data = w};
    DlrtTensor large = small;
    large.dims[2] = large.dims[3] = 5;
    DlrtError err = {0};
    CHECK_ERR(t, dlrt_save_safetensors(path, &small, 1, NULL, 0, &err), &err, DLRT_OK, "");
    CHECK(t, dlrt_load_safetensors(path, &large, 1, NULL, NULL, &err) == DLRT_E_SHAPE);
    snprintf(want, sizeof want, "%s: tensor 'c1.weight' has shape [6,1,3,3], the network "
             "expects [6,1,5,5]", path);
    if (!CHECK(t, strcmp(err.message, want) == 0))
        fprintf(stderr, "    got \"%s\"\n", err.message);
    CHECK(t, err.status == DLRT_E_SHAPE);
}

static void test_bad_arguments(Tally *t) {
    char path[512];
    tpath(t, "args.safetensors", path, sizeof path);
    CHECK(t, write_header(path, good_header, good_data, 24));
    float w[4], b[2];
    DlrtTensor two[2] = {
        {.name = "w", .dtype = DLRT_F32, .rank = 2, .dims = {2, 2}, .data = w},
        {.name = "w", .dtype = DLRT_F32, .rank = 1, .dims = {2}, .data = b},
    };
    DlrtMeta *meta = NULL;
    DlrtError err = {0};
    CHECK_ERR(t, dlrt_load_safetensors(path, two, 2, &meta, NULL, &err), &err, DLRT_E_ARG,
              "without a count");
    CHECK_ERR(t, dlrt_load_safetensors(path, two, 2, NULL, NULL, &err), &err, DLRT_E_ARG,
              "two tensors are named 'w'");
    two[1].name = "b";
    two[1].data = NULL;
    CHECK_ERR(t, dlrt_load_safetensors(path, two, 2, NULL, NULL, &err), &err, DLRT_E_ARG,
              "has no data");
    CHECK_ERR(t, dlrt_load_safetensors(NULL, two, 2, NULL, NULL, &err), &err, DLRT_E_ARG,
              "no checkpoint path");
    CHECK_ERR(t, dlrt_save_safetensors("", two, 1, NULL, 0, &err), &err, DLRT_E_ARG,
              "no checkpoint path");
    /* a NULL err is allowed */
    CHECK(t, dlrt_load_safetensors(path, two, 2, NULL, NULL, NULL) == DLRT_E_ARG);
    two[1].data = b;
    CHECK(t, dlrt_load_safetensors(path, two, 2, NULL, NULL, NULL) == DLRT_OK);
    CHECK(t, dlrt_load_safetensors(path, two, 1, NULL, NULL, NULL) == DLRT_E_SHAPE);
}

/* Many missing tensors: as many names as fit, then "...". */
static void test_many_missing(Tally *t) {
    char path[512];
    tpath(t, "none.safetensors", path, sizeof path);
    DlrtError err = {0};
    CHECK_ERR(t, dlrt_save_safetensors(path, NULL, 0, NULL, 0, &err), &err, DLRT_OK, "");
    enum { N = 60 };
    char names[N][32];
    float v[N];
    DlrtTensor tensors[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "layer_%02d.weight", i);
        tensors[i] = (DlrtTensor){.name = names[i], .dtype = DLRT_F32, .rank = 0, .data = &v[i]};
    }
    CHECK_ERR(t, dlrt_load_safetensors(path, tensors, N, NULL, NULL, &err), &err, DLRT_E_SHAPE,
              "missing tensors 'layer_00.weight', 'layer_01.weight', ");
    size_t len = strlen(err.message);
    CHECK(t, len > 5 && strcmp(err.message + len - 5, ", ...") == 0);
    CHECK(t, strstr(err.message, "layer_59") == NULL);
}

/* Random damage to a valid file never crashes, leaks or half-loads. */
static void test_mutations(Tally *t) {
    char path[512];
    tpath(t, "mutant.safetensors", path, sizeof path);
    Demo d, back;
    demo_init(&d);
    DlrtError err = {0};
    CHECK_ERR(t, dlrt_save_safetensors(path, d.t, 7, demo_meta, 2, &err), &err, DLRT_OK, "");
    size_t len;
    unsigned char *orig = read_all(path, &len);
    if (!CHECK(t, orig != NULL))
        return;
    unsigned char *buf = malloc(len + 64);
    static const char alphabet[] = "{}[]\",:0123456789 \\u-.eF3U8I6_abcdefxyz\x01\x80\xff";
    DlrtRng rng;
    dlrt_rng_seed(&rng, 2024);
    int loaded = 0, bad = 0;
    for (int iter = 0; iter < 3000 && buf; iter++) {
        size_t n = len;
        memcpy(buf, orig, len);
        int edits = 1 + (int)dlrt_rng_below(&rng, 4);
        for (int e = 0; e < edits && n > 0; e++) {
            /* mostly in the size and the header, where the parser works */
            size_t span = dlrt_rng_below(&rng, 4) && n > 48 ? n - 24 : n;
            size_t at = (size_t)dlrt_rng_below(&rng, span);
            switch (dlrt_rng_below(&rng, 4)) {
            case 0: buf[at] = alphabet[dlrt_rng_below(&rng, sizeof alphabet - 1)]; break;
            case 1: buf[at] ^= (unsigned char)(1u << dlrt_rng_below(&rng, 8)); break;
            case 2: n = at; break;
            default:
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = alphabet[dlrt_rng_below(&rng, sizeof alphabet - 1)];
                n++;
            }
        }
        if (!write_bytes(path, buf, n))
            break;
        demo_blank(&back);
        DlrtMeta *meta = NULL;
        int nmeta = 0;
        DlrtStatus st = dlrt_load_safetensors(path, back.t, 7, &meta, &nmeta, &err);
        if (st == DLRT_OK)
            loaded++;
        else
            bad += err.message[0] == '\0' || meta != NULL || nmeta != 0;
        dlrt_meta_free(meta, nmeta);
        err.message[0] = '\0';
    }
    CHECK(t, bad == 0);
    CHECK(t, loaded < 3000);
    free(buf);
    free(orig);
}

static int run_unit_tests(void) {
    Tally t = {0};
    const char *tmp = getenv("TMPDIR");
    snprintf(t.dir, sizeof t.dir, "%s/test_checkpoint.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(t.dir)) {
        fprintf(stderr, "test_checkpoint: cannot create a folder in %s: %s\n",
                tmp && *tmp ? tmp : "/tmp", strerror(errno));
        return 1;
    }
    test_cross_entropy_by_hand(&t);
    test_cross_entropy_gradient(&t);
    test_cross_entropy_extremes(&t);
    test_cross_entropy_bad_labels(&t);
    test_mse(&t);
    test_count_correct(&t);
    test_round_trip(&t);
    test_empty_checkpoints(&t);
    test_metadata_escapes(&t);
    test_atomic_saves(&t);
    test_atomic_replace(&t);
    test_bad_headers(&t);
    test_bad_files(&t);
    test_shape_message(&t);
    test_bad_arguments(&t);
    test_many_missing(&t);
    test_mutations(&t);
    remove_tree(t.dir);
    printf("%d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Modes for lit tests                                                      */
/* ------------------------------------------------------------------------ */

static const char *const dtype_names[] = {"F32", "F64", "I32", "I64", "U8", "I8"};
static const size_t dtype_sizes[] = {4, 8, 4, 8, 1, 1};

static int64_t elements(const DlrtTensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= t->dims[d];
    return n;
}

/* NAME DTYPE [dims] values..., the format checkpoint_torch.py prints. */
static void print_tensor(const DlrtTensor *t) {
    printf("%s %s [", t->name, dtype_names[t->dtype]);
    for (int d = 0; d < t->rank; d++)
        printf("%s%" PRId64, d ? "," : "", t->dims[d]);
    printf("]");
    for (int64_t i = 0; i < elements(t); i++) {
        switch (t->dtype) {
        case DLRT_F32: printf(" %.9g", (double)((const float *)t->data)[i]); break;
        case DLRT_F64: printf(" %.17g", ((const double *)t->data)[i]); break;
        case DLRT_I32: printf(" %" PRId32, ((const int32_t *)t->data)[i]); break;
        case DLRT_I64: printf(" %" PRId64, ((const int64_t *)t->data)[i]); break;
        case DLRT_U8: printf(" %u", (unsigned)((const uint8_t *)t->data)[i]); break;
        case DLRT_I8: printf(" %d", (int)((const int8_t *)t->data)[i]); break;
        }
    }
    printf("\n");
}

static int write_demo(const char *path) {
    Demo d;
    demo_init(&d);
    DlrtError err;
    if (dlrt_save_safetensors(path, d.t, 7, demo_meta, 2, &err) != DLRT_OK) {
        fprintf(stderr, "error: %s\n", err.message);
        return 1;
    }
    return 0;
}

/* NAME:DTYPE:2x3 into t (the name points into spec, which it modifies). */
static bool parse_spec(char *spec, DlrtTensor *t) {
    char *dims = strrchr(spec, ':');
    if (!dims || dims == spec)
        return false;
    *dims++ = '\0';
    char *dtype = strrchr(spec, ':');
    if (!dtype)
        return false;
    *dtype++ = '\0';
    t->name = spec;
    t->dtype = DLRT_F32;
    while ((int)t->dtype <= DLRT_U8 && strcmp(dtype_names[t->dtype], dtype) != 0)
        t->dtype = (DlrtDType)(t->dtype + 1);
    if ((int)t->dtype > DLRT_U8)
        return false;
    t->rank = 0;
    for (char *p = dims; *p;) {
        char *end;
        if (t->rank == DLRT_MAX_RANK)
            return false;
        t->dims[t->rank++] = strtoll(p, &end, 10);
        if (end == p || (*end && *end != 'x'))
            return false;
        p = *end ? end + 1 : end;
    }
    return true;
}

static int read_checkpoint(const char *path, int n, char **specs) {
    DlrtTensor *t = calloc((size_t)n + 1, sizeof *t);
    int status = 1;
    if (!t)
        return 1;
    for (int i = 0; i < n; i++) {
        if (!parse_spec(specs[i], &t[i])) {
            fprintf(stderr, "test_checkpoint: bad tensor '%s' (NAME:DTYPE:2x3)\n", specs[i]);
            goto done;
        }
        t[i].data = calloc((size_t)elements(&t[i]) + 1, dtype_sizes[t[i].dtype]);
    }
    DlrtMeta *meta;
    int nmeta;
    DlrtError err;
    if (dlrt_load_safetensors(path, t, n, &meta, &nmeta, &err) != DLRT_OK) {
        fprintf(stderr, "error: %s: %s\n", dlrt_status_name(err.status), err.message);
        goto done;
    }
    for (int i = 0; i < nmeta; i++)
        printf("meta %s = %s\n", meta[i].key, meta[i].value);
    for (int i = 0; i < n; i++)
        print_tensor(&t[i]);
    dlrt_meta_free(meta, nmeta);
    status = 0;
done:
    for (int i = 0; i < n; i++)
        free(t[i].data);
    free(t);
    return status;
}

/* "ce": n classes, then n rows of a label and classes logits.
 * "mse": n size, then n*size predictions and n*size targets. */
static int run_loss(const char *kind, FILE *in) {
    long long n, size;
    if (fscanf(in, "%lld %lld", &n, &size) != 2 || n < 0 || size <= 0 || n > 1000000 ||
        size > 1000000) {
        fprintf(stderr, "test_checkpoint: expected N and a row size\n");
        return 1;
    }
    bool ce = strcmp(kind, "ce") == 0;
    float *x = calloc((size_t)(n * size) + 1, sizeof *x);
    float *y = calloc((size_t)(n * size) + 1, sizeof *y);
    float *g = calloc((size_t)(n * size) + 1, sizeof *g);
    int32_t *labels = calloc((size_t)n + 1, sizeof *labels);
    bool ok = x && y && g && labels;
    for (long long i = 0; ok && i < n * size; i++) {
        if (ce && i % size == 0)
            ok = fscanf(in, "%" SCNd32, &labels[i / size]) == 1;
        ok = ok && fscanf(in, "%f", &x[i]) == 1;
    }
    for (long long i = 0; ok && !ce && i < n * size; i++)
        ok = fscanf(in, "%f", &y[i]) == 1;
    if (ok) {
        double loss = ce ? dlrt_cross_entropy(x, labels, n, size, g)
                         : dlrt_mse(x, y, n, size, g);
        printf("loss %.17g\n", loss);
        for (long long i = 0; i < n * size; i++)
            printf("%.9g%s", (double)g[i], (i + 1) % size ? " " : "\n");
        if (ce)
            printf("correct %" PRId64 "\n", dlrt_count_correct(x, labels, n, size));
    } else {
        fprintf(stderr, "test_checkpoint: the input ends early or holds a non-number\n");
    }
    free(x);
    free(y);
    free(g);
    free(labels);
    return ok ? 0 : 1;
}

static int loss_mode(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[2], "ce") != 0 && strcmp(argv[2], "mse") != 0)) {
        fprintf(stderr, "usage: test_checkpoint loss ce|mse [FILE]\n");
        return 2;
    }
    FILE *in = argc > 3 ? fopen(argv[3], "r") : stdin;
    if (!in) {
        fprintf(stderr, "test_checkpoint: cannot open '%s': %s\n", argv[3], strerror(errno));
        return 1;
    }
    int status = run_loss(argv[2], in);
    if (in != stdin)
        fclose(in);
    return status;
}

int main(int argc, char **argv) {
    if (argc == 1)
        return run_unit_tests();
    if (strcmp(argv[1], "write") == 0 && argc == 3)
        return write_demo(argv[2]);
    if (strcmp(argv[1], "read") == 0 && argc >= 3)
        return read_checkpoint(argv[2], argc - 3, argv + 3);
    if (strcmp(argv[1], "loss") == 0)
        return loss_mode(argc, argv);
    fprintf(stderr, "usage: test_checkpoint [write PATH | read PATH NAME:DTYPE:DIMS... | "
                    "loss ce|mse [FILE]]\n");
    return 2;
}
