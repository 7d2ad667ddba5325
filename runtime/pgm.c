/* pgm.c — grayscale Netpbm images (PGM), for predictions.
 *
 * A PGM file is a text header, "P5" (binary) or "P2" (ASCII), then the
 * width, the height and the largest value (maxval, 1 to 65535), separated
 * by whitespace, with '#' comments running to the end of a line; then the
 * pixels row by row: in P5 one byte each, or two big-endian bytes when
 * maxval is above 255, after exactly one whitespace character; in P2
 * decimal numbers separated by whitespace.  (netpbm's pgm(5) is the
 * reference.)
 *
 * The file is read whole through zlib's gzread, so a .pgm.gz loads as the
 * other loaders' files do, then parsed in memory.  Every number is checked
 * (digits, range, pixels not above maxval), and the message names the file
 * and what was found where: a header that is not PGM, a value out of range,
 * fewer pixels than the header promises, data after the image.  Pixels
 * become value / maxval, so that an 8-bit image scales as IDX training
 * data does (v / 255) and a 16-bit one lands in [0, 1] too.
 *
 * One image per file: netpbm allows several in a row, but a program that
 * classifies files names each on its own line, so a second image is
 * refused rather than silently ignored.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dlrt.h"

/* Sanity limits: a side of a million pixels, 2^28 pixels in all (1 GiB of
 * floats), and a file of at most 2 GiB (a P2 image of 2^28 pixels in up to
 * 6 characters each, with room for comments). */
#define PGM_MAX_SIDE (1 << 20)
#define PGM_MAX_PIXELS (INT64_C(1) << 28)
#define PGM_MAX_BYTES (INT64_C(1) << 31)

/* A position in the bytes of a PGM file held in memory. */
typedef struct Cursor {
    const uint8_t *p, *end;  /* the next byte; the end of the data */
    const uint8_t *begin;    /* the first byte, for offsets in messages */
    const char *path;        /* the file, for messages */
} Cursor;

/* Reads the whole file (inflating gzip) into a new buffer. */
static DlrtStatus read_file(const char *path, uint8_t **out, int64_t *size, DlrtError *err) {
    *out = NULL;
    *size = 0;
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        if (errno == 0 || errno == ENOMEM)
            return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory opening the file", path);
        return dlrt_fail(err, DLRT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    uint8_t *buf = NULL;
    int64_t cap = 0, have = 0;
    DlrtStatus st = DLRT_OK;
    for (;;) {
        if (have == cap) {
            int64_t ncap = cap ? 2 * cap : 1 << 16;
            uint8_t *nbuf = cap < PGM_MAX_BYTES ? realloc(buf, (size_t)ncap) : NULL;
            if (!nbuf) {
                st = cap < PGM_MAX_BYTES
                         ? dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory after %lld bytes",
                                     path, (long long)have)
                         : dlrt_fail(err, DLRT_E_FORMAT, "%s: larger than %lld bytes; too "
                                     "large for a PGM image", path, (long long)PGM_MAX_BYTES);
                break;
            }
            buf = nbuf;
            cap = ncap;
        }
        unsigned want = (unsigned)(cap - have < (1 << 20) ? cap - have : (1 << 20));
        int k = gzread(f, buf + have, want);
        if (k < 0) {
            int errnum;
            const char *msg = gzerror(f, &errnum);
            st = errnum == Z_ERRNO
                     ? dlrt_fail(err, DLRT_E_IO, "%s: cannot read: %s", path, strerror(errno))
                     : dlrt_fail(err, DLRT_E_FORMAT, "%s: bad gzip data: %s", path, msg);
            break;
        }
        if (k == 0)
            break;
        have += k;
    }
    gzclose(f);
    if (st != DLRT_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *size = have;
    return DLRT_OK;
}

/* What the cursor is at, for messages: "'x'", "byte 0x01" or "the end". */
static const char *found(const Cursor *c, char *buf, size_t size) {
    if (c->p == c->end)
        snprintf(buf, size, "the end of the file");
    else if (isprint(*c->p))
        snprintf(buf, size, "'%c'", *c->p);
    else
        snprintf(buf, size, "byte 0x%02x", *c->p);
    return buf;
}

/* Skips whitespace and '#' comments (to the end of their line). */
static void skip_space(Cursor *c) {
    while (c->p < c->end) {
        if (*c->p == '#') {
            while (c->p < c->end && *c->p != '\n')
                c->p++;
        } else if (isspace(*c->p))
            c->p++;
        else
            break;
    }
}

/* A decimal number from 1 to max (or 0 to max when zero_ok) at the cursor,
 * after whitespace; what names it in messages ("the width"). */
static DlrtStatus read_number(Cursor *c, const char *what, int64_t max, bool zero_ok,
                              int64_t *out, DlrtError *err) {
    char seen[32];
    skip_space(c);
    if (c->p == c->end || !isdigit(*c->p))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad PGM %s: expected %s, found %s", c->path,
                         zero_ok ? "pixels" : "header", what, found(c, seen, sizeof seen));
    int64_t v = 0;
    while (c->p < c->end && isdigit(*c->p)) {
        v = v * 10 + (*c->p++ - '0');
        if (v > max)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s: %s is larger than %lld", c->path, what,
                             (long long)max);
    }
    if (!zero_ok && v == 0)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: %s is 0", c->path, what);
    /* a number ends at whitespace (or a comment), not at a letter: "28x" */
    if (c->p < c->end && !isspace(*c->p) && *c->p != '#')
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad PGM %s: %s is followed by %s", c->path,
                         zero_ok ? "pixels" : "header", what, found(c, seen, sizeof seen));
    *out = v;
    return DLRT_OK;
}

