/* test_data.c — tests of libdlrt's datasets (data.c, pgm.c) and batching
 * (batch.c).
 *
 * With no arguments it runs the unit tests: it writes small IDX, .npy,
 * CSV and PGM files (plain and gzip-compressed) into a fresh temporary
 * folder, loads them (with labels, and as images alone), checks every
 * value and every error (status and message), then checks the batcher's
 * properties; it prints "N passed, N failed" last and exits 1 on any
 * failure.
 *
 * With a mode it is a tool for the lit tests (tests/runtime/data_*.test),
 * which compare its output with an independent reading in Python
 * (tests/runtime/Inputs/data_reference.py):
 *   test_data idx-dir DIR                      train and test of an MNIST folder
 *   test_data idx IMAGES LABELS                one pair of IDX files
 *   test_data npy IMAGES LABELS                one pair of .npy files
 *   test_data csv FILE LABEL_COLUMN [header]   a CSV file
 *   test_data batches DIR BATCH SEED EPOCHS    a shuffled walk of DIR's train set
 * A loading error prints "error: STATUS: MESSAGE" on stderr and exits 1.
 */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define HARNESS_FILE "test_data.c"
#include "harness.h"

/* The scratch folder, from mkdtemp, removed at the end. */
static char scratch_dir[512];

static bool is_zeroed(const DlrtDataset *ds) {
    return ds->count == 0 && ds->rank == 0 && !ds->x && !ds->y && ds->num_classes == 0 &&
           ds->sample_size == 0;
}

/* A path in the scratch folder; four rotating buffers. */
static const char *tpath(const char *name) {
    static char bufs[4][1024];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", scratch_dir, name);
    return p;
}

/* A growing byte buffer for building files. */
typedef struct Buf {
    uint8_t *data;
    size_t len, cap;
} Buf;

