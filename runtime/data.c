/* data.c — datasets in memory: IDX (as MNIST ships), NumPy .npy, CSV.
 *
 * Every loader reads through zlib's gzread, which inflates gzip data and
 * passes anything else through unchanged, so a file loads compressed or not
 * whatever its name says (foo.idx, foo.idx.gz, even a .npy.gz or .csv.gz).
 * A loader validates all it reads (magic, header, shape, exact length,
 * counts, labels) before it hands back a dataset, and names the file and
 * the problem in its message; on failure the dataset is left zeroed and
 * nothing is leaked.  Payloads are read in pieces into a buffer that grows
 * as data arrives, so a header that claims terabytes fails as truncated,
 * not as a giant allocation.
 *
 * Sample shapes: IDX images of 2-d samples (28x28) get a channel dimension,
 * {1, 28, 28}, as the networks in models/ expect; IDX samples of other
 * ranks, and every .npy shape, are kept exactly as stored: a .npy of shape
 * [count, 28, 28] gives samples of [28, 28], so save [count, 1, 28, 28] for
 * a network that takes f32[1, 28, 28].  CSV samples are one-dimensional.
 *
 * Scaling: x = (raw * scale - mean) / std, computed in double and rounded
 * once to float.  A NULL scaling means dlrt_scaling_default() (1/255, 0, 1)
 * for unsigned-byte data (IDX, .npy |u1) and the identity (1, 0, 1) for all
 * else (other .npy dtypes, CSV), whose values are taken to be in the units
 * the network wants already.  Non-finite results are rejected.
 *
 * The *_images loaders read images without labels, to classify: the
 * dataset's y is NULL.  A .npy array of exactly the network's input shape
 * is one sample there, since np.save(path, image) is how one saves one.
 *
 * Numbers in CSV are read with strtod, so in the "C" locale (the one a
 * program runs in unless it calls setlocale) the decimal point is '.'.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dlrt.h"

/* No file may hold more elements than this: a sanity limit that keeps all
 * byte counts below 2^43, far from overflowing int64_t. */
#define MAX_ELEMENTS (INT64_C(1) << 40)
/* num_classes = 1 + the largest label must fit in an int32_t. */
#define MAX_LABEL (INT32_MAX - 1)
/* Reads go to zlib in pieces of at most this many bytes, and buffers
 * start at this size. */
#define CHUNK (INT64_C(1) << 20)
/* A .npy header longer than this is taken to be corrupt. */
#define NPY_MAX_HEADER (1u << 20)
/* NumPy's own limit on dimensions. */
#define NPY_MAX_DIMS 32

DlrtScaling dlrt_scaling_default(void) {
    return (DlrtScaling){.scale = 1.0f / 255.0f, .mean = 0.0f, .std = 1.0f};
}

static const DlrtScaling identity_scaling = {.scale = 1.0f, .mean = 0.0f, .std = 1.0f};

/* The scaling to use: the caller's, checked, or fallback when NULL. */
static DlrtStatus resolve_scaling(const DlrtScaling *given, DlrtScaling fallback,
                                  DlrtScaling *out, DlrtError *err) {
    *out = given ? *given : fallback;
    if (!isfinite(out->scale) || !isfinite(out->mean))
        return dlrt_fail(err, DLRT_E_ARG, "scaling: scale %g and mean %g must be finite",
                         (double)out->scale, (double)out->mean);
    if (!(out->std > 0) || !isfinite(out->std))
        return dlrt_fail(err, DLRT_E_ARG, "scaling: std %g must be positive and finite",
                         (double)out->std);
    return DLRT_OK;
}

static float scale_value(double raw, const DlrtScaling *s) {
    return (float)((raw * s->scale - s->mean) / s->std);
}

const char *dlrt_shape_text(char *buf, size_t size, const int64_t *dims, int rank) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

/* Multiplies the dims into *elements; false when zero-free dims multiply
 * past MAX_ELEMENTS. */
static bool dims_product(const int64_t *dims, int rank, int64_t *elements) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] > MAX_ELEMENTS / n)
            return false;
        n *= dims[i];
    }
    *elements = n;
    return true;
}

/* ---- reading through zlib ---------------------------------------------- */

/* A file open for reading; gzread inflates gzip and passes plain data. */
typedef struct Reader {
    gzFile f;          /* NULL when closed */
    const char *path;  /* as the caller named it, for messages */
    int64_t offset;    /* uncompressed bytes read so far */
} Reader;