/* "P5" or "P2", naming the other Netpbm kinds when it is one of them. */
static DlrtStatus read_magic(Cursor *c, bool *binary, DlrtError *err) {
    static const char *const kinds[8] = {NULL, "P1 (PBM, black and white)",
        "P2", "P3 (PPM, color)", "P4 (PBM, black and white)", "P5", "P6 (PPM, color)",
        "P7 (PAM)"};
    if (c->end == c->begin)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: the file is empty", c->path);
    if (c->end - c->p < 2 || c->p[0] != 'P' || c->p[1] < '1' || c->p[1] > '7')
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not a PGM image: it does not start with "
                         "P5 or P2", c->path);
    int kind = c->p[1] - '0';
    if (kind != 2 && kind != 5)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: a Netpbm %s image, not grayscale PGM (P5 or "
                         "P2); convert it to grayscale first", c->path, kinds[kind]);
    c->p += 2;
    char seen[32];
    if (c->p == c->end || !isspace(*c->p))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad PGM header: P%d is followed by %s, not "
                         "whitespace", c->path, kind, found(c, seen, sizeof seen));
    *binary = kind == 5;
    return DLRT_OK;
}

/* The pixels of a P5 image, one or two bytes each. */
static DlrtStatus read_binary(Cursor *c, int64_t count, int64_t maxval, float *x,
                              DlrtError *err) {
    int bytes = maxval > 255 ? 2 : 1;
    /* exactly one whitespace character separates the header from the data
       (so a first pixel of value 10, '\n', is data, not space) */
    char seen[32];
    if (c->p == c->end)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: truncated: the header ends without pixels",
                         c->path);
    if (!isspace(*c->p))
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad PGM header: the maxval is followed by %s, "
                         "not one whitespace character", c->path, found(c, seen, sizeof seen));
    c->p++;
    int64_t left = c->end - c->p;
    if (left < count * bytes)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: truncated: %lld of %lld bytes of pixels",
                         c->path, (long long)left, (long long)(count * bytes));
    for (int64_t i = 0; i < count; i++) {
        int64_t v = bytes == 2 ? (int64_t)c->p[0] << 8 | c->p[1] : c->p[0];
        if (v > maxval)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s: pixel %lld is %lld, above the maxval %lld",
                             c->path, (long long)i, (long long)v, (long long)maxval);
        x[i] = (float)((double)v / (double)maxval);
        c->p += bytes;
    }
    return DLRT_OK;
}

/* The pixels of a P2 image, as decimal numbers. */
static DlrtStatus read_ascii(Cursor *c, int64_t count, int64_t maxval, float *x,
                             DlrtError *err) {
    for (int64_t i = 0; i < count; i++) {
        skip_space(c);
        if (c->p == c->end)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s: truncated: %lld of %lld pixels", c->path,
                             (long long)i, (long long)count);
        char what[64];
        snprintf(what, sizeof what, "pixel %lld", (long long)i);
        int64_t v;
        DlrtStatus st = read_number(c, what, INT64_C(1) << 40, true, &v, err);
        if (st != DLRT_OK)
            return st;
        if (v > maxval)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s: pixel %lld is %lld, above the maxval %lld",
                             c->path, (long long)i, (long long)v, (long long)maxval);
        x[i] = (float)((double)v / (double)maxval);
    }
    return DLRT_OK;
}

/* Fails on anything but whitespace after the image. */
static DlrtStatus expect_end(Cursor *c, DlrtError *err) {
    const uint8_t *at = c->p;
    while (at < c->end && isspace(*at))
        at++;
    if (at < c->end)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: %lld bytes of data after the image (one image "
                         "per file)", c->path, (long long)(c->end - c->p));
    return DLRT_OK;
}

/* Parses the bytes of a whole file into ds. */
static DlrtStatus parse(DlrtDataset *ds, Cursor *c, DlrtError *err) {
    bool binary = false;
    int64_t w = 0, h = 0, maxval = 0;
    DlrtStatus st = read_magic(c, &binary, err);
    if (st == DLRT_OK)
        st = read_number(c, "the width", PGM_MAX_SIDE, false, &w, err);
    if (st == DLRT_OK)
        st = read_number(c, "the height", PGM_MAX_SIDE, false, &h, err);
    if (st == DLRT_OK)
        st = read_number(c, "the maxval", 65535, false, &maxval, err);
    if (st != DLRT_OK)
        return st;
    if (w * h > PGM_MAX_PIXELS)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: %lldx%lld pixels are too many", c->path,
                         (long long)w, (long long)h);
    float *x = malloc((size_t)(w * h) * sizeof *x);
    if (!x)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory for %lldx%lld pixels", c->path,
                         (long long)w, (long long)h);
    st = binary ? read_binary(c, w * h, maxval, x, err) : read_ascii(c, w * h, maxval, x, err);
    if (st == DLRT_OK)
        st = expect_end(c, err);
    if (st != DLRT_OK) {
        free(x);
        return st;
    }
    *ds = (DlrtDataset){.count = 1, .rank = 3, .dims = {1, h, w}, .sample_size = w * h, .x = x};
    return DLRT_OK;
}

DlrtStatus dlrt_load_pgm(DlrtDataset *ds, const char *path, DlrtError *err) {
    if (!ds || !path)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_load_pgm: a dataset and a path are needed");
    memset(ds, 0, sizeof *ds);
    uint8_t *data;
    int64_t size;
    DlrtStatus st = read_file(path, &data, &size, err);
    if (st != DLRT_OK)
        return st;
    Cursor c = {.p = data, .end = data + size, .begin = data, .path = path};
    st = parse(ds, &c, err);
    free(data);
    return st;
}