static void buf_put(Buf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->data = realloc(b->data, b->cap);
        if (!b->data) {
            perror("test_data");
            exit(2);
        }
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void buf_be32(Buf *b, uint32_t v) {
    uint8_t p[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    buf_put(b, p, 4);
}

static void buf_str(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_free(Buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* Writes data to the scratch file name, gzip-compressed when gz. */
static void write_file(const char *name, const void *data, size_t n, bool gz) {
    const char *path = tpath(name);
    bool ok;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        ok = f && (n == 0 || gzwrite(f, data, (unsigned)n) == (int)n);
        ok = f && gzclose(f) == Z_OK && ok;
    } else {
        FILE *f = fopen(path, "wb");
        ok = f && (n == 0 || fwrite(data, 1, n, f) == n);
        ok = f && fclose(f) == 0 && ok;
    }
    if (!ok) {
        fprintf(stderr, "test_data: cannot write %s\n", path);
        exit(2);
    }
}

static void write_buf(const char *name, const Buf *b, bool gz) {
    write_file(name, b->data, b->len, gz);
}

static void write_text(const char *name, const char *text) {
    write_file(name, text, strlen(text), false);
}

/* ======================================================================== */
/* IDX                                                                      */
/* ======================================================================== */

/* Three 2x3 images and their labels. */
static const uint8_t pixels3[18] = {0,  255, 10,  20,  30,  40,  50,  60,  70,
                                    80, 90,  100, 110, 120, 130, 140, 150, 160};
static const uint8_t labels3[3] = {2, 0, 1};

/* An IDX file: magic, big-endian dims, payload. */
static Buf idx_file(uint32_t magic, int ndims, const uint32_t *dims, const void *data,
                    size_t n) {
    Buf b = {0};
    buf_be32(&b, magic);
    for (int i = 0; i < ndims; i++)
        buf_be32(&b, dims[i]);
    buf_put(&b, data, n);
    return b;
}

static Buf std_images(void) {
    return idx_file(0x803, 3, (const uint32_t[]){3, 2, 3}, pixels3, sizeof pixels3);
}

static Buf std_labels(void) {
    return idx_file(0x801, 1, (const uint32_t[]){3}, labels3, sizeof labels3);
}

/* What the loader should make of a raw byte under default scaling. */
static float scaled(int v) {
    return (float)(v * (double)(1.0f / 255.0f));
}

static void check_std_dataset(const DlrtDataset *ds, int line) {
    check_at(ds->count == 3 && ds->rank == 3 && ds->sample_size == 6, "3 samples of 6", line);
    check_at(ds->dims[0] == 1 && ds->dims[1] == 2 && ds->dims[2] == 3, "dims {1, 2, 3}", line);
    check_at(ds->num_classes == 3, "3 classes", line);
    bool same = ds->x && ds->y;
    for (int i = 0; same && i < 18; i++)
        same = ds->x[i] == scaled(pixels3[i]);
    for (int i = 0; same && i < 3; i++)
        same = ds->y[i] == labels3[i];
    check_at(same, "values and labels as written", line);
}

static void test_idx_load(void) {
    for (int gz = 0; gz < 2; gz++) {
        Buf img = std_images(), lab = std_labels();
        write_buf("img", &img, gz);
        write_buf("lab", &lab, !gz); /* one compressed, one not */
        DlrtDataset ds;
        DlrtError err = {0};
        CHECK_OK(dlrt_load_idx(&ds, tpath("img"), tpath("lab"), NULL, &err), err);
        check_std_dataset(&ds, __LINE__);
        CHECK(ds.x[1] == 1.0f && ds.x[0] == 0.0f);
        dlrt_dataset_free(&ds);
        CHECK(is_zeroed(&ds));
        dlrt_dataset_free(&ds); /* twice is harmless */
        buf_free(&img);
        buf_free(&lab);
    }
}

static void test_idx_scaling(void) {
    Buf img = std_images(), lab = std_labels();
    write_buf("img", &img, false);
    write_buf("lab", &lab, false);
    DlrtDataset ds;
    DlrtError err = {0};
    DlrtScaling s = {.scale = 1.0f, .mean = 0.5f, .std = 2.0f};
    CHECK_OK(dlrt_load_idx(&ds, tpath("img"), tpath("lab"), &s, &err), err);
    CHECK(ds.x[0] == -0.25f && ds.x[1] == 127.25f && ds.x[2] == 4.75f);
    dlrt_dataset_free(&ds);

    DlrtScaling d = dlrt_scaling_default();
    CHECK(d.scale == 1.0f / 255.0f && d.mean == 0.0f && d.std == 1.0f);
    CHECK_OK(dlrt_load_idx(&ds, tpath("img"), tpath("lab"), &d, &err), err);
    check_std_dataset(&ds, __LINE__);
    dlrt_dataset_free(&ds);

    const float bad_std[] = {0.0f, -1.0f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        s.std = bad_std[i];
        CHECK_ERROR(dlrt_load_idx(&ds, tpath("img"), tpath("lab"), &s, &err), err, DLRT_E_ARG,
                    "must be positive and finite");
        CHECK(is_zeroed(&ds));
    }
    s = (DlrtScaling){.scale = 3e38f, .mean = 0, .std = 1};
    CHECK_ERROR(dlrt_load_idx(&ds, tpath("img"), tpath("lab"), &s, &err), err, DLRT_E_RANGE,
                "img: pixel value 2 is not finite once scaled to float");
    CHECK(is_zeroed(&ds));
    s = (DlrtScaling){.scale = NAN, .mean = 0, .std = 1};
    CHECK_ERROR(dlrt_load_idx(&ds, tpath("img"), tpath("lab"), &s, &err), err, DLRT_E_ARG,
                "must be finite");
    buf_free(&img);
    buf_free(&lab);
}

/* Sample ranks other than 2 are kept; 2-d samples get a channel. */
static void test_idx_ranks(void) {
    Buf lab = std_labels();
    write_buf("lab", &lab, false);
    struct {
        uint32_t magic;
        int ndims;
        uint32_t dims[6];
        int rank;
        int64_t want[4];
    } cases[] = {
        {0x802, 2, {3, 6}, 1, {6}},
        {0x803, 3, {3, 2, 3}, 3, {1, 2, 3}},
        {0x804, 4, {3, 2, 1, 3}, 3, {2, 1, 3}},
        {0x805, 5, {3, 1, 1, 2, 3}, 4, {1, 1, 2, 3}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        Buf img = idx_file(cases[c].magic, cases[c].ndims, cases[c].dims, pixels3, 18);
        write_buf("img", &img, true);
        DlrtDataset ds;
        DlrtError err = {0};
        CHECK_OK(dlrt_load_idx(&ds, tpath("img"), tpath("lab"), NULL, &err), err);
        CHECK(ds.rank == cases[c].rank && ds.sample_size == 6 && ds.count == 3);
        CHECK(memcmp(ds.dims, cases[c].want, (size_t)ds.rank * sizeof(int64_t)) == 0);
        CHECK(ds.x[17] == scaled(160));
        dlrt_dataset_free(&ds);
        buf_free(&img);
    }
    buf_free(&lab);
}

/* Loads scratch files e-images and e-labels made from the buffers and
 * expects an error; the dataset must come back zeroed. */
static void expect_idx_error(const Buf *images, bool gz, const Buf *labels, DlrtStatus want,
                             const char *text, int line) {
    write_buf("e-images", images, gz);
    write_buf("e-labels", labels, false);
    DlrtDataset ds;
    DlrtError err = {0};
    DlrtStatus st = dlrt_load_idx(&ds, tpath("e-images"), tpath("e-labels"), NULL, &err);
    check_error_at(st, &err, want, text, line);
    check_at(is_zeroed(&ds), "the dataset is zeroed after an error", line);
}
#define EXPECT_IDX_ERROR(img, gz, lab, want, text) \
    expect_idx_error(&(img), (gz), &(lab), (want), (text), __LINE__)

static void test_idx_header_errors(void) {
    Buf lab = std_labels(), img = {0};
    EXPECT_IDX_ERROR(img, false, lab, DLRT_E_FORMAT, "e-images: the file is empty");
    img = std_images();
    img.len = 6;
    EXPECT_IDX_ERROR(img, false, lab, DLRT_E_FORMAT, "e-images: truncated: 6 of 16 header bytes");
    img.len = 3;
    EXPECT_IDX_ERROR(img, true, lab, DLRT_E_FORMAT, "e-images: truncated: 3 of 4 header bytes");
    buf_free(&img);
    img = idx_file(0x01000803, 3, (const uint32_t[]){3, 2, 3}, pixels3, 18);
    EXPECT_IDX_ERROR(img, false, lab, DLRT_E_FORMAT, "e-images: not an IDX file: bad magic "
                     "number 0x01000803");
    buf_free(&img);
    img = idx_file(0xD03, 3, (const uint32_t[]){3, 2, 3}, pixels3, 18);
    EXPECT_IDX_ERROR(img, false, lab, DLRT_E_FORMAT, "e-images: IDX data type 0x0d (float) is "
                     "not supported, only unsigned bytes (0x08)");
    buf_free(&img);
    /* the files swapped */
    img = std_images();
    EXPECT_IDX_ERROR(lab, false, img, DLRT_E_FORMAT, "e-images: not an IDX images file: magic "
                     "0x00000801 has rank 1, not 2 to 5 (0x00000803 for 2-d images); is it a "
                     "labels file?");
    buf_free(&img);
    img = idx_file(0x806, 6, (const uint32_t[]){3, 1, 1, 1, 2, 3}, pixels3, 18);
    EXPECT_IDX_ERROR(img, false, lab, DLRT_E_FORMAT, "has rank 6, not 2 to 5");
    buf_free(&img);
    img = std_images();
    EXPECT_IDX_ERROR(img, false, img, DLRT_E_FORMAT, "e-labels: not an IDX labels file: magic "
                     "0x00000803 has rank 3, not 1 (0x00000801)");
    buf_free(&img);
    buf_free(&lab);
}

static void test_idx_dims_errors(void) {
    Buf lab = std_labels();
    Buf img = idx_file(0x803, 3, (const uint32_t[]){3, 0, 3}, NULL, 0);
    EXPECT_IDX_ERROR(img, false, lab, DLRT_E_FORMAT, "e-images: dimension 2 of 3 is zero");
    buf_free(&img);
    img = idx_file(0x803, 3, (const uint32_t[]){0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, NULL, 0);
    EXPECT_IDX_ERROR(img, false, lab, DLRT_E_FORMAT, "e-images: dimensions [4294967295, "
                     "4294967295, 4294967295] are too large");
    buf_free(&img);
    /* a header claiming 10^12 bytes is not trusted with an allocation */
    Buf biglab = idx_file(0x801, 1, (const uint32_t[]){1000000}, labels3, 3);
    img = idx_file(0x803, 3, (const uint32_t[]){1000000, 1000, 1000}, pixels3, 18);
    EXPECT_IDX_ERROR(img, true, biglab, DLRT_E_FORMAT,
                     "e-images: truncated: 34 of 1000000000016 bytes");
    buf_free(&img);
    buf_free(&biglab);
    buf_free(&lab);
}

static void test_idx_data_errors(void) {
    Buf lab = std_labels(), img = std_images();
    img.len--;
    EXPECT_IDX_ERROR(img, false, lab, DLRT_E_FORMAT, "e-images: truncated: 33 of 34 bytes");
    EXPECT_IDX_ERROR(img, true, lab, DLRT_E_FORMAT, "e-images: truncated: 33 of 34 bytes");
    img.len++;
    buf_put(&img, "extra", 5);
    EXPECT_IDX_ERROR(img, false, lab, DLRT_E_FORMAT,
                     "e-images: 5 bytes of trailing data after the 34 expected");
    EXPECT_IDX_ERROR(img, true, lab, DLRT_E_FORMAT,
                     "e-images: 5 bytes of trailing data after the 34 expected");
    buf_free(&img);
    img = std_images();
    Buf lab4 = idx_file(0x801, 1, (const uint32_t[]){4}, "\1\2\3\4", 4);
    EXPECT_IDX_ERROR(img, false, lab4, DLRT_E_FORMAT, "e-labels has 4 labels but ");
    EXPECT_IDX_ERROR(img, false, lab4, DLRT_E_FORMAT, "e-images has 3 images");
    buf_free(&lab4);
    /* a gzip stream cut short, and one whose data is corrupt */
    write_buf("z", &img, true);
    FILE *f = fopen(tpath("z"), "rb");
    Buf z = {0};
    uint8_t chunk[256];
    size_t n;
    while (f && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        buf_put(&z, chunk, n);
    if (f)
        fclose(f);
    z.len -= 12;
    write_buf("e-images", &z, false);
    write_buf("e-labels", &lab, false);
    DlrtDataset ds;
    DlrtError err = {0};
    CHECK_ERROR(dlrt_load_idx(&ds, tpath("e-images"), tpath("e-labels"), NULL, &err), err,
                DLRT_E_FORMAT, "(the gzip stream is cut short)");
    z.len += 12;
    for (size_t i = 12; i < z.len - 8; i++)
        z.data[i] ^= 0x5A;
    write_buf("e-images", &z, false);
    CHECK_ERROR(dlrt_load_idx(&ds, tpath("e-images"), tpath("e-labels"), NULL, &err), err,
                DLRT_E_FORMAT, "e-images: bad gzip data: ");
    CHECK(is_zeroed(&ds));
    buf_free(&z);
    buf_free(&img);
    buf_free(&lab);
}

static void test_idx_io_errors(void) {
    Buf lab = std_labels(), img = std_images();
    write_buf("img", &img, false);
    write_buf("lab", &lab, false);
    DlrtDataset ds;
    DlrtError err = {0};
    CHECK_ERROR(dlrt_load_idx(&ds, tpath("nope"), tpath("lab"), NULL, &err), err, DLRT_E_IO,
                "/nope: cannot open: No such file or directory");
    CHECK(is_zeroed(&ds));
    CHECK_ERROR(dlrt_load_idx(&ds, tpath("img"), tpath("nope"), NULL, &err), err, DLRT_E_IO,
                "/nope: cannot open: No such file or directory");
    CHECK(is_zeroed(&ds));
    CHECK_ERROR(dlrt_load_idx(&ds, scratch_dir, tpath("lab"), NULL, &err), err, DLRT_E_IO,
                "cannot read: Is a directory");
    CHECK_ERROR(dlrt_load_idx(NULL, tpath("img"), tpath("lab"), NULL, &err), err, DLRT_E_ARG,
                "dlrt_load_idx");
    /* err may be NULL */
    CHECK(dlrt_load_idx(&ds, tpath("nope"), tpath("lab"), NULL, NULL) == DLRT_E_IO);
    buf_free(&img);
    buf_free(&lab);
}

/* ---- folders ----------------------------------------------------------- */

/* Writes an MNIST folder: count train and count - 1 test samples of 2x3;
 * which says, per file, plain (0), gzip (1), gzip named .gz (2), absent (3). */
static void write_mnist_dir(const char *name, int count, const int which[4]) {
    static const char *const files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    uint8_t pixels[6 * 16], labels[16];
    for (int i = 0; i < 6 * count; i++)
        pixels[i] = (uint8_t)(i * 7);
    for (int i = 0; i < count; i++)
        labels[i] = (uint8_t)(i % 4);
    mkdir(tpath(name), 0700);
    for (int f = 0; f < 4; f++) {
        uint32_t n = (uint32_t)(f < 2 ? count : count - 1);
        Buf b = f % 2 ? idx_file(0x801, 1, &n, labels, n)
                      : idx_file(0x803, 3, (const uint32_t[]){n, 2, 3}, pixels, 6 * n);
        char path[256];
        snprintf(path, sizeof path, "%s/%s%s", name, files[f], which[f] == 2 ? ".gz" : "");
        if (which[f] != 3)
            write_buf(path, &b, which[f] != 0);
        buf_free(&b);
    }
}

static void test_idx_dir(void) {
    DlrtDataset train, test;
    DlrtError err = {0};
    write_mnist_dir("d-plain", 5, (const int[]){0, 0, 0, 0});
    CHECK_OK(dlrt_load_idx_dir(&train, &test, tpath("d-plain"), NULL, &err), err);
    CHECK(train.count == 5 && test.count == 4 && train.rank == 3 && test.dims[0] == 1);
    CHECK(train.num_classes == 4 && test.num_classes == 4 && train.x[1] == scaled(7));
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&test);
    write_mnist_dir("d-gz", 6, (const int[]){2, 2, 2, 2});
    CHECK_OK(dlrt_load_idx_dir(&train, &test, tpath("d-gz"), NULL, &err), err);
    CHECK(train.count == 6 && test.count == 5);
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&test);
    /* mixed, and content that is gzip under a plain name */
    write_mnist_dir("d-mixed", 7, (const int[]){1, 2, 0, 2});
    CHECK_OK(dlrt_load_idx_dir(&train, &test, tpath("d-mixed"), NULL, &err), err);
    CHECK(train.count == 7 && test.count == 6);
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&test);
    /* both present: the plain file wins */
    write_mnist_dir("d-both", 8, (const int[]){0, 0, 0, 0});
    write_mnist_dir("d-both", 3, (const int[]){2, 2, 2, 2});
    CHECK_OK(dlrt_load_idx_dir(&train, &test, tpath("d-both"), NULL, &err), err);
    CHECK(train.count == 8 && test.count == 7);
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&test);
    /* test NULL: the test files are not needed */
    write_mnist_dir("d-train", 4, (const int[]){0, 2, 3, 3});
    CHECK_OK(dlrt_load_idx_dir(&train, NULL, tpath("d-train"), NULL, &err), err);
    CHECK(train.count == 4);
    dlrt_dataset_free(&train);
}

static void test_idx_dir_errors(void) {
    DlrtDataset train, test;
    DlrtError err = {0};
    write_mnist_dir("d-missing", 4, (const int[]){0, 2, 0, 3});
    CHECK_ERROR(dlrt_load_idx_dir(&train, &test, tpath("d-missing"), NULL, &err), err,
                DLRT_E_IO, "t10k-labels-idx1-ubyte (or t10k-labels-idx1-ubyte.gz) not found in ");
    CHECK(strstr(err.message, "/d-missing") != NULL);
    CHECK(is_zeroed(&train) && is_zeroed(&test));
    CHECK_ERROR(dlrt_load_idx_dir(&train, &test, tpath("d-none"), NULL, &err), err, DLRT_E_IO,
                "train-images-idx3-ubyte (or train-images-idx3-ubyte.gz) not found in ");
    /* a bad test set after a good train set: train is freed again */
    write_mnist_dir("d-badtest", 5, (const int[]){0, 0, 0, 0});
    Buf bad = std_labels();
    write_buf("d-badtest/t10k-labels-idx1-ubyte", &bad, false);
    CHECK_ERROR(dlrt_load_idx_dir(&train, &test, tpath("d-badtest"), NULL, &err), err,
                DLRT_E_FORMAT, "t10k-labels-idx1-ubyte has 3 labels but ");
    CHECK(is_zeroed(&train) && is_zeroed(&test));
    CHECK_ERROR(dlrt_load_idx_dir(NULL, NULL, tpath("d-badtest"), NULL, &err), err, DLRT_E_ARG,
                "dlrt_load_idx_dir");
    /* the test split alone: here it is the bad one */
    CHECK_ERROR(dlrt_load_idx_dir(NULL, &test, tpath("d-badtest"), NULL, &err), err,
                DLRT_E_FORMAT, "t10k-labels-idx1-ubyte has 3 labels but ");
    CHECK(is_zeroed(&test));
    buf_free(&bad);
}

/* ======================================================================== */
/* NumPy .npy                                                               */
/* ======================================================================== */

/* A .npy file of format version major.0 with header text dict, padded with
 * spaces and a newline to a multiple of 64 bytes as NumPy does. */
static Buf npy_raw(int major, const char *dict, const void *data, size_t n) {
    Buf b = {0};
    size_t pre = major == 1 ? 10 : 12;
    size_t len = strlen(dict) + 1;
    len += (64 - (pre + len) % 64) % 64;
    buf_put(&b, "\x93NUMPY", 6);
    uint8_t v[6] = {(uint8_t)major, 0, (uint8_t)len, (uint8_t)(len >> 8), 0, 0};
    buf_put(&b, v, pre - 6);
    buf_str(&b, dict);
    for (size_t i = strlen(dict) + 1; i < len; i++)
        buf_put(&b, " ", 1);
    buf_put(&b, "\n", 1);
    buf_put(&b, data, n);
    return b;
}

static Buf npy(const char *descr, const char *shape, const void *data, size_t n) {
    char dict[256];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
             descr, shape);
    return npy_raw(1, dict, data, n);
}

static const int64_t labels_i8[3] = {2, 0, 1};

/* Loads the buffers as scratch .npy files into ds. */
static DlrtStatus load_npy_bufs(DlrtDataset *ds, const Buf *images, const Buf *labels,
                                const DlrtScaling *s, DlrtError *err) {
    write_buf("a.npy", images, false);
    write_buf("b.npy", labels, false);
    return dlrt_load_npy(ds, tpath("a.npy"), tpath("b.npy"), s, err);
}

static void test_npy_bytes(void) {
    Buf img = npy("|u1", "(3, 2, 3)", pixels3, 18), lab = npy("<i8", "(3,)", labels_i8, 24);
    DlrtDataset ds;
    DlrtError err = {0};
    CHECK_OK(load_npy_bufs(&ds, &img, &lab, NULL, &err), err);
    /* shapes are kept as stored: no channel dimension is added */
    CHECK(ds.count == 3 && ds.rank == 2 && ds.dims[0] == 2 && ds.dims[1] == 3);
    CHECK(ds.sample_size == 6 && ds.num_classes == 3 && ds.y[0] == 2 && ds.y[2] == 1);
    CHECK(ds.x[1] == 1.0f && ds.x[2] == scaled(10) && ds.x[17] == scaled(160));
    dlrt_dataset_free(&ds);
    /* gzip-compressed, version 2.0 and 3.0 headers, Python 2 longs */
    write_buf("a.npy.gz", &img, true);
    write_buf("b.npy", &lab, false);
    CHECK_OK(dlrt_load_npy(&ds, tpath("a.npy.gz"), tpath("b.npy"), NULL, &err), err);
    CHECK(ds.count == 3 && ds.x[1] == 1.0f);
    dlrt_dataset_free(&ds);
    const char *dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (3L, 6L)}";
    for (int major = 1; major <= 3; major++) {
        buf_free(&img);
        img = npy_raw(major, dict, pixels3, 18);
        CHECK_OK(load_npy_bufs(&ds, &img, &lab, NULL, &err), err);
        CHECK(ds.rank == 1 && ds.dims[0] == 6 && ds.x[17] == scaled(160));
        dlrt_dataset_free(&ds);
    }
    buf_free(&img);
    buf_free(&lab);
}