static DlrtStatus reader_open(Reader *r, const char *path, DlrtError *err) {
    r->path = path;
    r->offset = 0;
    errno = 0;
    r->f = gzopen(path, "rb");
    if (!r->f) {
        if (errno == 0 || errno == ENOMEM)
            return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory opening the file", path);
        return dlrt_fail(err, DLRT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    gzbuffer(r->f, 1u << 17);
    return DLRT_OK;
}

static void reader_close(Reader *r) {
    if (r->f)
        gzclose(r->f);
    r->f = NULL;
}

/* The failure gzread reported, as a status and message. */
static DlrtStatus reader_error(Reader *r, DlrtError *err) {
    int errnum = Z_OK;
    const char *msg = gzerror(r->f, &errnum);
    size_t plen = strlen(r->path);
    /* zlib prefixes its messages with the path it was given */
    if (strncmp(msg, r->path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0)
        msg += plen + 2;
    if (errnum == Z_MEM_ERROR)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory reading the file", r->path);
    if (errnum == Z_ERRNO)
        return dlrt_fail(err, DLRT_E_IO, "%s: cannot read: %s", r->path, msg);
    return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad gzip data: %s", r->path, msg);
}

/* Reads up to n bytes into buf, fewer only at the end of the data. */
static DlrtStatus reader_read(Reader *r, void *buf, int64_t n, int64_t *got, DlrtError *err) {
    *got = 0;
    while (*got < n) {
        int64_t want = n - *got < CHUNK ? n - *got : CHUNK;
        int k = gzread(r->f, (char *)buf + *got, (unsigned)want);
        if (k < 0)
            return reader_error(r, err);
        if (k == 0)
            break;
        *got += k;
    }
    r->offset += *got;
    return DLRT_OK;
}

/* The data ended at r->offset where total bytes were due. */
static DlrtStatus truncated(Reader *r, int64_t total, DlrtError *err) {
    int errnum = Z_OK;
    gzerror(r->f, &errnum);
    return dlrt_fail(err, DLRT_E_FORMAT, "%s: truncated: %lld of %lld bytes%s", r->path,
                     (long long)r->offset, (long long)total,
                     errnum == Z_BUF_ERROR ? " (the gzip stream is cut short)" : "");
}

/* Reads into a new buffer until limit bytes or the end of the data; the
 * buffer grows as data arrives and keeps one spare byte past *have. */
static DlrtStatus read_growing(Reader *r, int64_t limit, uint8_t **out, int64_t *have,
                               DlrtError *err) {
    uint8_t *buf = NULL;
    int64_t cap = 0, got = 0;
    *out = NULL;
    *have = 0;
    for (;;) {
        if (*have == cap) {
            if (cap == limit)
                break;
            int64_t ncap = cap < CHUNK ? CHUNK : cap > limit / 2 ? limit : 2 * cap;
            ncap = ncap < limit ? ncap : limit;
            uint8_t *nbuf = (uint64_t)ncap < SIZE_MAX ? realloc(buf, (size_t)ncap + 1) : NULL;
            if (!nbuf) {
                free(buf);
                return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory after %lld bytes",
                                 r->path, (long long)*have);
            }
            buf = nbuf;
            cap = ncap;
        }
        DlrtStatus st = reader_read(r, buf + *have, cap - *have, &got, err);
        if (st != DLRT_OK) {
            free(buf);
            return st;
        }
        *have += got;
        if (got == 0)
            break;
    }
    *out = buf;
    return DLRT_OK;
}

/* Fails unless the data ends here, counting what is left over. */
static DlrtStatus expect_end(Reader *r, DlrtError *err) {
    int64_t expected = r->offset, extra = 0, got = 0;
    char scratch[4096];
    do {
        DlrtStatus st = reader_read(r, scratch, sizeof scratch, &got, err);
        if (st != DLRT_OK)
            return st;
        extra += got;
    } while (got > 0);
    if (extra > 0)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: %lld byte%s of trailing data after the %lld "
                         "expected", r->path, (long long)extra, extra == 1 ? "" : "s",
                         (long long)expected);
    return DLRT_OK;
}

/* Reads exactly n more bytes, the end of the file, into a new buffer. */
static DlrtStatus read_payload(Reader *r, int64_t n, uint8_t **out, DlrtError *err) {
    int64_t total = r->offset + n, have = 0;
    DlrtStatus st = read_growing(r, n, out, &have, err);
    if (st == DLRT_OK && have < n)
        st = truncated(r, total, err);
    if (st == DLRT_OK)
        st = expect_end(r, err);
    if (st != DLRT_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

/* Reads exactly n bytes of a header; short is truncation. */
static DlrtStatus read_header_bytes(Reader *r, void *buf, int64_t n, int64_t total,
                                    DlrtError *err) {
    int64_t got = 0;
    DlrtStatus st = reader_read(r, buf, n, &got, err);
    if (st != DLRT_OK)
        return st;
    if (r->offset == 0)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: the file is empty", r->path);
    if (got < n)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: truncated: %lld of %lld header bytes",
                         r->path, (long long)r->offset, (long long)total);
    return DLRT_OK;
}

/* ---- the dataset ------------------------------------------------------- */

/* Sets the shape and allocates x, and y when labels; on failure ds stays
 * zeroed. */
static DlrtStatus dataset_alloc(DlrtDataset *ds, int64_t count, int rank, const int64_t *dims,
                                bool labels, const char *path, DlrtError *err) {
    int64_t size = 1;
    for (int i = 0; i < rank; i++)
        size *= dims[i];
    memset(ds, 0, sizeof *ds);
    if ((uint64_t)count * (uint64_t)size > SIZE_MAX / sizeof(float))
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: too large for memory", path);
    ds->x = malloc((size_t)(count * size) * sizeof *ds->x);
    ds->y = labels ? malloc((size_t)count * sizeof *ds->y) : NULL;
    if (!ds->x || (labels && !ds->y)) {
        dlrt_dataset_free(ds);
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory for %lld samples of %lld values",
                         path, (long long)count, (long long)size);
    }
    ds->count = count;
    ds->rank = rank;
    memcpy(ds->dims, dims, (size_t)rank * sizeof *dims);
    ds->sample_size = size;
    return DLRT_OK;
}

static void dataset_count_classes(DlrtDataset *ds) {
    int32_t top = -1;
    for (int64_t i = 0; i < ds->count; i++)
        top = ds->y[i] > top ? ds->y[i] : top;
    ds->num_classes = top + 1;
}

static DlrtStatus check_counts(const char *images, int64_t nimages, const char *labels,
                               int64_t nlabels, DlrtError *err) {
    if (nimages != nlabels)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s has %lld labels but %s has %lld images",
                         labels, (long long)nlabels, images, (long long)nimages);
    return DLRT_OK;
}

int64_t dlrt_dataset_label_size(const DlrtDataset *ds) {
    return ds->label_size > 0 ? ds->label_size : 1;
}

void dlrt_dataset_free(DlrtDataset *ds) {
    if (!ds)
        return;
    free(ds->x);
    free(ds->y);
    memset(ds, 0, sizeof *ds);
}

/* ---- IDX --------------------------------------------------------------- */

/* What an IDX header says. */
typedef struct IdxHeader {
    int rank;                                /* dimensions, the count included */
    int64_t dims[1 + DLRT_MAX_SAMPLE_RANK];  /* the count first */
    int64_t elements;                        /* their product: the data bytes */
} IdxHeader;

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static const char *idx_type_name(int type) {
    switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    }
    return "unknown";
}

/* The magic: two zero bytes, the data type, the rank. */
static DlrtStatus idx_check_magic(const char *path, const uint8_t *m, bool labels,
                                  DlrtError *err) {
    uint32_t magic = be32(m);
    int rank = m[3];
    if (m[0] || m[1])
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not an IDX file: bad magic number 0x%08x",
                         path, (unsigned)magic);
    if (m[2] != 0x08)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: IDX data type 0x%02x (%s) is not supported, "
                         "only unsigned bytes (0x08)", path, m[2], idx_type_name(m[2]));
    if (labels && rank != 1)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not an IDX labels file: magic 0x%08x has "
                         "rank %d, not 1 (0x00000801)", path, (unsigned)magic, rank);
    if (!labels && (rank < 2 || rank > 1 + DLRT_MAX_SAMPLE_RANK))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not an IDX images file: magic 0x%08x has "
                         "rank %d, not 2 to %d (0x00000803 for 2-d images)%s", path,
                         (unsigned)magic, rank, 1 + DLRT_MAX_SAMPLE_RANK,
                         rank == 1 ? "; is it a labels file?" : "");
    return DLRT_OK;
}