/* One dtype's bytes and the floats they must become. */
typedef struct DtypeCase {
    const char *descr;
    uint8_t bytes[32];  /* four little-endian elements */
    float want[4];
} DtypeCase;

static void test_npy_dtypes(void) {
    static const DtypeCase cases[] = {
        {"<f4", {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0, 0x80, 0xdb, 0x0f, 0x49, 0x40},
         {1.0f, -2.0f, -0.0f, 3.14159274f}},
        {"<f8", {0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0x9a, 0x99, 0x99,
                 0x99, 0x99, 0x99, 0xb9, 0x3f, 0, 0, 0, 0, 0, 0, 0x24, 0x40},
         {1.0f, -2.0f, 0.1f, 10.0f}},
        {"<f2", {0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0xff, 0x7b},
         {1.0f, -2.0f, 0x1p-24f, 65504.0f}},
        {"<i2", {0xff, 0xff, 0x00, 0x80, 0xff, 0x7f, 7, 0}, {-1, -32768, 32767, 7}},
        {"<u2", {0xff, 0xff, 0x00, 0x80, 0xff, 0x7f, 7, 0}, {65535, 32768, 32767, 7}},
        {"|i1", {0xff, 0x80, 0x7f, 0}, {-1, -128, 127, 0}},
        {"|b1", {0, 1, 1, 0}, {0, 1, 1, 0}},
        {"<i4", {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0x80, 5, 0, 0, 0, 0, 1, 0, 0},
         {-1, -2147483648.0f, 5, 256}},
        {"<u4", {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0x80, 5, 0, 0, 0, 0, 1, 0, 0},
         {4294967295.0f, 2147483648.0f, 5, 256}},
        {"<i8", {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 3}, {-2, 3, 0, 0}},
        {"<u8", {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 3},
         {18446744073709551614.0f, 3, 0, 0}},
        {">u1", {1, 2, 4, 8}, {1 / 255.0f, 2 / 255.0f, 4 / 255.0f, 8 / 255.0f}},
    };
    Buf lab = npy("|u1", "(2,)", "\1\0", 2);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int size = cases[c].descr[2] - '0';
        Buf img = npy(cases[c].descr, "(2, 2)", cases[c].bytes, (size_t)(4 * size));
        DlrtDataset ds;
        DlrtError err = {0};
        CHECK_OK(load_npy_bufs(&ds, &img, &lab, NULL, &err), err);
        bool same = ds.x != NULL;
        for (int i = 0; same && i < 4; i++)
            same = ds.x[i] == cases[c].want[i] && signbit(ds.x[i]) == signbit(cases[c].want[i]);
        if (!same)
            fprintf(stderr, "dtype %s\n", cases[c].descr);
        CHECK(same);
        CHECK(ds.count == 2 && ds.num_classes == 2 && ds.y[0] == 1 && ds.y[1] == 0);
        dlrt_dataset_free(&ds);
        buf_free(&img);
    }
    buf_free(&lab);
}

static void test_npy_labels(void) {
    const char *descrs[] = {"|u1", "|i1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8"};
    uint8_t bytes[24] = {0};
    Buf img = npy("<f4", "(3, 1)", "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
    for (size_t c = 0; c < sizeof descrs / sizeof *descrs; c++) {
        int size = descrs[c][2] - '0';
        bytes[0] = 9;        /* 9, 0, 4 */
        bytes[2 * size] = 4;
        Buf lab = npy(descrs[c], "(3,)", bytes, (size_t)(3 * size));
        DlrtDataset ds;
        DlrtError err = {0};
        CHECK_OK(load_npy_bufs(&ds, &img, &lab, NULL, &err), err);
        CHECK(ds.count == 3 && ds.y[0] == 9 && ds.y[1] == 0 && ds.y[2] == 4 &&
              ds.num_classes == 10);
        dlrt_dataset_free(&ds);
        memset(bytes, 0, sizeof bytes);
        buf_free(&lab);
    }
    buf_free(&img);
}

static void expect_npy_error(const Buf *images, const Buf *labels, DlrtStatus want,
                             const char *text, int line) {
    DlrtDataset ds;
    DlrtError err = {0};
    check_error_at(load_npy_bufs(&ds, images, labels, NULL, &err), &err, want, text, line);
    check_at(is_zeroed(&ds), "the dataset is zeroed after an error", line);
}
#define EXPECT_NPY_ERROR(img, lab, want, text) \
    expect_npy_error(&(img), &(lab), (want), (text), __LINE__)

static void test_npy_header_errors(void) {
    Buf lab = npy("<i8", "(3,)", labels_i8, 24), img;
    const struct {
        const char *dict, *text;
    } cases[] = {
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (3, 1), }",
         "a.npy: dtype '>f4' is big-endian, which is not supported: save the array as "
         "arr.astype('<f4')"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (3, 1), }",
         "a.npy: fortran_order is True, which is not supported"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (3, 1), }",
         "a.npy: dtype '<c8' is not supported"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3, 1), }",
         "a.npy: structured dtypes are not supported"},
        {"{'descr': '<f4' 'fortran_order': False, 'shape': (3, 1), }",
         "a.npy: bad .npy header: expected ',' or '}' at \"'fortran_order'"},
        {"{'descr': '<f4', 'fortran_order': False}", "a.npy: bad .npy header: no 'shape' key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1), 'x': 1}",
         "a.npy: bad .npy header: unknown key 'x'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3, 1)}",
         "repeated key 'descr'"},
        {"{'descr': '<f4", "a.npy: bad .npy header: expected a closed string at \"'<f4"},
        {"{'descr': '<f4', 'fortran_order': Nope, 'shape': (3, 1)}", "expected True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, -1)}", "expected a dimension"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [3, 1]}", "expected a shape tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1)} x",
         "expected the end of the header"},
        {"'descr': '<f4'", "expected '{'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
         "a.npy: images have shape [3], not [count, ...] with 1 to 4 dimensions per sample"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1, 1, 1, 1, 1)}",
         "a.npy: images have shape [3, 1, 1, 1, 1, 1]"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0)}",
         "a.npy: shape [3, 0] has no elements"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1099511627776)}",
         "a.npy: shape [3, 1099511627776] is too large"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        img = npy_raw(1, cases[c].dict, "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
        EXPECT_NPY_ERROR(img, lab, DLRT_E_FORMAT, cases[c].text);
        buf_free(&img);
    }
    buf_free(&lab);
}