static DlrtStatus idx_read_header(Reader *r, bool labels, IdxHeader *h, DlrtError *err) {
    uint8_t buf[4 * (2 + DLRT_MAX_SAMPLE_RANK)];
    DlrtStatus st = read_header_bytes(r, buf, 4, 4, err);
    if (st == DLRT_OK)
        st = idx_check_magic(r->path, buf, labels, err);
    if (st != DLRT_OK)
        return st;
    h->rank = buf[3];
    st = read_header_bytes(r, buf + 4, 4 * h->rank, 4 + 4 * h->rank, err);
    if (st != DLRT_OK)
        return st;
    for (int i = 0; i < h->rank; i++) {
        h->dims[i] = be32(buf + 4 + 4 * i);
        if (h->dims[i] == 0)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s: dimension %d of %d is zero", r->path,
                             i + 1, h->rank);
    }
    char shape[128];
    if (!dims_product(h->dims, h->rank, &h->elements))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: dimensions %s are too large", r->path,
                         dlrt_shape_text(shape, sizeof shape, h->dims, h->rank));
    return DLRT_OK;
}

/* Fills ds from the raw bytes of a checked pair of files (labels NULL for
 * images alone). */
static DlrtStatus idx_fill(DlrtDataset *ds, const IdxHeader *h, const uint8_t *pixels,
                           const uint8_t *labels, const DlrtScaling *s, const char *path,
                           DlrtError *err) {
    int64_t dims[DLRT_MAX_SAMPLE_RANK + 1] = {1};
    int rank = h->rank - 1;
    /* a 2-d image gets a channel dimension of 1 */
    memcpy(dims + (rank == 2), h->dims + 1, (size_t)rank * sizeof *dims);
    rank += rank == 2;
    DlrtStatus st = dataset_alloc(ds, h->dims[0], rank, dims, labels != NULL, path, err);
    if (st != DLRT_OK)
        return st;
    float lut[256];
    for (int v = 0; v < 256; v++) {
        lut[v] = scale_value(v, s);
        if (!isfinite(lut[v])) {
            dlrt_dataset_free(ds);
            return dlrt_fail(err, DLRT_E_RANGE, "%s: pixel value %d is not finite once scaled "
                             "to float", path, v);
        }
    }
    for (int64_t i = 0; i < h->elements; i++)
        ds->x[i] = lut[pixels[i]];
    if (labels) {
        for (int64_t i = 0; i < ds->count; i++)
            ds->y[i] = labels[i];
        dataset_count_classes(ds);
    }
    return DLRT_OK;
}

DlrtStatus dlrt_load_idx(DlrtDataset *ds, const char *images, const char *labels,
                         const DlrtScaling *scaling, DlrtError *err) {
    if (!ds || !images || !labels)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_load_idx: a dataset and two paths are needed");
    memset(ds, 0, sizeof *ds);
    DlrtScaling s;
    Reader ri = {0}, rl = {0};
    IdxHeader hi = {0}, hl = {0};
    uint8_t *pixels = NULL, *labs = NULL;
    DlrtStatus st = resolve_scaling(scaling, dlrt_scaling_default(), &s, err);
    if (st == DLRT_OK)
        st = reader_open(&ri, images, err);
    if (st == DLRT_OK)
        st = reader_open(&rl, labels, err);
    if (st == DLRT_OK)
        st = idx_read_header(&ri, false, &hi, err);
    if (st == DLRT_OK)
        st = idx_read_header(&rl, true, &hl, err);
    if (st == DLRT_OK)
        st = check_counts(images, hi.dims[0], labels, hl.dims[0], err);
    if (st == DLRT_OK)
        st = read_payload(&ri, hi.elements, &pixels, err);
    if (st == DLRT_OK)
        st = read_payload(&rl, hl.elements, &labs, err);
    if (st == DLRT_OK)
        st = idx_fill(ds, &hi, pixels, labs, &s, images, err);
    reader_close(&ri);
    reader_close(&rl);
    free(pixels);
    free(labs);
    return st;
}

DlrtStatus dlrt_load_idx_images(DlrtDataset *ds, const char *path, const DlrtScaling *scaling,
                                DlrtError *err) {
    if (!ds || !path)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_load_idx_images: a dataset and a path are needed");
    memset(ds, 0, sizeof *ds);
    DlrtScaling s;
    Reader r = {0};
    IdxHeader h = {0};
    uint8_t *pixels = NULL;
    DlrtStatus st = resolve_scaling(scaling, dlrt_scaling_default(), &s, err);
    if (st == DLRT_OK)
        st = reader_open(&r, path, err);
    if (st == DLRT_OK)
        st = idx_read_header(&r, false, &h, err);
    if (st == DLRT_OK)
        st = read_payload(&r, h.elements, &pixels, err);
    if (st == DLRT_OK)
        st = idx_fill(ds, &h, pixels, NULL, &s, path, err);
    reader_close(&r);
    free(pixels);
    return st;
}

/* The four files of an MNIST-style folder. */
static const char *const idx_names[4] = {
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
};

static bool file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f)
        fclose(f);
    return f != NULL;
}

/* dir/name or, failing that, dir/name.gz, as a new string. */
static DlrtStatus find_in_dir(const char *dir, const char *name, char **path, DlrtError *err) {
    size_t n = strlen(dir) + strlen(name) + sizeof "/.gz";
    char *p = malloc(n);
    if (!p)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory", dir);
    for (int gz = 0; gz < 2; gz++) {
        snprintf(p, n, "%s/%s%s", dir, name, gz ? ".gz" : "");
        if (file_exists(p)) {
            *path = p;
            return DLRT_OK;
        }
    }
    free(p);
    return dlrt_fail(err, DLRT_E_IO, "%s (or %s.gz) not found in %s", name, name, dir);
}