static void test_npy_file_errors(void) {
    Buf lab = npy("<i8", "(3,)", labels_i8, 24);
    Buf img = npy("<f4", "(3, 1)", "\0\0\0\0\0\0\0\0\0\0\0\0", 12), bad;
    memcpy(img.data + 1, "NUMPZ", 5);
    EXPECT_NPY_ERROR(img, lab, DLRT_E_FORMAT, "a.npy: not a .npy file (no \\x93NUMPY magic)");
    memcpy(img.data + 1, "NUMPY", 5);
    img.data[6] = 4;
    EXPECT_NPY_ERROR(img, lab, DLRT_E_FORMAT, "a.npy: .npy format version 4.0 is not supported");
    img.data[6] = 1;
    bad = img;
    bad.len = 9;
    EXPECT_NPY_ERROR(bad, lab, DLRT_E_FORMAT, "a.npy: truncated: 9 of 10 header bytes");
    bad.len = 40;
    EXPECT_NPY_ERROR(bad, lab, DLRT_E_FORMAT, "a.npy: truncated: 40 of 128 header bytes");
    bad.len = 0;
    EXPECT_NPY_ERROR(bad, lab, DLRT_E_FORMAT, "a.npy: the file is empty");
    bad.len = img.len - 1;
    EXPECT_NPY_ERROR(bad, lab, DLRT_E_FORMAT, "a.npy: truncated: 139 of 140 bytes");
    buf_put(&img, "\0", 1);
    EXPECT_NPY_ERROR(img, lab, DLRT_E_FORMAT, "a.npy: 1 byte of trailing data after the 140");
    buf_free(&img);
    /* a header length past the limit */
    img = npy("<f4", "(3, 1)", "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
    img.data[6] = 2;
    img.data[8] = 0, img.data[9] = 0, img.data[10] = 0x20, img.data[11] = 0;
    EXPECT_NPY_ERROR(img, lab, DLRT_E_FORMAT, "a.npy: .npy header of 2097152 bytes is too long");
    buf_free(&img);
    /* NaN in the data */
    img = npy("<f4", "(3, 1)", "\0\0\0\0\0\0\xc0\x7f\0\0\0\0", 12);
    EXPECT_NPY_ERROR(img, lab, DLRT_E_RANGE, "a.npy: value nan at sample 1 is not finite");
    buf_free(&img);
    /* f8 beyond float range */
    img = npy("<f8", "(1, 1)", "\0\0\0\0\0\0\xf0\x7f", 8);
    Buf lab1 = npy("<i8", "(1,)", labels_i8, 8);
    EXPECT_NPY_ERROR(img, lab1, DLRT_E_RANGE, "a.npy: value inf at sample 0 is not finite");
    buf_free(&img);
    img = npy("<f8", "(1, 1)", "\0\0\0\0\0\0\xf0\x47", 8); /* 2^128 */
    EXPECT_NPY_ERROR(img, lab1, DLRT_E_RANGE, "is not finite once scaled to float");
    buf_free(&img);
    buf_free(&lab1);
    buf_free(&lab);
}

static void test_npy_label_errors(void) {
    Buf img = npy("<f4", "(3, 1)", "\0\0\0\0\0\0\0\0\0\0\0\0", 12), lab;
    lab = npy("<f4", "(3,)", "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
    EXPECT_NPY_ERROR(img, lab, DLRT_E_FORMAT, "b.npy: labels have dtype '<f4'; they must be "
                     "integers");
    buf_free(&lab);
    lab = npy("<i8", "(3, 1)", labels_i8, 24);
    EXPECT_NPY_ERROR(img, lab, DLRT_E_FORMAT, "b.npy: labels have shape [3, 1], not [count]");
    buf_free(&lab);
    lab = npy("<i8", "(2,)", labels_i8, 16);
    EXPECT_NPY_ERROR(img, lab, DLRT_E_FORMAT, "b.npy has 2 labels but ");
    buf_free(&lab);
    const int64_t neg[3] = {1, -1, 2}, big[3] = {1, 2, INT64_C(1) << 40};
    lab = npy("<i8", "(3,)", neg, 24);
    EXPECT_NPY_ERROR(img, lab, DLRT_E_RANGE, "b.npy: label -1 at sample 1 is negative");
    buf_free(&lab);
    lab = npy("<i8", "(3,)", big, 24);
    EXPECT_NPY_ERROR(img, lab, DLRT_E_RANGE, "b.npy: label 1099511627776 at sample 2 is too "
                     "large");
    buf_free(&lab);
    lab = npy("<u8", "(3,)", "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff",
              24);
    EXPECT_NPY_ERROR(img, lab, DLRT_E_RANGE, "at sample 2 is too large");
    buf_free(&lab);
    buf_free(&img);
}

/* ======================================================================== */
/* CSV                                                                      */
/* ======================================================================== */

static bool floats_are(const float *x, const float *want, int n) {
    for (int i = 0; i < n; i++)
        if (x[i] != want[i])
            return false;
    return true;
}

static void test_csv(void) {
    DlrtDataset ds;
    DlrtError err = {0};
    write_text("h.csv", "label,a,b\n1,0.5,2\n0,-1,3e2\n");
    CHECK_OK(dlrt_load_csv(&ds, tpath("h.csv"), 0, true, NULL, &err), err);
    CHECK(ds.count == 2 && ds.rank == 1 && ds.dims[0] == 2 && ds.sample_size == 2);
    CHECK(floats_are(ds.x, (const float[]){0.5f, 2, -1, 300}, 4) && ds.y[0] == 1 &&
          ds.y[1] == 0 && ds.num_classes == 2);
    dlrt_dataset_free(&ds);
    /* the label in the middle; CRLF, blank lines, spaces, no final newline, a BOM */
    write_text("m.csv", "\xEF\xBB\xBF" "1, 7 ,2\r\n\r\n 3,0,\t4 \r\n\n-5.25,2.0,1e-3");
    CHECK_OK(dlrt_load_csv(&ds, tpath("m.csv"), 1, false, NULL, &err), err);
    CHECK(ds.count == 3 && ds.dims[0] == 2 && ds.num_classes == 8);
    CHECK(floats_are(ds.x, (const float[]){1, 2, 3, 4, -5.25f, 1e-3f}, 6));
    CHECK(ds.y[0] == 7 && ds.y[1] == 0 && ds.y[2] == 2);
    dlrt_dataset_free(&ds);
    /* scaling, and a gzip-compressed file */
    const char *text = "3,1,0\n5,2,1\n";
    write_file("z.csv.gz", text, strlen(text), true);
    DlrtScaling s = {.scale = 2, .mean = 1, .std = 4};
    CHECK_OK(dlrt_load_csv(&ds, tpath("z.csv.gz"), 2, false, &s, &err), err);
    CHECK(floats_are(ds.x, (const float[]){1.25f, 0.25f, 2.25f, 0.75f}, 4));
    CHECK(ds.y[0] == 0 && ds.y[1] == 1 && ds.num_classes == 2);
    dlrt_dataset_free(&ds);
}

/* Writes text as e.csv and expects an error loading it. */
static void expect_csv_error(const char *text, int column, bool header, DlrtStatus want,
                             const char *message, int line) {
    write_text("e.csv", text);
    DlrtDataset ds;
    DlrtError err = {0};
    DlrtStatus st = dlrt_load_csv(&ds, tpath("e.csv"), column, header, NULL, &err);
    check_error_at(st, &err, want, message, line);
    check_at(is_zeroed(&ds), "the dataset is zeroed after an error", line);
}
#define EXPECT_CSV_ERROR(text, column, header, want, message) \
    expect_csv_error((text), (column), (header), (want), (message), __LINE__)

static void test_csv_errors(void) {
    EXPECT_CSV_ERROR("1,2,3\n\n4,5\n", 0, false, DLRT_E_FORMAT,
                     "e.csv:3: the row has 2 columns but line 1 has 3");
    EXPECT_CSV_ERROR("a,b\n1,2\n3,abc\n", 0, true, DLRT_E_FORMAT,
                     "e.csv:3: column 2: 'abc' is not a number");
    EXPECT_CSV_ERROR("a,b\n1,2\n", 0, false, DLRT_E_FORMAT,
                     "e.csv:1: column 1: 'a' is not a number");
    EXPECT_CSV_ERROR("1,2x\n", 0, false, DLRT_E_FORMAT, "e.csv:1: column 2: '2x' is not a number");
    EXPECT_CSV_ERROR("1,,2\n", 0, false, DLRT_E_FORMAT, "e.csv:1: column 2 is empty");
    EXPECT_CSV_ERROR("1,2,\n", 0, false, DLRT_E_FORMAT, "e.csv:1: column 3 is empty");
    EXPECT_CSV_ERROR("1,nan\n", 0, false, DLRT_E_FORMAT, "e.csv:1: column 2: 'nan' is not a "
                     "finite number");
    EXPECT_CSV_ERROR("1,1e999\n", 0, false, DLRT_E_FORMAT, "is not a finite number");
    EXPECT_CSV_ERROR("1,2\n", 2, false, DLRT_E_RANGE, "e.csv: label column 2 is out of range: "
                     "the rows have 2 columns, numbered from 0");
    EXPECT_CSV_ERROR("1,2\n", -1, false, DLRT_E_ARG, "e.csv: label column -1 is negative");
    EXPECT_CSV_ERROR("1,2\n1.5,3\n", 0, false, DLRT_E_RANGE, "e.csv:2: column 1: label 1.5 is "
                     "not a whole number");
    EXPECT_CSV_ERROR("1,2\n3,-1\n", 1, false, DLRT_E_RANGE, "e.csv:2: column 2: label -1 is "
                     "negative");
    EXPECT_CSV_ERROR("1,2\n3,1e10\n", 1, false, DLRT_E_RANGE, "label 10000000000 is too large");
    EXPECT_CSV_ERROR("label,a\n", 0, true, DLRT_E_FORMAT, "e.csv: no data rows");
    EXPECT_CSV_ERROR("", 0, false, DLRT_E_FORMAT, "e.csv: no data rows");
    EXPECT_CSV_ERROR("\n1\n2\n", 0, false, DLRT_E_FORMAT, "e.csv:2: a row needs a label and at "
                     "least one value, but has one column");
    EXPECT_CSV_ERROR("1,1e39\n", 0, false, DLRT_E_RANGE, "e.csv:1: column 2: 1e+39 does not fit "
                     "in a float once scaled");
    DlrtDataset ds;
    DlrtError err = {0};
    CHECK_ERROR(dlrt_load_csv(&ds, tpath("none.csv"), 0, false, NULL, &err), err, DLRT_E_IO,
                "none.csv: cannot open: No such file or directory");
}

/* ======================================================================== */
/* Checking a dataset against a network                                     */
/* ======================================================================== */

static void test_check(void) {
    Buf img = std_images(), lab = std_labels();
    write_buf("img", &img, false);
    write_buf("lab", &lab, false);
    DlrtDataset ds;
    DlrtError err = {0};
    CHECK_OK(dlrt_load_idx(&ds, tpath("img"), tpath("lab"), NULL, &err), err);
    CHECK_OK(dlrt_dataset_check(&ds, 3, (const int64_t[]){1, 2, 3}, 3, &err), err);
    CHECK_OK(dlrt_dataset_check(&ds, 3, (const int64_t[]){1, 2, 3}, 10, &err), err);
    CHECK_ERROR(dlrt_dataset_check(&ds, 3, (const int64_t[]){1, 2, 3}, 2, &err), err,
                DLRT_E_RANGE, "label 2 at sample 0 is out of range for 2 classes");
    CHECK_ERROR(dlrt_dataset_check(&ds, 3, (const int64_t[]){1, 3, 2}, 3, &err), err,
                DLRT_E_SHAPE, "sample 0 has shape [1, 2, 3] but the network takes [1, 3, 2]");
    CHECK_ERROR(dlrt_dataset_check(&ds, 1, (const int64_t[]){6}, 3, &err), err, DLRT_E_SHAPE,
                "sample 0 has shape [1, 2, 3] but the network takes [6]");
    CHECK_ERROR(dlrt_dataset_check(&ds, 3, (const int64_t[]){1, 2, 3}, 0, &err), err,
                DLRT_E_ARG, "dlrt_dataset_check");
    CHECK_ERROR(dlrt_dataset_check(&ds, 5, (const int64_t[]){1, 1, 1, 2, 3}, 3, &err), err,
                DLRT_E_ARG, "dlrt_dataset_check");
    ds.y[2] = -1;
    CHECK_ERROR(dlrt_dataset_check(&ds, 3, (const int64_t[]){1, 2, 3}, 3, &err), err,
                DLRT_E_RANGE, "label -1 at sample 2 is out of range for 3 classes");
    dlrt_dataset_free(&ds);
    /* a .npy without the channel dimension gets a hint */
    Buf nimg = npy("|u1", "(3, 2, 3)", pixels3, 18), nlab = npy("<i8", "(3,)", labels_i8, 24);
    CHECK_OK(load_npy_bufs(&ds, &nimg, &nlab, NULL, &err), err);
    CHECK_ERROR(dlrt_dataset_check(&ds, 3, (const int64_t[]){1, 2, 3}, 3, &err), err,
                DLRT_E_SHAPE, "sample 0 has shape [2, 3] but the network takes [1, 2, 3] (the "
                "data lacks a channel dimension of 1)");
    dlrt_dataset_free(&ds);
    /* freeing: a zeroed struct, NULL, twice */
    DlrtDataset zero = {0};
    dlrt_dataset_free(&zero);
    dlrt_dataset_free(NULL);
    CHECK(is_zeroed(&zero));
    buf_free(&nimg);
    buf_free(&nlab);
    buf_free(&img);
    buf_free(&lab);
}

/* ======================================================================== */
/* Images without labels, for predictions                                   */
/* ======================================================================== */

static void test_images_only(void) {
    DlrtDataset ds;
    DlrtError err = {0};
    /* IDX: the images of the standard pair, no labels */
    for (int gz = 0; gz < 2; gz++) {
        Buf img = std_images();
        write_buf("img", &img, gz);
        CHECK_OK(dlrt_load_idx_images(&ds, tpath("img"), NULL, &err), err);
        CHECK(ds.count == 3 && ds.rank == 3 && ds.dims[0] == 1 && ds.dims[1] == 2 &&
              ds.dims[2] == 3 && !ds.y && ds.num_classes == 0);
        CHECK(ds.x && ds.x[1] == scaled(255) && ds.x[17] == scaled(160));
        CHECK_OK(dlrt_dataset_check(&ds, 3, (const int64_t[]){1, 2, 3}, 10, &err), err);
        dlrt_dataset_free(&ds);
        buf_free(&img);
    }
    Buf lab = std_labels();
    write_buf("lab", &lab, false);
    CHECK_ERROR(dlrt_load_idx_images(&ds, tpath("lab"), NULL, &err), err, DLRT_E_FORMAT,
                "is it a labels file?");
    CHECK(is_zeroed(&ds));
    buf_free(&lab);
    /* .npy: the network's own shape is one sample, anything else count first */
    const int64_t sample[3] = {1, 2, 3};
    Buf one = npy("|u1", "(1, 2, 3)", pixels3, 6), three = npy("|u1", "(3, 1, 2, 3)", pixels3, 18);
    Buf flat = npy("<f4", "(3, 2)", (const float[]){0.5f, 1, 2, 3, 4, 5}, 24);
    write_buf("one.npy", &one, false);
    write_buf("three.npy", &three, true);
    write_buf("flat.npy", &flat, false);
    CHECK_OK(dlrt_load_npy_images(&ds, tpath("one.npy"), 3, sample, NULL, &err), err);
    CHECK(ds.count == 1 && ds.rank == 3 && ds.dims[0] == 1 && ds.dims[2] == 3 && !ds.y &&
          ds.x[1] == scaled(255));
    dlrt_dataset_free(&ds);
    CHECK_OK(dlrt_load_npy_images(&ds, tpath("three.npy"), 3, sample, NULL, &err), err);
    CHECK(ds.count == 3 && ds.rank == 3 && ds.sample_size == 6 && ds.x[17] == scaled(160));
    dlrt_dataset_free(&ds);
    /* same rank, other shape: counted, and float data is kept as it is */
    CHECK_OK(dlrt_load_npy_images(&ds, tpath("flat.npy"), 2, (const int64_t[]){2, 3}, NULL,
                                  &err), err);
    CHECK(ds.count == 3 && ds.rank == 1 && ds.dims[0] == 2 && ds.x[0] == 0.5f && ds.x[5] == 5);
    dlrt_dataset_free(&ds);
    buf_free(&one);
    buf_free(&three);
    buf_free(&flat);
}

/* ======================================================================== */
/* PGM                                                                      */
/* ======================================================================== */

static void expect_pgm_error(const char *text, size_t n, DlrtStatus want, const char *message,
                             int line) {
    DlrtDataset ds;
    DlrtError err = {0};
    write_file("bad.pgm", text, n, false);
    check_error_at(dlrt_load_pgm(&ds, tpath("bad.pgm"), &err), &err, want, message, line);
    check_at(is_zeroed(&ds), "a zeroed dataset after an error", line);
}
#define PGM_ERROR(text, want, message) \
    expect_pgm_error((text), sizeof(text) - 1, (want), (message), __LINE__)

static void test_pgm(void) {
    DlrtDataset ds;
    DlrtError err = {0};
    /* P2 with comments everywhere the header allows and a maxval of 15 */
    write_text("a.pgm", "P2 # ascii\n# size:\n3 2\n15\n0 15 7\n# a comment in the pixels\n1 2 3\n");
    CHECK_OK(dlrt_load_pgm(&ds, tpath("a.pgm"), &err), err);
    CHECK(ds.count == 1 && ds.rank == 3 && ds.dims[0] == 1 && ds.dims[1] == 2 &&
          ds.dims[2] == 3 && ds.sample_size == 6 && !ds.y && ds.num_classes == 0);
    CHECK(ds.x && ds.x[0] == 0 && ds.x[1] == 1 && ds.x[2] == (float)(7.0 / 15) &&
          ds.x[5] == (float)(3.0 / 15));
    dlrt_dataset_free(&ds);
    /* P5 with 8 and 16 bits (big-endian), plain and gzip; a first pixel of
       10 ('\n') right after the one whitespace that ends the header */
    for (int gz = 0; gz < 2; gz++) {
        write_file("b.pgm", "P5\n2 1\n255\n\n\xff", 13, gz);
        CHECK_OK(dlrt_load_pgm(&ds, tpath("b.pgm"), &err), err);
        CHECK(ds.count == 1 && ds.dims[1] == 1 && ds.dims[2] == 2 && ds.x[0] == scaled(10) &&
              ds.x[1] == 1);
        dlrt_dataset_free(&ds);
        write_file("c.pgm", "P5 2 1 1000 \x03\xe8\x01\xf4", 16, gz);
        CHECK_OK(dlrt_load_pgm(&ds, tpath("c.pgm"), &err), err);
        CHECK(ds.x[0] == 1 && ds.x[1] == 0.5f);
        dlrt_dataset_free(&ds);
    }
    /* trailing whitespace is fine */
    write_text("d.pgm", "P2 1 1 255 17 \n\n");
    CHECK_OK(dlrt_load_pgm(&ds, tpath("d.pgm"), &err), err);
    CHECK(ds.x[0] == (float)(17.0 / 255));
    dlrt_dataset_free(&ds);

    PGM_ERROR("", DLRT_E_FORMAT, "bad.pgm: the file is empty");
    PGM_ERROR("GIF89a", DLRT_E_FORMAT, "not a PGM image: it does not start with P5 or P2");
    PGM_ERROR("P3 1 1 255 1 2 3", DLRT_E_FORMAT, "a Netpbm P3 (PPM, color) image");
    PGM_ERROR("P4 8 1 \x01", DLRT_E_FORMAT, "a Netpbm P4 (PBM, black and white) image");
    PGM_ERROR("P5", DLRT_E_FORMAT, "P5 is followed by the end of the file, not whitespace");
    PGM_ERROR("P5 -2 2 255\n", DLRT_E_FORMAT, "bad PGM header: expected the width, found '-'");
    PGM_ERROR("P5 2 0 255\n", DLRT_E_FORMAT, "the height is 0");
    PGM_ERROR("P5 2 2000000 255\n", DLRT_E_FORMAT, "the height is larger than 1048576");
    PGM_ERROR("P5 99999999999999999999 2 255\n", DLRT_E_FORMAT, "the width is larger");
    PGM_ERROR("P5 2 2 255", DLRT_E_FORMAT, "truncated: the header ends without pixels");
    PGM_ERROR("P5 1 1 255#x\n\x01", DLRT_E_FORMAT,
              "the maxval is followed by '#', not one whitespace character");
    PGM_ERROR("P5 2 1 255\n\x01", DLRT_E_FORMAT, "truncated: 1 of 2 bytes of pixels");
    PGM_ERROR("P5 1 1 300\n\x01\x2d", DLRT_E_FORMAT, "pixel 0 is 301, above the maxval 300");
    PGM_ERROR("P5 1 1 255\n\x01\x02", DLRT_E_FORMAT,
              "1 bytes of data after the image (one image per file)");
    PGM_ERROR("P5 1 1 255\n\x01P5 1 1 255\n\x01", DLRT_E_FORMAT, "bytes of data after the image");
    PGM_ERROR("P2 2 1 255\n1", DLRT_E_FORMAT, "truncated: 1 of 2 pixels");
    PGM_ERROR("P2 2 1 255\n1 2x", DLRT_E_FORMAT, "bad PGM pixels: pixel 1 is followed by 'x'");
    PGM_ERROR("P2 1 1 255\n-1", DLRT_E_FORMAT, "bad PGM pixels: expected pixel 0, found '-'");
    PGM_ERROR("P2 1 1 255\n256", DLRT_E_FORMAT, "pixel 0 is 256, above the maxval 255");
    PGM_ERROR("P2 1 1 255\n99999999999999999999", DLRT_E_FORMAT, "pixel 0 is larger than");
    CHECK_ERROR(dlrt_load_pgm(&ds, tpath("nowhere.pgm"), &err), err, DLRT_E_IO,
                "nowhere.pgm: cannot open: No such file or directory");
    CHECK_ERROR(dlrt_load_pgm(NULL, "x", &err), err, DLRT_E_ARG, "dlrt_load_pgm");
}

/* ======================================================================== */
/* The batcher                                                              */
/* ======================================================================== */

/* n samples of size 2 whose label is their index and whose x is
 * {index, index + 0.5}. */
static DlrtDataset index_dataset(int64_t n) {
    DlrtDataset ds = {.count = n, .rank = 1, .dims = {2}, .sample_size = 2,
                      .num_classes = (int32_t)n};
    ds.x = malloc((size_t)(2 * n + 1) * sizeof *ds.x);
    ds.y = malloc((size_t)(n + 1) * sizeof *ds.y);
    if (!ds.x || !ds.y)
        exit(2);
    for (int64_t i = 0; i < n; i++) {
        ds.x[2 * i] = (float)i;
        ds.x[2 * i + 1] = (float)i + 0.5f;
        ds.y[i] = (int32_t)i;
    }
    return ds;
}

/* Walks one epoch, writing the labels met into seen (count of them) and
 * the batch sizes into sizes (up to 64, the final 0 included); false if a
 * batch's x does not belong with its labels. */
static bool walk_epoch(DlrtBatcher *b, int32_t *seen, int64_t *nseen, int64_t *sizes) {
    float x[2 * 64];
    int32_t y[64];
    bool ok = b->batch <= 64;
    int64_t n, k = 0;
    *nseen = 0;
    do {
        n = dlrt_batcher_next(b, x, y);
        if (k < 64)
            sizes[k++] = n;
        for (int64_t i = 0; i < n; i++) {
            ok = ok && x[2 * i] == (float)y[i] && x[2 * i + 1] == (float)y[i] + 0.5f;
            seen[(*nseen)++] = y[i];
        }
    } while (n > 0 && ok);
    return ok;
}

static bool is_permutation(const int32_t *v, int64_t n) {
    bool ok = true;
    char *mark = calloc((size_t)n + 1, 1);
    for (int64_t i = 0; ok && i < n; i++) {
        ok = mark && v[i] >= 0 && v[i] < n && !mark[v[i]];
        if (ok)
            mark[v[i]] = 1;
    }
    free(mark);
    return ok;
}

static void test_batcher_sizes(void) {
    DlrtDataset ds = index_dataset(10);
    DlrtBatcher b;
    DlrtError err = {0};
    int32_t seen[16];
    int64_t nseen, sizes[64];
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        CHECK_OK(dlrt_batcher_init(&b, &ds, 4, shuffle, 7, &err), err);
        for (int epoch = 0; epoch < 3; epoch++) {
            CHECK(walk_epoch(&b, seen, &nseen, sizes));
            CHECK(nseen == 10 && sizes[0] == 4 && sizes[1] == 4 && sizes[2] == 2 && sizes[3] == 0);
            CHECK(is_permutation(seen, 10));
            CHECK(dlrt_batcher_next(&b, NULL, NULL) == 0); /* stays over */
            dlrt_batcher_next_epoch(&b);
        }
        dlrt_batcher_free(&b);
    }
    /* no shuffle: in order */
    CHECK_OK(dlrt_batcher_init(&b, &ds, 3, false, 7, &err), err);
    CHECK(walk_epoch(&b, seen, &nseen, sizes) && sizes[3] == 1 && sizes[4] == 0);
    bool in_order = nseen == 10;
    for (int i = 0; i < 10; i++)
        in_order = in_order && seen[i] == i;
    CHECK(in_order);
    dlrt_batcher_free(&b);
    /* a batch larger than the dataset; NULL buffers */
    CHECK_OK(dlrt_batcher_init(&b, &ds, 64, true, 7, &err), err);
    CHECK(walk_epoch(&b, seen, &nseen, sizes) && sizes[0] == 10 && sizes[1] == 0);
    dlrt_batcher_next_epoch(&b);
    int32_t y[64];
    CHECK(dlrt_batcher_next(&b, NULL, y) == 10 && is_permutation(y, 10));
    dlrt_batcher_free(&b);
    CHECK(b.order == NULL);
    dlrt_batcher_free(&b);
    dlrt_dataset_free(&ds);
}

/* As streams: 10 samples in 3 runs of 4, 4 and 2 for a batch of 3, row i
 * of each batch the next sample of run i (the last run's row left out
 * once it ends), the same every epoch, shuffling or not; with a batch
 * larger than the dataset, one run per sample. */
static void test_batcher_streams(void) {
    DlrtDataset ds = index_dataset(10);
    DlrtBatcher b;
    DlrtError err = {0};
    int32_t seen[16];
    int64_t nseen, sizes[64];
    static const int32_t want[] = {0, 4, 8, 1, 5, 9, 2, 6, 3, 7};
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        CHECK_OK(dlrt_batcher_init(&b, &ds, 3, shuffle, 7, &err), err);
        dlrt_batcher_streams(&b);
        for (int epoch = 0; epoch < 2; epoch++) {
            CHECK(walk_epoch(&b, seen, &nseen, sizes));
            CHECK(nseen == 10 && sizes[0] == 3 && sizes[1] == 3 && sizes[2] == 2 &&
                  sizes[3] == 2 && sizes[4] == 0);
            CHECK(memcmp(seen, want, sizeof want) == 0);
            dlrt_batcher_next_epoch(&b);
        }
        dlrt_batcher_free(&b);
    }
    CHECK_OK(dlrt_batcher_init(&b, &ds, 64, false, 7, &err), err);
    dlrt_batcher_streams(&b);
    CHECK(walk_epoch(&b, seen, &nseen, sizes) && sizes[0] == 10 && sizes[1] == 0);
    bool in_order = nseen == 10;
    for (int i = 0; i < 10; i++)
        in_order = in_order && seen[i] == i;
    CHECK(in_order);
    dlrt_batcher_free(&b);
    dlrt_dataset_free(&ds);
}