DlrtStatus dlrt_load_idx_dir(DlrtDataset *train, DlrtDataset *test, const char *dir,
                             const DlrtScaling *scaling, DlrtError *err) {
    if ((!train && !test) || !dir)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_load_idx_dir: a dataset and a folder are needed");
    if (train)
        memset(train, 0, sizeof *train);
    if (test)
        memset(test, 0, sizeof *test);
    char *paths[4] = {0};
    DlrtStatus st = DLRT_OK;
    for (int i = train ? 0 : 2; i < (test ? 4 : 2) && st == DLRT_OK; i++)
        st = find_in_dir(dir, idx_names[i], &paths[i], err);
    if (st == DLRT_OK && train)
        st = dlrt_load_idx(train, paths[0], paths[1], scaling, err);
    if (st == DLRT_OK && test) {
        st = dlrt_load_idx(test, paths[2], paths[3], scaling, err);
        if (st != DLRT_OK && train)
            dlrt_dataset_free(train);
    }
    for (int i = 0; i < 4; i++)
        free(paths[i]);
    return st;
}

/* ---- NumPy .npy -------------------------------------------------------- */

/* What a .npy header says. */
typedef struct NpyHeader {
    char descr[24];             /* the dtype as written: "<f4" */
    char kind;                  /* 'b' bool, 'i' signed, 'u' unsigned, 'f' float */
    int size;                   /* bytes per element: 1, 2, 4 or 8 */
    int rank;                   /* dimensions, the count included */
    int64_t dims[NPY_MAX_DIMS]; /* the shape */
    int64_t elements;           /* product of dims */
} NpyHeader;

/* A position in the text of a .npy header (a Python dict literal). */
typedef struct Cursor {
    const char *p;     /* next character; the text ends with a NUL */
    const char *path;  /* the file, for messages */
} Cursor;

static void skip_space(Cursor *c) {
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')
        c->p++;
}

static bool accept(Cursor *c, char ch) {
    skip_space(c);
    if (*c->p != ch)
        return false;
    c->p++;
    return true;
}

static DlrtStatus syntax_error(Cursor *c, const char *expected, DlrtError *err) {
    return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad .npy header: expected %s at \"%.24s\"",
                     c->path, expected, c->p);
}

/* A quoted Python string without escapes. */
static DlrtStatus parse_string(Cursor *c, char *out, size_t size, DlrtError *err) {
    skip_space(c);
    char quote = *c->p;
    if (quote != '\'' && quote != '"')
        return syntax_error(c, "a string", err);
    const char *end = strchr(c->p + 1, quote);
    if (!end)
        return syntax_error(c, "a closed string", err);
    size_t n = (size_t)(end - c->p - 1);
    if (n >= size)
        return syntax_error(c, "a shorter string", err);
    memcpy(out, c->p + 1, n);
    out[n] = '\0';
    c->p = end + 1;
    return DLRT_OK;
}

static DlrtStatus parse_bool(Cursor *c, bool *out, DlrtError *err) {
    skip_space(c);
    if (strncmp(c->p, "True", 4) == 0 || strncmp(c->p, "False", 5) == 0) {
        *out = *c->p == 'T';
        c->p += *out ? 4 : 5;
        return DLRT_OK;
    }
    return syntax_error(c, "True or False", err);
}

/* A non-negative integer, with the 'L' of Python 2 longs allowed. */
static DlrtStatus parse_dim(Cursor *c, int64_t *out, DlrtError *err) {
    skip_space(c);
    if (*c->p < '0' || *c->p > '9')
        return syntax_error(c, "a dimension", err);
    int64_t v = 0;
    for (; *c->p >= '0' && *c->p <= '9'; c->p++) {
        if (v > (INT64_MAX - 9) / 10)
            return syntax_error(c, "a smaller dimension", err);
        v = v * 10 + (*c->p - '0');
    }
    if (*c->p == 'L')
        c->p++;
    *out = v;
    return DLRT_OK;
}

/* (d0, d1, ...) with a trailing comma allowed: "(5,)", "()". */
static DlrtStatus parse_shape(Cursor *c, NpyHeader *h, DlrtError *err) {
    if (!accept(c, '('))
        return syntax_error(c, "a shape tuple", err);
    h->rank = 0;
    while (!accept(c, ')')) {
        if (h->rank == NPY_MAX_DIMS)
            return syntax_error(c, "at most 32 dimensions", err);
        DlrtStatus st = parse_dim(c, &h->dims[h->rank++], err);
        if (st != DLRT_OK)
            return st;
        if (!accept(c, ',') && (skip_space(c), *c->p != ')'))
            return syntax_error(c, "',' or ')'", err);
    }
    return DLRT_OK;
}

/* '<f4' into kind and size; big-endian and unknown dtypes are refused. */
static DlrtStatus npy_dtype(const char *path, NpyHeader *h, DlrtError *err) {
    const char *d = h->descr;
    static const char *const known[] = {"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4",
                                        "u8", "f2", "f4", "f8"};
    bool ok = false;
    for (size_t i = 0; i < sizeof known / sizeof *known && !ok; i++)
        ok = strchr("<>|=", d[0]) && d[0] && strcmp(d + 1, known[i]) == 0;
    if (!ok)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: dtype '%s' is not supported (bool, integers "
                         "and float16/32/64 are)", path, d);
    h->kind = d[1];
    h->size = d[2] - '0';
    if (d[0] == '>' && h->size > 1)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: dtype '%s' is big-endian, which is not "
                         "supported: save the array as arr.astype('<%s')", path, d, d + 1);
    return DLRT_OK;
}

/* One "key: value" of the header dict; seen counts the keys met. */
static DlrtStatus parse_entry(Cursor *c, NpyHeader *h, bool seen[3], DlrtError *err) {
    char key[32];
    bool fortran = false;
    DlrtStatus st = parse_string(c, key, sizeof key, err);
    if (st == DLRT_OK && !accept(c, ':'))
        st = syntax_error(c, "':'", err);
    if (st != DLRT_OK)
        return st;
    int which = strcmp(key, "descr") == 0 ? 0 : strcmp(key, "fortran_order") == 0 ? 1
              : strcmp(key, "shape") == 0 ? 2 : -1;
    if (which < 0 || seen[which])
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad .npy header: %s key '%s'", c->path,
                         which < 0 ? "unknown" : "repeated", key);
    seen[which] = true;
    if (which == 2)
        return parse_shape(c, h, err);
    if (which == 1) {
        st = parse_bool(c, &fortran, err);
        if (st == DLRT_OK && fortran)
            st = dlrt_fail(err, DLRT_E_FORMAT, "%s: fortran_order is True, which is not "
                           "supported: save np.ascontiguousarray(arr)", c->path);
        return st;
    }
    skip_space(c);
    if (*c->p == '[')
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: structured dtypes are not supported",
                         c->path);
    st = parse_string(c, h->descr, sizeof h->descr, err);
    return st == DLRT_OK ? npy_dtype(c->path, h, err) : st;
}

/* {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } */
static DlrtStatus parse_header(Cursor *c, NpyHeader *h, DlrtError *err) {
    bool seen[3] = {false, false, false};
    if (!accept(c, '{'))
        return syntax_error(c, "'{'", err);
    while (!accept(c, '}')) {
        DlrtStatus st = parse_entry(c, h, seen, err);
        if (st != DLRT_OK)
            return st;
        if (!accept(c, ',') && (skip_space(c), *c->p != '}'))
            return syntax_error(c, "',' or '}'", err);
    }
    skip_space(c);
    if (*c->p)
        return syntax_error(c, "the end of the header", err);
    if (!seen[0] || !seen[1] || !seen[2])
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad .npy header: no '%s' key", c->path,
                         !seen[0] ? "descr" : !seen[1] ? "fortran_order" : "shape");
    return DLRT_OK;
}

/* The magic and version, then the length of the header text. */
static DlrtStatus npy_read_preamble(Reader *r, uint32_t *len, DlrtError *err) {
    uint8_t pre[12];
    DlrtStatus st = read_header_bytes(r, pre, 8, 10, err);
    if (st == DLRT_OK && memcmp(pre, "\x93NUMPY", 6) != 0)
        st = dlrt_fail(err, DLRT_E_FORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", r->path);
    if (st == DLRT_OK && (pre[6] < 1 || pre[6] > 3))
        st = dlrt_fail(err, DLRT_E_FORMAT, "%s: .npy format version %d.%d is not supported "
                       "(1.0, 2.0 and 3.0 are)", r->path, pre[6], pre[7]);
    if (st != DLRT_OK)
        return st;
    int lenbytes = pre[6] == 1 ? 2 : 4;
    st = read_header_bytes(r, pre + 8, lenbytes, 8 + lenbytes, err);
    if (st != DLRT_OK)
        return st;
    *len = pre[8] | (uint32_t)pre[9] << 8;
    if (lenbytes == 4)
        *len |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    if (*len > NPY_MAX_HEADER)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: .npy header of %u bytes is too long",
                         r->path, (unsigned)*len);
    return DLRT_OK;
}

static DlrtStatus npy_read_header(Reader *r, NpyHeader *h, DlrtError *err) {
    uint32_t len = 0;
    DlrtStatus st = npy_read_preamble(r, &len, err);
    if (st != DLRT_OK)
        return st;
    char *text = malloc((size_t)len + 1);
    if (!text)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory for the header", r->path);
    st = read_header_bytes(r, text, len, r->offset + len, err);
    if (st == DLRT_OK) {
        text[len] = '\0';
        if (strlen(text) != len)
            st = dlrt_fail(err, DLRT_E_FORMAT, "%s: bad .npy header: a NUL byte", r->path);
    }
    if (st == DLRT_OK) {
        Cursor c = {.p = text, .path = r->path};
        memset(h, 0, sizeof *h);
        st = parse_header(&c, h, err);
    }
    free(text);
    return st;
}

/* Checks the shape of a header: what = "images" or "labels". */
static DlrtStatus npy_check_shape(const char *path, NpyHeader *h, bool labels, DlrtError *err) {
    char shape[128];
    dlrt_shape_text(shape, sizeof shape, h->dims, h->rank);
    if (labels && h->rank != 1)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: labels have shape %s, not [count]", path,
                         shape);
    if (!labels && (h->rank < 2 || h->rank > 1 + DLRT_MAX_SAMPLE_RANK))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: images have shape %s, not [count, ...] with "
                         "1 to %d dimensions per sample", path, shape, DLRT_MAX_SAMPLE_RANK);
    if (labels && h->kind != 'i' && h->kind != 'u')
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: labels have dtype '%s'; they must be "
                         "integers", path, h->descr);
    for (int i = 0; i < h->rank; i++)
        if (h->dims[i] == 0)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s: shape %s has no elements", path, shape);
    if (!dims_product(h->dims, h->rank, &h->elements) || h->elements > MAX_ELEMENTS / h->size)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: shape %s is too large", path, shape);
    return DLRT_OK;
}