static void test_batcher_errors(void) {
    DlrtDataset ds = index_dataset(5), empty = {0};
    DlrtBatcher b;
    DlrtError err = {0};
    CHECK_ERROR(dlrt_batcher_init(&b, &ds, 0, true, 1, &err), err, DLRT_E_ARG,
                "batch size 0 must be at least 1");
    CHECK(b.order == NULL);
    dlrt_batcher_free(&b);
    CHECK_ERROR(dlrt_batcher_init(&b, &ds, -3, true, 1, &err), err, DLRT_E_ARG,
                "batch size -3 must be at least 1");
    CHECK_ERROR(dlrt_batcher_init(&b, NULL, 4, true, 1, &err), err, DLRT_E_ARG, "no dataset");
    CHECK(dlrt_batcher_init(NULL, &ds, 4, true, 1, &err) == DLRT_E_ARG);
    /* an empty dataset is walked in no batches */
    CHECK_OK(dlrt_batcher_init(&b, &empty, 4, true, 1, &err), err);
    CHECK(dlrt_batcher_next(&b, NULL, NULL) == 0);
    dlrt_batcher_next_epoch(&b);
    CHECK(dlrt_batcher_next(&b, NULL, NULL) == 0);
    dlrt_batcher_free(&b);
    dlrt_dataset_free(&ds);
}