/* The little-endian bits of one element. */
static uint64_t le_bits(const uint8_t *p, int size) {
    uint64_t v = 0;
    for (int i = size; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

static double half_to_double(uint32_t h) {
    int exp = (int)(h >> 10 & 0x1f), frac = (int)(h & 0x3ff);
    double v = exp == 0 ? ldexp(frac, -24)
             : exp == 31 ? (frac ? NAN : INFINITY)
             : ldexp(frac + 1024, exp - 25);
    return h & 0x8000 ? -v : v;
}

/* One element of a bool, integer or float dtype, as a double. */
static double npy_value(const uint8_t *p, char kind, int size) {
    uint64_t bits = le_bits(p, size);
    if (kind == 'b')
        return bits != 0;
    if (kind == 'u')
        return (double)bits;
    if (kind == 'i') {
        int64_t v;
        uint64_t sign = UINT64_C(1) << (8 * size - 1);
        bits = size == 8 ? bits : (bits ^ sign) - sign;  /* sign-extend */
        memcpy(&v, &bits, sizeof v);
        return (double)v;
    }
    if (size == 2)
        return half_to_double((uint32_t)bits);
    if (size == 4) {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static DlrtStatus npy_images(DlrtDataset *ds, const NpyHeader *h, const uint8_t *data,
                             const DlrtScaling *s, const char *path, DlrtError *err) {
    for (int64_t i = 0; i < h->elements; i++) {
        double v = npy_value(data + i * h->size, h->kind, h->size);
        ds->x[i] = scale_value(v, s);
        if (!isfinite(ds->x[i]))
            return dlrt_fail(err, DLRT_E_RANGE, "%s: value %g at sample %lld is not finite "
                             "once scaled to float", path, v, (long long)(i / ds->sample_size));
    }
    return DLRT_OK;
}

static DlrtStatus npy_labels(DlrtDataset *ds, const NpyHeader *h, const uint8_t *data,
                             const char *path, DlrtError *err) {
    for (int64_t i = 0; i < ds->count; i++) {
        double v = npy_value(data + i * h->size, h->kind, h->size);
        if (v < 0 || v > MAX_LABEL)
            return dlrt_fail(err, DLRT_E_RANGE, "%s: label %.0f at sample %lld is %s", path, v,
                             (long long)i, v < 0 ? "negative" : "too large");
        ds->y[i] = (int32_t)v;
    }
    dataset_count_classes(ds);
    return DLRT_OK;
}

/* Opens path and reads its header, checked as images or labels. */
static DlrtStatus npy_open(Reader *r, const char *path, bool labels, NpyHeader *h,
                           DlrtError *err) {
    DlrtStatus st = reader_open(r, path, err);
    if (st == DLRT_OK)
        st = npy_read_header(r, h, err);
    if (st == DLRT_OK)
        st = npy_check_shape(path, h, labels, err);
    return st;
}

/* Converts the checked raw data of both files into ds (hl NULL for images
 * alone). */
static DlrtStatus npy_fill(DlrtDataset *ds, const NpyHeader *hi, const uint8_t *pixels,
                           const NpyHeader *hl, const uint8_t *labs, const DlrtScaling *s,
                           const char *images, const char *labels, DlrtError *err) {
    DlrtStatus st = dataset_alloc(ds, hi->dims[0], hi->rank - 1, hi->dims + 1, hl != NULL,
                                  images, err);
    if (st == DLRT_OK)
        st = npy_images(ds, hi, pixels, s, images, err);
    if (st == DLRT_OK && hl)
        st = npy_labels(ds, hl, labs, labels, err);
    if (st != DLRT_OK)
        dlrt_dataset_free(ds);
    return st;
}

DlrtStatus dlrt_load_npy(DlrtDataset *ds, const char *images, const char *labels,
                         const DlrtScaling *scaling, DlrtError *err) {
    if (!ds || !images || !labels)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_load_npy: a dataset and two paths are needed");
    memset(ds, 0, sizeof *ds);
    DlrtScaling s;
    Reader ri = {0}, rl = {0};
    NpyHeader hi = {0}, hl = {0};
    uint8_t *pixels = NULL, *labs = NULL;
    DlrtStatus st = npy_open(&ri, images, false, &hi, err);
    if (st == DLRT_OK)
        st = npy_open(&rl, labels, true, &hl, err);
    if (st == DLRT_OK) {
        bool bytes = hi.kind == 'u' && hi.size == 1;
        st = resolve_scaling(scaling, bytes ? dlrt_scaling_default() : identity_scaling, &s, err);
    }
    if (st == DLRT_OK)
        st = check_counts(images, hi.dims[0], labels, hl.dims[0], err);
    if (st == DLRT_OK)
        st = read_payload(&ri, hi.elements * hi.size, &pixels, err);
    if (st == DLRT_OK)
        st = read_payload(&rl, hl.elements * hl.size, &labs, err);
    if (st == DLRT_OK)
        st = npy_fill(ds, &hi, pixels, &hl, labs, &s, images, labels, err);
    reader_close(&ri);
    reader_close(&rl);
    free(pixels);
    free(labs);
    return st;
}

DlrtStatus dlrt_load_npy_images(DlrtDataset *ds, const char *path, int sample_rank,
                                const int64_t *sample_dims, const DlrtScaling *scaling,
                                DlrtError *err) {
    if (!ds || !path)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_load_npy_images: a dataset and a path are needed");
    memset(ds, 0, sizeof *ds);
    DlrtScaling s;
    Reader r = {0};
    NpyHeader h = {0};
    uint8_t *pixels = NULL;
    DlrtStatus st = reader_open(&r, path, err);
    if (st == DLRT_OK)
        st = npy_read_header(&r, &h, err);
    /* one sample: read it as a count of 1, as np.save(x[None]) would have
       written it */
    if (st == DLRT_OK && h.rank == sample_rank && h.rank < NPY_MAX_DIMS &&
        (h.rank == 0 || memcmp(h.dims, sample_dims, (size_t)h.rank * sizeof *h.dims) == 0)) {
        memmove(h.dims + 1, h.dims, (size_t)h.rank * sizeof *h.dims);
        h.dims[0] = 1;
        h.rank++;
    }
    if (st == DLRT_OK)
        st = npy_check_shape(path, &h, false, err);
    if (st == DLRT_OK) {
        bool bytes = h.kind == 'u' && h.size == 1;
        st = resolve_scaling(scaling, bytes ? dlrt_scaling_default() : identity_scaling, &s, err);
    }
    if (st == DLRT_OK)
        st = read_payload(&r, h.elements * h.size, &pixels, err);
    if (st == DLRT_OK)
        st = npy_fill(ds, &h, pixels, NULL, NULL, &s, path, NULL, err);
    reader_close(&r);
    free(pixels);
    return st;
}

/* ---- CSV --------------------------------------------------------------- */

/* One line of the text, without its line break. */
typedef struct Line {
    char *begin, *end;  /* [begin, end) */
    long long number;   /* 1-based */
} Line;

/* Steps to the next line at *pos; false at the end of the text. */
static bool next_line(char **pos, char *end, Line *line) {
    if (*pos >= end)
        return false;
    char *nl = memchr(*pos, '\n', (size_t)(end - *pos));
    line->begin = *pos;
    line->end = nl ? nl : end;
    *pos = nl ? nl + 1 : end;
    if (line->end > line->begin && line->end[-1] == '\r')
        line->end--;
    line->number++;
    return true;
}

static bool is_blank(const Line *line) {
    for (const char *p = line->begin; p < line->end; p++)
        if (*p != ' ' && *p != '\t')
            return false;
    return true;
}

static long long count_columns(const Line *line) {
    long long n = 1;
    for (const char *p = line->begin; p < line->end; p++)
        n += *p == ',';
    return n;
}

/* The layout of a CSV file's data rows. */
typedef struct CsvShape {
    int64_t rows;        /* data rows: not the header, not blank lines */
    int cols;            /* fields per row */
    long long first;     /* line number of the first data row */
} CsvShape;

/* Counts rows and columns; every row must have as many fields. */
static DlrtStatus csv_measure(const char *path, char *text, char *end, bool header,
                              CsvShape *shape, DlrtError *err) {
    Line line = {0};
    char *pos = text;
    memset(shape, 0, sizeof *shape);
    if (header)
        next_line(&pos, end, &line);
    while (next_line(&pos, end, &line)) {
        if (is_blank(&line))
            continue;
        long long n = count_columns(&line);
        if (shape->rows == 0 && n > 1 << 24)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s:%lld: %lld columns are too many", path,
                             line.number, n);
        if (shape->rows == 0) {
            shape->cols = (int)n;
            shape->first = line.number;
        } else if (n != shape->cols) {
            return dlrt_fail(err, DLRT_E_FORMAT, "%s:%lld: the row has %lld columns but line "
                             "%lld has %d", path, line.number, n, shape->first, shape->cols);
        }
        shape->rows++;
    }
    if (shape->rows == 0)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: no data rows", path);
    return DLRT_OK;
}

/* A field as a finite number; field is NUL-terminated. */
static DlrtStatus csv_number(const char *path, long long line, int col, const char *field,
                             double *v, DlrtError *err) {
    const char *s = field;
    char *end;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s:%lld: column %d is empty", path, line, col);
    *v = strtod(s, &end);
    while (end > s && (*end == ' ' || *end == '\t'))
        end++;
    if (end == s || *end)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s:%lld: column %d: '%.40s' is not a number",
                         path, line, col, s);
    if (!isfinite(*v))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s:%lld: column %d: '%.40s' is not a finite "
                         "number", path, line, col, s);
    return DLRT_OK;
}

static DlrtStatus csv_label(const char *path, long long line, int col, double v, int32_t *y,
                            DlrtError *err) {
    if (v != floor(v))
        return dlrt_fail(err, DLRT_E_RANGE, "%s:%lld: column %d: label %g is not a whole "
                         "number", path, line, col, v);
    if (v < 0 || v > MAX_LABEL)
        return dlrt_fail(err, DLRT_E_RANGE, "%s:%lld: column %d: label %.0f is %s", path, line,
                         col, v, v < 0 ? "negative" : "too large");
    *y = (int32_t)v;
    return DLRT_OK;
}

/* Parses one data row into x (cols - 1 values) and *y; cuts the line's
 * fields in place with NULs. */
static DlrtStatus csv_row(const char *path, const Line *line, int cols, int label_column,
                          const DlrtScaling *s, float *x, int32_t *y, DlrtError *err) {
    char *p = line->begin;
    for (int c = 0; c < cols; c++) {
        char *comma = memchr(p, ',', (size_t)(line->end - p));
        char *fend = comma ? comma : line->end;
        double v = 0;
        *fend = '\0';
        DlrtStatus st = csv_number(path, line->number, c + 1, p, &v, err);
        if (st == DLRT_OK && c == label_column)
            st = csv_label(path, line->number, c + 1, v, y, err);
        if (st != DLRT_OK)
            return st;
        if (c != label_column) {
            *x = scale_value(v, s);
            if (!isfinite(*x++))
                return dlrt_fail(err, DLRT_E_RANGE, "%s:%lld: column %d: %g does not fit in a "
                                 "float once scaled", path, line->number, c + 1, v);
        }
        p = fend + 1;
    }
    return DLRT_OK;
}

/* Fills ds from the text of a measured CSV file. */
static DlrtStatus csv_fill(DlrtDataset *ds, const char *path, char *text, char *end,
                           bool header, int label_column, const CsvShape *shape,
                           const DlrtScaling *s, DlrtError *err) {
    int64_t dims[1] = {shape->cols - 1};
    DlrtStatus st = dataset_alloc(ds, shape->rows, 1, dims, true, path, err);
    Line line = {0};
    char *pos = text;
    if (header)
        next_line(&pos, end, &line);
    for (int64_t i = 0; st == DLRT_OK && next_line(&pos, end, &line);) {
        if (is_blank(&line))
            continue;
        st = csv_row(path, &line, shape->cols, label_column, s, ds->x + i * dims[0], ds->y + i,
                     err);
        i++;
    }
    if (st == DLRT_OK)
        dataset_count_classes(ds);
    else
        dlrt_dataset_free(ds);
    return st;
}

static DlrtStatus csv_check_label_column(const char *path, int label_column,
                                         const CsvShape *shape, DlrtError *err) {
    if (shape->cols < 2)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s:%lld: a row needs a label and at least one "
                         "value, but has one column", path, shape->first);
    if (label_column >= shape->cols)
        return dlrt_fail(err, DLRT_E_RANGE, "%s: label column %d is out of range: the rows "
                         "have %d columns, numbered from 0", path, label_column, shape->cols);
    return DLRT_OK;
}