/* The order of the first epochs of a batcher with this seed. */
static bool epoch_orders(const DlrtDataset *ds, uint64_t seed, int epochs, int32_t *out) {
    DlrtBatcher b;
    int64_t nseen, sizes[64];
    bool ok = dlrt_batcher_init(&b, ds, 3, true, seed, NULL) == DLRT_OK;
    for (int e = 0; ok && e < epochs; e++) {
        ok = walk_epoch(&b, out + e * ds->count, &nseen, sizes) && nseen == ds->count;
        dlrt_batcher_next_epoch(&b);
    }
    dlrt_batcher_free(&b);
    return ok;
}

static uint64_t splitmix_step(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void test_batcher_shuffle(void) {
    DlrtDataset ds = index_dataset(20);
    int32_t a[60], b[60], c[60], ident[20];
    for (int i = 0; i < 20; i++)
        ident[i] = i;
    CHECK(epoch_orders(&ds, 42, 3, a) && epoch_orders(&ds, 42, 3, b));
    CHECK(memcmp(a, b, sizeof a) == 0); /* deterministic */
    for (int e = 0; e < 3; e++)
        CHECK(is_permutation(a + 20 * e, 20) && memcmp(a + 20 * e, ident, sizeof ident) != 0);
    CHECK(memcmp(a, a + 20, sizeof ident) != 0 && memcmp(a + 20, a + 40, sizeof ident) != 0);
    int differ = 0;
    for (uint64_t seed = 0; seed < 20; seed++)
        differ += epoch_orders(&ds, seed == 42 ? 1000 : seed, 1, c) &&
                  memcmp(a, c, sizeof ident) != 0;
    CHECK(differ == 20);
    /* the documented algorithm: Fisher–Yates from the top, restarting from
     * 0..n-1 each epoch, on a generator seeded for the epoch with
     * mix(mix(seed) + epoch) (splitmix64's step) */
    DlrtRng rng;
    bool same = true;
    for (int e = 0; e < 3; e++) {
        int32_t o[20];
        dlrt_rng_seed(&rng, splitmix_step(splitmix_step(42) + (uint64_t)e));
        memcpy(o, ident, sizeof o);
        for (int i = 19; i > 0; i--) {
            int j = (int)dlrt_rng_below(&rng, (uint64_t)i + 1);
            int32_t t = o[i];
            o[i] = o[j];
            o[j] = t;
        }
        same = same && memcmp(o, a + 20 * e, sizeof o) == 0;
    }
    CHECK(same);
    /* an epoch's order depends on the seed and its number alone: starting
     * at epoch 2 (as a resumed run does) walks what the third epoch of an
     * uninterrupted walk did, and epoch 0 again what the first did */
    DlrtBatcher bt;
    DlrtError err = {0};
    int64_t nseen, sizes[64];
    CHECK_OK(dlrt_batcher_init(&bt, &ds, 3, true, 42, &err), err);
    dlrt_batcher_start_epoch(&bt, 2);
    CHECK(walk_epoch(&bt, c, &nseen, sizes) && nseen == 20 && memcmp(c, a + 40, sizeof ident) == 0);
    dlrt_batcher_next_epoch(&bt);
    CHECK(bt.epoch == 3);
    dlrt_batcher_start_epoch(&bt, 0);
    CHECK(walk_epoch(&bt, c, &nseen, sizes) && memcmp(c, a, sizeof ident) == 0);
    dlrt_batcher_free(&bt);
    dlrt_dataset_free(&ds);
}

/* Every permutation of 4 is about equally likely over many seeds. */
static void test_batcher_uniform(void) {
    DlrtDataset ds = index_dataset(4);
    int counts[256] = {0};
    int32_t o[8];
    bool ok = true;
    for (uint64_t seed = 0; seed < 12000 && ok; seed++) {
        ok = epoch_orders(&ds, seed, 2, o);
        for (int e = 0; e < 2; e++)
            counts[o[4 * e] * 64 + o[4 * e + 1] * 16 + o[4 * e + 2] * 4 + o[4 * e + 3]]++;
    }
    int distinct = 0, lo = 1 << 30, hi = 0;
    for (int i = 0; i < 256; i++) {
        if (!counts[i])
            continue;
        distinct++;
        lo = counts[i] < lo ? counts[i] : lo;
        hi = counts[i] > hi ? counts[i] : hi;
    }
    /* 1000 expected each; 5 standard deviations is about 160 */
    CHECK(ok && distinct == 24 && lo > 840 && hi < 1160);
    dlrt_dataset_free(&ds);
}

/* ======================================================================== */
/* Modes for lit                                                            */
/* ======================================================================== */

/* Neumaier's compensated sum: the sum of n floats, nearly exactly. */
static double exact_sum(const float *x, int64_t n) {
    double s = 0, c = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i], t = s + v;
        c += fabs(s) >= fabs(v) ? (s - t) + v : (v - t) + s;
        s = t;
    }
    return s + c;
}