/* Parses the whole text of a CSV file, which csv_fill cuts up in place. */
static DlrtStatus csv_parse(DlrtDataset *ds, const char *path, char *text, char *end,
                            int label_column, bool header, const DlrtScaling *s,
                            DlrtError *err) {
    CsvShape shape;
    /* a UTF-8 byte order mark, as spreadsheets write */
    if (end - text >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
        text += 3;
    DlrtStatus st = csv_measure(path, text, end, header, &shape, err);
    if (st == DLRT_OK)
        st = csv_check_label_column(path, label_column, &shape, err);
    if (st == DLRT_OK)
        st = csv_fill(ds, path, text, end, header, label_column, &shape, s, err);
    return st;
}

DlrtStatus dlrt_load_csv(DlrtDataset *ds, const char *path, int label_column, bool header,
                         const DlrtScaling *scaling, DlrtError *err) {
    if (!ds || !path)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_load_csv: a dataset and a path are needed");
    memset(ds, 0, sizeof *ds);
    if (label_column < 0)
        return dlrt_fail(err, DLRT_E_ARG, "%s: label column %d is negative", path, label_column);
    DlrtScaling s;
    Reader r = {0};
    uint8_t *data = NULL;
    int64_t len = 0;
    DlrtStatus st = resolve_scaling(scaling, identity_scaling, &s, err);
    if (st == DLRT_OK)
        st = reader_open(&r, path, err);
    if (st == DLRT_OK)
        st = read_growing(&r, INT64_MAX - 1, &data, &len, err);
    reader_close(&r);
    if (st == DLRT_OK)
        st = csv_parse(ds, path, (char *)data, (char *)data + len, label_column, header, &s,
                       err);
    free(data);
    return st;
}

/* ---- checking against a network ---------------------------------------- */

/* Whether two shapes differ only by a leading 1 in want. */
static bool missing_channel(int rank, const int64_t *dims, int want_rank, const int64_t *want) {
    return want_rank == rank + 1 && want[0] == 1 &&
           memcmp(dims, want + 1, (size_t)rank * sizeof *dims) == 0;
}

DlrtStatus dlrt_dataset_check(const DlrtDataset *ds, int rank, const int64_t *dims,
                              int32_t num_classes, DlrtError *err) {
    if (!ds || rank < 0 || rank > DLRT_MAX_SAMPLE_RANK || (rank > 0 && !dims) || num_classes < 1)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_dataset_check: bad arguments (rank %d, %d "
                         "classes)", rank, (int)num_classes);
    /* a grayscale image [1, H, W] (IDX and PGM add the channel) is also
       the sequence of its H rows of W pixels, [H, W]: the same values in
       the same order, for a recurrent network that reads rows as steps */
    bool rows = missing_channel(rank, dims, ds->rank, ds->dims);
    if (!rows &&
        (ds->rank != rank || (rank > 0 && memcmp(ds->dims, dims, (size_t)rank * sizeof *dims)))) {
        char have[128], want[128];
        dlrt_shape_text(have, sizeof have, ds->dims, ds->rank);
        dlrt_shape_text(want, sizeof want, dims, rank);
        return dlrt_fail(err, DLRT_E_SHAPE, "sample 0 has shape %s but the network takes %s%s",
                         have, want, missing_channel(ds->rank, ds->dims, rank, dims)
                             ? " (the data lacks a channel dimension of 1)" : "");
    }
    if (!ds->y)
        return DLRT_OK;
    /* a label per step: as many as the steps, the first dimension */
    int64_t per = dlrt_dataset_label_size(ds);
    if (ds->label_size < 0 || (per > 1 && (ds->rank < 1 || ds->dims[0] != per))) {
        char have[128];
        dlrt_shape_text(have, sizeof have, ds->dims, ds->rank);
        return dlrt_fail(err, DLRT_E_SHAPE, "%lld labels per sample do not fit samples of shape "
                         "%s: a label per step needs as many as the first dimension",
                         (long long)ds->label_size, have);
    }
    for (int64_t i = 0; i < ds->count * per; i++) {
        if (ds->y[i] >= 0 && ds->y[i] < num_classes)
            continue;
        if (per == 1)
            return dlrt_fail(err, DLRT_E_RANGE, "label %d at sample %lld is out of range for %d "
                             "classes", (int)ds->y[i], (long long)i, (int)num_classes);
        return dlrt_fail(err, DLRT_E_RANGE, "label %d at sample %lld, step %lld is out of range "
                         "for %d classes", (int)ds->y[i], (long long)(i / per),
                         (long long)(i % per), (int)num_classes);
    }
    return DLRT_OK;
}

/* ---- token ids ------------------------------------------------------------- */

DlrtStatus dlrt_check_tokens(const int32_t *ids, int64_t n, int64_t steps, int64_t vocab,
                             const char *input, DlrtError *err) {
    for (int64_t i = 0; i < n * steps; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return dlrt_fail(err, DLRT_E_RANGE, "input '%s': token %d at sample %lld, step %lld "
                             "is outside the vocabulary of %lld tokens (0 to %lld)", input,
                             (int)ids[i], (long long)(i / steps), (long long)(i % steps),
                             (long long)vocab, (long long)vocab - 1);
    return DLRT_OK;
}

DlrtStatus dlrt_check_lengths(const int32_t *lengths, int64_t n, int64_t steps, const char *input,
                              DlrtError *err) {
    for (int64_t i = 0; i < n; i++)
        if (lengths[i] < 0 || lengths[i] > steps)
            return dlrt_fail(err, DLRT_E_RANGE, "input '%s': length %d at sample %lld is outside "
                             "0 to %lld, the network's steps", input, (int)lengths[i],
                             (long long)i, (long long)steps);
    return DLRT_OK;
}

/* value v, at index i of its array, as a token id */
static DlrtStatus token_of(double v, int64_t i, int32_t *id, DlrtError *err) {
    if (!(v >= INT32_MIN && v <= INT32_MAX) || v != (double)(int32_t)v)
        return dlrt_fail(err, DLRT_E_RANGE, "value %g at %lld is not a token id (an integer)",
                         v, (long long)i);
    *id = (int32_t)v;
    return DLRT_OK;
}

DlrtStatus dlrt_tokens_from_doubles(const double *x, int64_t count, int32_t *ids,
                                    DlrtError *err) {
    DlrtStatus st = DLRT_OK;
    for (int64_t i = 0; i < count && st == DLRT_OK; i++)
        st = token_of(x[i], i, &ids[i], err);
    return st;
}

DlrtStatus dlrt_tokens_from_floats(const float *x, int64_t count, int32_t *ids, DlrtError *err) {
    DlrtStatus st = DLRT_OK;
    for (int64_t i = 0; i < count && st == DLRT_OK; i++)
        st = token_of(x[i], i, &ids[i], err);
    return st;
}

/* ---- synthetic data --------------------------------------------------------- */

DlrtStatus dlrt_dataset_synthetic(DlrtDataset *ds, int64_t count, int rank, const int64_t *dims,
                                  int32_t num_classes, uint64_t seed, DlrtError *err) {
    memset(ds, 0, sizeof *ds);
    if (count < 1 || rank < 1 || rank > DLRT_MAX_SAMPLE_RANK || num_classes < 1)
        return dlrt_fail(err, DLRT_E_ARG, "a synthetic dataset needs samples, a shape of 1 to "
                         "%d dimensions and classes", DLRT_MAX_SAMPLE_RANK);
    int64_t size = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 1 || size > INT64_MAX / dims[i])
            return dlrt_fail(err, DLRT_E_ARG, "a synthetic sample's shape is out of range");
        size *= dims[i];
        ds->dims[i] = dims[i];
    }
    if (size > INT64_MAX / count / (int64_t)sizeof(float))
        return dlrt_fail(err, DLRT_E_NOMEM, "%lld synthetic samples of %lld values do not fit "
                         "in memory", (long long)count, (long long)size);
    ds->x = malloc(sizeof(float) * (size_t)(count * size));
    ds->y = malloc(sizeof(int32_t) * (size_t)count);
    if (!ds->x || !ds->y) {
        dlrt_dataset_free(ds);
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for %lld synthetic samples",
                         (long long)count);
    }
    DlrtRng rng;
    dlrt_rng_seed(&rng, seed);
    for (int64_t i = 0; i < count * size; i++)
        ds->x[i] = dlrt_rng_uniform(&rng);
    for (int64_t i = 0; i < count; i++)
        ds->y[i] = (int32_t)dlrt_rng_below(&rng, (uint64_t)num_classes);
    ds->count = count;
    ds->rank = rank;
    ds->sample_size = size;
    ds->num_classes = num_classes;
    return DLRT_OK;
}