/* The bytes that values scaled by 1/255 came from: their sum and CRC-32.
 * False when a value is not such a byte. */
static bool pixel_bytes(const float *x, int64_t n, long long *sum, unsigned long *crc) {
    uint8_t chunk[4096];
    *sum = 0;
    *crc = crc32(0, NULL, 0);
    for (int64_t i = 0; i < n;) {
        int k = 0;
        for (; k < (int)sizeof chunk && i < n; k++, i++) {
            double v = round((double)x[i] * 255.0);
            if (v < 0 || v > 255)
                return false;
            chunk[k] = (uint8_t)v;
            *sum += chunk[k];
        }
        *crc = crc32(*crc, chunk, (unsigned)k);
    }
    return true;
}

/* Prints what the Python reference prints for the same data. */
static void dump(const char *name, const DlrtDataset *ds, bool bytes) {
    char shape[128];
    int64_t n = ds->count * ds->sample_size;
    printf("%s: %lld samples of %s, %d classes\n", name, (long long)ds->count,
           dlrt_shape_text(shape, sizeof shape, ds->dims, ds->rank), (int)ds->num_classes);
    printf("%s: first labels", name);
    for (int64_t i = 0; i < ds->count && i < 10; i++)
        printf(" %d", (int)ds->y[i]);
    printf("\n%s: label histogram", name);
    for (int32_t c = 0; c < ds->num_classes && c < 100; c++) {
        int64_t k = 0;
        for (int64_t i = 0; i < ds->count; i++)
            k += ds->y[i] == c;
        printf(" %lld", (long long)k);
    }
    /* from the middle of the first sample, away from an image's blank border */
    printf("\n%s: values from %lld", name, (long long)(ds->sample_size / 2));
    for (int64_t i = ds->sample_size / 2; i < n && i < ds->sample_size / 2 + 8; i++)
        printf(" %.9g", (double)ds->x[i]);
    printf("\n%s: scaled sum %.6f\n", name, exact_sum(ds->x, n));
    long long sum;
    unsigned long crc;
    if (bytes && pixel_bytes(ds->x, n, &sum, &crc))
        printf("%s: pixel sum %lld, crc32 %08lx\n", name, sum, crc);
    else if (!bytes)
        printf("%s: values crc32 %08lx\n", name,
               crc32(0, (const Bytef *)ds->x, (unsigned)((size_t)n * sizeof *ds->x)));
    else
        printf("%s: values are not bytes scaled by 1/255\n", name);
}

static int fail_mode(const DlrtError *err) {
    fprintf(stderr, "error: %s: %s\n", dlrt_status_name(err->status), err->message);
    return 1;
}

/* One epoch of the batches mode: sizes, the order, the first batch. */
static bool batches_epoch(DlrtBatcher *b, int epoch, float *x, int32_t *y) {
    const DlrtDataset *ds = b->ds;
    int64_t n, batches = 0, last = 0, pos = 0;
    bool match = true;
    while ((n = dlrt_batcher_next(b, x, y)) > 0) {
        for (int64_t k = 0; k < n; k++) {
            int64_t i = b->order[pos + k];
            match = match && y[k] == ds->y[i] &&
                    memcmp(x + k * ds->sample_size, ds->x + i * ds->sample_size,
                           (size_t)ds->sample_size * sizeof *x) == 0;
        }
        if (batches++ == 0) {
            long long sum;
            unsigned long crc = 0;
            pixel_bytes(x, n * ds->sample_size, &sum, &crc);
            printf("epoch %d: first batch labels", epoch);
            for (int64_t k = 0; k < n && k < 16; k++)
                printf(" %d", (int)y[k]);
            printf("\nepoch %d: first batch pixel crc32 %08lx\n", epoch, crc);
        }
        pos += n;
        last = n;
    }
    printf("epoch %d: %lld batches of %lld, the last of %lld\n", epoch, (long long)batches,
           (long long)b->batch, (long long)last);
    printf("epoch %d: order starts", epoch);
    for (int64_t i = 0; i < ds->count && i < 8; i++)
        printf(" %lld", (long long)b->order[i]);
    int32_t *order32 = malloc((size_t)ds->count * sizeof *order32);
    for (int64_t i = 0; order32 && i < ds->count; i++)
        order32[i] = (int32_t)b->order[i];
    bool perm = order32 && is_permutation(order32, ds->count) && pos == ds->count;
    free(order32);
    printf("\nepoch %d: %s\n", epoch, perm && match ? "a permutation; the batches follow it"
                                                  : "NOT a permutation, or batches astray");
    return perm && match;
}

static int mode_batches(const char *dir, long long batch, unsigned long long seed, int epochs) {
    DlrtDataset ds;
    DlrtBatcher b;
    DlrtError err = {0};
    if (dlrt_load_idx_dir(&ds, NULL, dir, NULL, &err) != DLRT_OK)
        return fail_mode(&err);
    if (dlrt_batcher_init(&b, &ds, batch, true, seed, &err) != DLRT_OK) {
        dlrt_dataset_free(&ds);
        return fail_mode(&err);
    }
    float *x = malloc((size_t)(batch * ds.sample_size) * sizeof *x);
    int32_t *y = malloc((size_t)batch * sizeof *y);
    bool ok = x && y;
    for (int e = 1; ok && e <= epochs; e++) {
        ok = batches_epoch(&b, e, x, y);
        dlrt_batcher_next_epoch(&b);
    }
    free(x);
    free(y);
    dlrt_batcher_free(&b);
    dlrt_dataset_free(&ds);
    return ok ? 0 : 1;
}

static int run_mode(int argc, char **argv) {
    DlrtDataset a = {0}, b = {0};
    DlrtError err = {0};
    DlrtStatus st = DLRT_OK;
    const char *mode = argv[1];
    if (strcmp(mode, "idx-dir") == 0 && argc == 3) {
        if ((st = dlrt_load_idx_dir(&a, &b, argv[2], NULL, &err)) == DLRT_OK) {
            dump("train", &a, true);
            dump("test", &b, true);
        }
    } else if (strcmp(mode, "idx") == 0 && argc == 4) {
        if ((st = dlrt_load_idx(&a, argv[2], argv[3], NULL, &err)) == DLRT_OK)
            dump("data", &a, true);
    } else if (strcmp(mode, "npy") == 0 && argc == 4) {
        if ((st = dlrt_load_npy(&a, argv[2], argv[3], NULL, &err)) == DLRT_OK)
            dump("data", &a, false);
    } else if (strcmp(mode, "csv") == 0 && (argc == 4 || argc == 5)) {
        bool header = argc == 5 && strcmp(argv[4], "header") == 0;
        if ((st = dlrt_load_csv(&a, argv[2], atoi(argv[3]), header, NULL, &err)) == DLRT_OK)
            dump("data", &a, false);
    } else if (strcmp(mode, "batches") == 0 && argc == 6) {
        return mode_batches(argv[2], atoll(argv[3]), strtoull(argv[4], NULL, 10), atoi(argv[5]));
    } else {
        fprintf(stderr, "usage: test_data [idx-dir DIR | idx IMAGES LABELS | npy IMAGES LABELS"
                        " | csv FILE LABEL_COLUMN [header] | batches DIR BATCH SEED EPOCHS]\n");
        return 2;
    }
    dlrt_dataset_free(&a);
    dlrt_dataset_free(&b);
    return st == DLRT_OK ? 0 : fail_mode(&err);
}

/* ======================================================================== */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(path);
}

int main(int argc, char **argv) {
    if (argc > 1)
        return run_mode(argc, argv);
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch_dir, sizeof scratch_dir, "%s/dlrt-data-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(scratch_dir)) {
        perror("test_data: mkdtemp");
        return 2;
    }
    test_idx_load();
    test_idx_scaling();
    test_idx_ranks();
    test_idx_header_errors();
    test_idx_dims_errors();
    test_idx_data_errors();
    test_idx_io_errors();
    test_idx_dir();
    test_idx_dir_errors();
    test_npy_bytes();
    test_npy_dtypes();
    test_npy_labels();
    test_npy_header_errors();
    test_npy_file_errors();
    test_npy_label_errors();
    test_csv();
    test_csv_errors();
    test_check();
    test_images_only();
    test_pgm();
    test_batcher_sizes();
    test_batcher_streams();
    test_batcher_errors();
    test_batcher_shuffle();
    test_batcher_uniform();
    nftw(scratch_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return harness_report();
}
