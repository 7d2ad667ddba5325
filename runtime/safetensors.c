/* safetensors.c — checkpoints in the safetensors format.
 *
 * A file is an 8-byte little-endian header size N, N bytes of UTF-8 JSON,
 * and the raw little-endian data.  The JSON maps each tensor's name to
 * {"dtype", "shape", "data_offsets": [begin, end]} (offsets from the first
 * byte after the header) and may hold "__metadata__", an object of strings.
 * See https://huggingface.co/docs/safetensors and docs/checkpoints.md.
 *
 * Saving writes the tensors in the caller's order behind a header padded
 * with spaces to a multiple of 8 bytes (so the data starts 8-aligned), into
 * a new file beside the target that is flushed, synced and renamed over it:
 * a reader or a crash sees the old checkpoint or the new one, never half of
 * one.  The temporary file is created with O_EXCL and mode 0666, so the
 * kernel applies the umask as for any new file, without the process-wide
 * umask() call that mkstemp's 0600 would need to undo (not thread-safe).
 * Something that exists and is not a regular file (/dev/null, a pipe) is
 * written into instead, as dlc -o does: renaming over it would replace it.
 *
 * Loading trusts nothing in the file: the header is parsed by a small
 * hand-written JSON parser for exactly the subset the format uses
 * (objects, arrays, strings with every escape, non-negative integers),
 * driven by the schema, so it never recurses and never builds a tree.  The
 * offsets must tile the data section exactly, as the reference
 * implementation requires: sorted by begin, each tensor starts where the
 * previous one ends, the first at 0, the last at the end of the file, and
 * each spans dtype size * elements bytes.  Only when the whole header is
 * valid and matches the caller's tensors is any data copied, so a failed
 * load leaves the tensors unchanged (short of a read error mid-way).
 *
 * The format is little-endian; so is every host dlc targets, which both
 * directions check at run time rather than swap bytes. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "dlrt.h"

/* Headers larger than this are refused before anything is allocated (the
 * reference implementation's limit). */
#define MAX_HEADER_SIZE 100000000u

/* ------------------------------------------------------------------------ */
/* Shared helpers                                                           */
/* ------------------------------------------------------------------------ */

static bool host_is_little_endian(void) {
    uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

static const char *const dtype_names[] = {"F32", "F64", "I32", "I64", "U8", "I8"};
static const int dtype_sizes[] = {4, 8, 4, 8, 1, 1};

static bool dtype_valid(DlrtDType t) { return (unsigned)t <= (unsigned)DLRT_I8; }

/* Elements of a shape, or -1 when dims are negative or their product
 * (times 8, the largest dtype size) would overflow int64. */
static int64_t shape_elements(int rank, const int64_t *dims) {
    int64_t count = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return -1;
        if (dims[i] != 0 && count > INT64_MAX / 8 / dims[i])
            return -1;
        count *= dims[i];
    }
    return count;
}

/* "[6,1,5,5]", "[]" for a scalar. */
static void format_shape(char *buf, size_t cap, int rank, const int64_t *dims) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? "," : "", dims[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
}

/* The length of the valid UTF-8 sequence at s (at most avail bytes), or 0
 * when it is invalid: overlong, a surrogate, above U+10FFFF or cut short. */
static size_t utf8_sequence(const unsigned char *s, size_t avail) {
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || c > 0xF4 || len > avail)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0) ||
        (c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))
        return 0;
    return len;
}

static bool utf8_valid(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    size_t avail = strlen(s);
    while (avail > 0) {
        size_t len = utf8_sequence(u, avail);
        if (len == 0)
            return false;
        u += len;
        avail -= len;
    }
    return true;
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A name that two of n items share, or NULL: the items lie `stride` bytes
 * apart, each with its name (a char pointer) at `offset` (tensors, header
 * entries, metadata).  The names are sorted in a copy; *nomem says that
 * the copy could not be made. */
static const char *find_duplicate(const void *items, size_t n, size_t stride, size_t offset,
                                  bool *nomem) {
    *nomem = false;
    if (n < 2)
        return NULL;
    const char **names = malloc(n * sizeof *names);
    if (!names) {
        *nomem = true;
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        memcpy(&names[i], (const char *)items + i * stride + offset, sizeof names[i]);
    qsort(names, n, sizeof *names, compare_strings);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            dup = names[i];
    free(names);
    return dup;
}

void dlrt_meta_free(DlrtMeta *meta, int nmeta) {
    if (!meta)
        return;
    for (int i = 0; i < nmeta; i++) {
        free(meta[i].key);
        free(meta[i].value);
    }
    free(meta);
}

/* ------------------------------------------------------------------------ */
/* Saving                                                                   */
/* ------------------------------------------------------------------------ */

/* A growing byte buffer; after an allocation failure it stays failed. */
typedef struct Buf {
    char *data;
    size_t len;
    size_t cap;
    bool failed;
} Buf;

static void buf_append(Buf *b, const char *s, size_t n) {
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *data = realloc(b->data, cap);
        if (!data) {
            b->failed = true;
            return;
        }
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_puts(Buf *b, const char *s) { buf_append(b, s, strlen(s)); }

static void buf_int(Buf *b, int64_t v) {
    char num[24];
    snprintf(num, sizeof num, "%" PRId64, v);
    buf_puts(b, num);
}

/* s as a JSON string: quotes, backslashes and control characters escaped,
 * everything else (valid UTF-8, checked by the caller) as it is. */
static void buf_json_string(Buf *b, const char *s) {
    buf_puts(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        switch (c) {
        case '"': buf_puts(b, "\\\""); break;
        case '\\': buf_puts(b, "\\\\"); break;
        case '\b': buf_puts(b, "\\b"); break;
        case '\f': buf_puts(b, "\\f"); break;
        case '\n': buf_puts(b, "\\n"); break;
        case '\r': buf_puts(b, "\\r"); break;
        case '\t': buf_puts(b, "\\t"); break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                buf_puts(b, esc);
            } else {
                buf_append(b, s, 1);
            }
        }
    }
    buf_puts(b, "\"");
}

static int64_t tensor_bytes(const DlrtTensor *t) {
    return shape_elements(t->rank, t->dims) * dtype_sizes[t->dtype];
}

/* Checks one of the caller's tensors (for saving or loading). */
static DlrtStatus check_tensor(const DlrtTensor *t, int i, DlrtError *err) {
    if (!t->name || !*t->name)
        return dlrt_fail(err, DLRT_E_ARG, "tensor %d has no name", i);
    if (!utf8_valid(t->name))
        return dlrt_fail(err, DLRT_E_ARG, "tensor %d: the name is not valid UTF-8", i);
    if (strcmp(t->name, "__metadata__") == 0)
        return dlrt_fail(err, DLRT_E_ARG, "'__metadata__' is not a valid tensor name");
    if (!dtype_valid(t->dtype))
        return dlrt_fail(err, DLRT_E_ARG, "tensor '%s' has an invalid dtype %d", t->name,
                         (int)t->dtype);
    if (t->rank < 0 || t->rank > DLRT_MAX_RANK)
        return dlrt_fail(err, DLRT_E_ARG, "tensor '%s' has rank %d, outside [0, %d]",
                         t->name, t->rank, DLRT_MAX_RANK);
    if (shape_elements(t->rank, t->dims) < 0)
        return dlrt_fail(err, DLRT_E_ARG, "tensor '%s' has a negative or too large shape",
                         t->name);
    if (!t->data && tensor_bytes(t) > 0)
        return dlrt_fail(err, DLRT_E_ARG, "tensor '%s' has no data", t->name);
    return DLRT_OK;
}

/* Checks the caller's tensors, their names unique. */
static DlrtStatus check_tensors(const DlrtTensor *tensors, int n, DlrtError *err) {
    if (n < 0 || (n > 0 && !tensors))
        return dlrt_fail(err, DLRT_E_ARG, "bad tensor list (%d tensors)", n);
    for (int i = 0; i < n; i++) {
        DlrtStatus st = check_tensor(&tensors[i], i, err);
        if (st != DLRT_OK)
            return st;
    }
    bool nomem;
    const char *dup = find_duplicate(tensors, (size_t)n, sizeof *tensors,
                                     offsetof(DlrtTensor, name), &nomem);
    if (nomem)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    if (dup)
        return dlrt_fail(err, DLRT_E_ARG, "two tensors are named '%s'", dup);
    return DLRT_OK;
}

static DlrtStatus check_meta(const DlrtMeta *meta, int nmeta, DlrtError *err) {
    if (nmeta < 0 || (nmeta > 0 && !meta))
        return dlrt_fail(err, DLRT_E_ARG, "bad metadata list (%d entries)", nmeta);
    for (int i = 0; i < nmeta; i++) {
        if (!meta[i].key || !meta[i].value)
            return dlrt_fail(err, DLRT_E_ARG, "metadata entry %d has no key or value", i);
        if (!utf8_valid(meta[i].key) || !utf8_valid(meta[i].value))
            return dlrt_fail(err, DLRT_E_ARG, "metadata '%s' is not valid UTF-8",
                             meta[i].key);
    }
    bool nomem;
    const char *dup = find_duplicate(meta, (size_t)nmeta, sizeof *meta, offsetof(DlrtMeta, key),
                                     &nomem);
    if (nomem)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    if (dup)
        return dlrt_fail(err, DLRT_E_ARG, "two metadata entries are named '%s'", dup);
    return DLRT_OK;
}

static void header_metadata(Buf *b, const DlrtMeta *meta, int nmeta) {
    buf_json_string(b, "__metadata__");
    buf_puts(b, ":{");
    for (int i = 0; i < nmeta; i++) {
        if (i)
            buf_puts(b, ",");
        buf_json_string(b, meta[i].key);
        buf_puts(b, ":");
        buf_json_string(b, meta[i].value);
    }
    buf_puts(b, "}");
}

static void header_tensor(Buf *b, const DlrtTensor *t, int64_t begin) {
    buf_json_string(b, t->name);
    buf_puts(b, ":{\"dtype\":\"");
    buf_puts(b, dtype_names[t->dtype]);
    buf_puts(b, "\",\"shape\":[");
    for (int d = 0; d < t->rank; d++) {
        if (d)
            buf_puts(b, ",");
        buf_int(b, t->dims[d]);
    }
    buf_puts(b, "],\"data_offsets\":[");
    buf_int(b, begin);
    buf_puts(b, ",");
    buf_int(b, begin + tensor_bytes(t));
    buf_puts(b, "]}");
}

/* The 8-byte size and the JSON header, padded with spaces so that the data
 * starts at a multiple of 8. */
static DlrtStatus build_header(Buf *b, const DlrtTensor *tensors, int n,
                               const DlrtMeta *meta, int nmeta, DlrtError *err) {
    buf_append(b, "\0\0\0\0\0\0\0\0", 8);
    buf_puts(b, "{");
    if (nmeta > 0)
        header_metadata(b, meta, nmeta);
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        if (i || nmeta > 0)
            buf_puts(b, ",");
        header_tensor(b, &tensors[i], offset);
        if (tensor_bytes(&tensors[i]) > INT64_MAX - offset)
            return dlrt_fail(err, DLRT_E_ARG, "the tensors are too large to save");
        offset += tensor_bytes(&tensors[i]);
    }
    buf_puts(b, "}");
    while (!b->failed && b->len % 8 != 0)
        buf_puts(b, " ");
    if (b->failed)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    uint64_t size = b->len - 8;
    for (int i = 0; i < 8; i++)
        b->data[i] = (char)(unsigned char)(size >> (8 * i));
    return DLRT_OK;
}

/* Creates path + ".tmpXXXXXX" (six random letters) with O_EXCL, trying
 * other names while one exists; fills tmp and returns the descriptor, or
 * -1 with errno set. */
static int create_temp(const char *path, char *tmp, size_t cap) {
    static const char letters[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    DlrtRng rng;
    dlrt_rng_seed(&rng, (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^
                            ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)tmp);
    for (int attempt = 0; attempt < 100; attempt++) {
        char suffix[7];
        for (int i = 0; i < 6; i++)
            suffix[i] = letters[dlrt_rng_below(&rng, sizeof letters - 1)];
        suffix[6] = '\0';
        snprintf(tmp, cap, "%s.tmp%s", path, suffix);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

/* Writes header and data to fd (which it closes), synced to disk when sync
 * (fsync fails on a pipe or a device). */
static bool write_file(int fd, const Buf *header, const DlrtTensor *tensors, int n,
                       bool sync) {
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        return false;
    }
    bool ok = fwrite(header->data, 1, header->len, f) == header->len;
    for (int i = 0; i < n && ok; i++) {
        size_t bytes = (size_t)tensor_bytes(&tensors[i]);
        ok = bytes == 0 || fwrite(tensors[i].data, 1, bytes, f) == bytes;
    }
    ok = ok && fflush(f) == 0 && (!sync || fsync(fileno(f)) == 0);
    int saved = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    errno = saved;
    return ok;
}

/* Makes a rename in path's folder durable; failures only cost durability. */
static void sync_folder(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? malloc((size_t)(slash - path) + 2) : NULL;
    if (slash && !dir)
        return;
    if (dir) {
        size_t len = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    int fd = open(dir ? dir : ".", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

static DlrtStatus write_atomically(const char *path, const Buf *header,
                                   const DlrtTensor *tensors, int n, DlrtError *err) {
    size_t cap = strlen(path) + 16;
    char *tmp = malloc(cap);
    if (!tmp)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    int fd = create_temp(path, tmp, cap);
    if (fd < 0) {
        DlrtStatus st = dlrt_fail(err, DLRT_E_IO, "cannot write '%s': %s", path,
                                  strerror(errno));
        free(tmp);
        return st;
    }
    errno = 0;
    if (!write_file(fd, header, tensors, n, true) || rename(tmp, path) != 0) {
        DlrtStatus st = dlrt_fail(err, DLRT_E_IO, "cannot write '%s': %s", path,
                                  errno ? strerror(errno) : "write error");
        unlink(tmp);
        free(tmp);
        return st;
    }
    free(tmp);
    sync_folder(path);
    return DLRT_OK;
}

/* Writes into something that is not a regular file (/dev/null, a pipe):
 * renaming a file over it would replace it (a device node, as root). */
static DlrtStatus write_in_place(const char *path, const Buf *header,
                                 const DlrtTensor *tensors, int n, DlrtError *err) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return dlrt_fail(err, DLRT_E_IO, "cannot write '%s': %s", path, strerror(errno));
    errno = 0;
    if (!write_file(fd, header, tensors, n, false))
        return dlrt_fail(err, DLRT_E_IO, "cannot write '%s': %s", path,
                         errno ? strerror(errno) : "write error");
    return DLRT_OK;
}

static DlrtStatus write_output(const char *path, const Buf *header,
                               const DlrtTensor *tensors, int n, DlrtError *err) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return write_in_place(path, header, tensors, n, err);
    return write_atomically(path, header, tensors, n, err);
}

DlrtStatus dlrt_save_safetensors(const char *path, const DlrtTensor *tensors, int n,
                                 const DlrtMeta *meta, int nmeta, DlrtError *err) {
    if (!path || !*path)
        return dlrt_fail(err, DLRT_E_ARG, "no checkpoint path");
    if (!host_is_little_endian())
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: safetensors files are little-endian, "
                         "and this host is not", path);
    DlrtStatus st = check_tensors(tensors, n, err);
    if (st == DLRT_OK)
        st = check_meta(meta, nmeta, err);
    if (st != DLRT_OK)
        return st;
    Buf header = {0};
    st = build_header(&header, tensors, n, meta, nmeta, err);
    if (st == DLRT_OK)
        st = write_output(path, &header, tensors, n, err);
    free(header.data);
    return st;
}

/* ------------------------------------------------------------------------ */
/* The header parser                                                        */
/* ------------------------------------------------------------------------ */

/* One tensor the header describes. */
typedef struct Entry {
    char *name;
    DlrtDType dtype;
    int rank;
    int64_t dims[DLRT_MAX_RANK];
    uint64_t begin;      /* data_offsets, relative to the data section */
    uint64_t end;
    bool matched;        /* claimed by one of the caller's tensors */
} Entry;

/* What the header holds, in file order. */
typedef struct Header {
    Entry *entries;
    size_t count;
    size_t cap;
    DlrtMeta *meta;
    int nmeta;
    int metacap;
    bool has_meta;       /* "__metadata__" was seen */
} Header;

typedef struct Parser {
    const char *text;    /* the header, not NUL-terminated */
    size_t len;
    size_t pos;
    const char *path;    /* for messages */
    DlrtError *err;
    DlrtStatus status;   /* of the first failure */
} Parser;

static void header_free(Header *h) {
    for (size_t i = 0; i < h->count; i++)
        free(h->entries[i].name);
    free(h->entries);
    dlrt_meta_free(h->meta, h->nmeta);
    memset(h, 0, sizeof *h);
}

/* Records a failure (the message after "PATH: ") and returns false. */
__attribute__((format(printf, 3, 4)))
static bool parser_fail(Parser *p, DlrtStatus status, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->status = dlrt_fail(p->err, status, "%s: %s", p->path, msg);
    return false;
}

/* A malformed header: the message gives the byte's offset in the file. */
static bool parse_error(Parser *p, const char *what) {
    return parser_fail(p, DLRT_E_FORMAT, "bad header at byte %zu: %s", p->pos + 8, what);
}

static bool parse_nomem(Parser *p) { return parser_fail(p, DLRT_E_NOMEM, "out of memory"); }

static void skip_space(Parser *p) {
    while (p->pos < p->len && (p->text[p->pos] == ' ' || p->text[p->pos] == '\t' ||
                               p->text[p->pos] == '\n' || p->text[p->pos] == '\r'))
        p->pos++;
}

/* Whether the next non-space character is c; consumes it if so. */
static bool accept(Parser *p, char c) {
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == c) {
        p->pos++;
        return true;
    }
    return false;
}

static bool expect(Parser *p, char c, const char *what) {
    return accept(p, c) || parse_error(p, what);
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The four hex digits after "\u" at p->pos; -1 if they are not. */
static long hex4(Parser *p) {
    if (p->len - p->pos < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(p->text[p->pos + i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    p->pos += 4;
    return v;
}

static size_t utf8_encode(unsigned long cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A \u escape (p->pos just after the 'u'), surrogate pairs joined, as UTF-8
 * into out; returns the bytes written, 0 after an error. */
static size_t unicode_escape(Parser *p, char *out) {
    long hi = hex4(p);
    if (hi < 0)
        return parse_error(p, "\\u must be followed by four hex digits");
    if (hi == 0)
        return parse_error(p, "\\u0000 (a NUL character) is not allowed");
    if (hi >= 0xDC00 && hi <= 0xDFFF)
        return parse_error(p, "a lone low surrogate in a \\u escape");
    if (hi < 0xD800 || hi > 0xDBFF)
        return utf8_encode((unsigned long)hi, out);
    if (p->len - p->pos < 2 || p->text[p->pos] != '\\' || p->text[p->pos + 1] != 'u')
        return parse_error(p, "a high surrogate not followed by a low one");
    p->pos += 2;
    long lo = hex4(p);
    if (lo < 0xDC00 || lo > 0xDFFF)
        return parse_error(p, "a high surrogate not followed by a low one");
    return utf8_encode(0x10000 + (((unsigned long)hi - 0xD800) << 10) +
                           ((unsigned long)lo - 0xDC00), out);
}

/* One character of a string body at p->pos, decoded into out; returns the
 * bytes written, 0 after an error. */
static size_t string_char(Parser *p, char *out) {
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c < 0x20)
        return parse_error(p, "a control character in a string");
    if (c != '\\') {
        size_t n = utf8_sequence((const unsigned char *)p->text + p->pos, p->len - p->pos);
        if (n == 0)
            return parse_error(p, "a string is not valid UTF-8");
        memcpy(out, p->text + p->pos, n);
        p->pos += n;
        return n;
    }
    if (++p->pos >= p->len)
        return parse_error(p, "an unterminated string");
    char e = p->text[p->pos++];
    static const char plain[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
    const char *hit = e ? strchr(plain, e) : NULL;
    if (hit) {
        out[0] = decoded[hit - plain];
        return 1;
    }
    if (e == 'u')
        return unicode_escape(p, out);
    p->pos--;
    return parse_error(p, "an unknown escape in a string");
}

/* The bytes from p->pos to the closing quote: a bound on the decoded size
 * (escapes only shrink); len - pos when the string is unterminated. */
static size_t string_extent(const Parser *p) {
    size_t i = p->pos;
    while (i < p->len && p->text[i] != '"')
        i += p->text[i] == '\\' ? 2 : 1;
    return (i < p->len ? i : p->len) - p->pos;
}

/* A string into a new NUL-terminated buffer (*out, the caller's to free). */
static bool parse_string(Parser *p, char **out) {
    if (!accept(p, '"'))
        return parse_error(p, "expected a string");
    char *s = malloc(string_extent(p) + 1);
    if (!s)
        return parse_nomem(p);
    size_t len = 0;
    while (p->pos < p->len && p->text[p->pos] != '"') {
        size_t n = string_char(p, s + len);
        if (n == 0) {
            free(s);
            return false;
        }
        len += n;
    }
    if (p->pos >= p->len) {
        free(s);
        return parse_error(p, "an unterminated string");
    }
    p->pos++;
    s[len] = '\0';
    *out = s;
    return true;
}

/* A non-negative integer no larger than INT64_MAX. */
static bool parse_uint(Parser *p, uint64_t *out) {
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == '-')
        return parse_error(p, "a negative number");
    if (p->pos >= p->len || p->text[p->pos] < '0' || p->text[p->pos] > '9')
        return parse_error(p, "expected a number");
    if (p->text[p->pos] == '0' && p->pos + 1 < p->len && p->text[p->pos + 1] >= '0' &&
        p->text[p->pos + 1] <= '9')
        return parse_error(p, "a number with a leading zero");
    uint64_t v = 0;
    while (p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') {
        unsigned d = (unsigned)(p->text[p->pos] - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return parse_error(p, "a number too large");
        v = v * 10 + d;
        p->pos++;
    }
    if (p->pos < p->len && (p->text[p->pos] == '.' || p->text[p->pos] == 'e' ||
                            p->text[p->pos] == 'E'))
        return parse_error(p, "expected an integer");
    *out = v;
    return true;
}

/* [a, b, ...] with at most max integers; *count receives how many. */
static bool parse_uint_array(Parser *p, uint64_t *vals, int max, int *count,
                             const char *too_many) {
    if (!expect(p, '[', "expected '['"))
        return false;
    *count = 0;
    if (accept(p, ']'))
        return true;
    do {
        if (*count == max)
            return parse_error(p, too_many);
        if (!parse_uint(p, &vals[(*count)++]))
            return false;
    } while (accept(p, ','));
    return expect(p, ']', "expected ',' or ']'");
}

/* The fields of a tensor's object, seen so far. */
enum { FIELD_DTYPE = 1, FIELD_SHAPE = 2, FIELD_OFFSETS = 4 };

static bool parse_dtype(Parser *p, Entry *e) {
    char *s;
    if (!parse_string(p, &s))
        return false;
    for (int t = 0; t <= (int)DLRT_I8; t++) {
        if (strcmp(s, dtype_names[t]) == 0) {
            e->dtype = (DlrtDType)t;
            free(s);
            return true;
        }
    }
    parser_fail(p, DLRT_E_FORMAT, "tensor '%s' has dtype '%s', which dlc does not "
                "support (F32, F64, I32, I64, U8)", e->name, s);
    free(s);
    return false;
}

static bool parse_shape(Parser *p, Entry *e) {
    uint64_t dims[DLRT_MAX_RANK];
    char msg[64];
    snprintf(msg, sizeof msg, "a shape of rank above %d", DLRT_MAX_RANK);
    if (!parse_uint_array(p, dims, DLRT_MAX_RANK, &e->rank, msg))
        return false;
    for (int i = 0; i < e->rank; i++)
        e->dims[i] = (int64_t)dims[i];
    return true;
}

static bool parse_offsets(Parser *p, Entry *e) {
    uint64_t offs[2];
    int count;
    if (!parse_uint_array(p, offs, 2, &count, "data_offsets must hold two numbers"))
        return false;
    if (count != 2)
        return parse_error(p, "data_offsets must hold two numbers");
    e->begin = offs[0];
    e->end = offs[1];
    return true;
}

/* One "key": value of a tensor's object; *seen collects the fields. */
static bool parse_field(Parser *p, Entry *e, int *seen) {
    size_t at = p->pos;
    char *key;
    if (!parse_string(p, &key))
        return false;
    int field = strcmp(key, "dtype") == 0           ? FIELD_DTYPE
                : strcmp(key, "shape") == 0         ? FIELD_SHAPE
                : strcmp(key, "data_offsets") == 0  ? FIELD_OFFSETS
                                                    : 0;
    free(key);
    if (field == 0 || (*seen & field)) {
        p->pos = at;
        return parse_error(p, field ? "a field given twice" : "an unknown field "
                           "(a tensor has dtype, shape and data_offsets)");
    }
    *seen |= field;
    if (!expect(p, ':', "expected ':'"))
        return false;
    return field == FIELD_DTYPE   ? parse_dtype(p, e)
           : field == FIELD_SHAPE ? parse_shape(p, e)
                                  : parse_offsets(p, e);
}

/* Whether the offsets span exactly the bytes dtype and shape need. */
static bool entry_consistent(Parser *p, const Entry *e) {
    char shape[160];
    format_shape(shape, sizeof shape, e->rank, e->dims);
    int64_t elements = shape_elements(e->rank, e->dims);
    if (elements < 0)
        return parser_fail(p, DLRT_E_FORMAT, "tensor '%s' has a shape too large, %s",
                           e->name, shape);
    uint64_t bytes = (uint64_t)elements * (uint64_t)dtype_sizes[e->dtype];
    if (e->end < e->begin || e->end - e->begin != bytes)
        return parser_fail(p, DLRT_E_FORMAT, "tensor '%s' has data_offsets [%" PRIu64
                           ",%" PRIu64 "], which do not span the %" PRIu64 " bytes of %s %s",
                           e->name, e->begin, e->end, bytes, dtype_names[e->dtype], shape);
    return true;
}

/* The object describing the tensor named name (which e takes over). */
static bool parse_tensor(Parser *p, Entry *e, char *name) {
    memset(e, 0, sizeof *e);
    e->name = name;
    if (!expect(p, '{', "expected '{' (a tensor's description)"))
        return false;
    int seen = 0;
    if (!accept(p, '}')) {
        do {
            if (!parse_field(p, e, &seen))
                return false;
        } while (accept(p, ','));
        if (!expect(p, '}', "expected ',' or '}'"))
            return false;
    }
    if (seen != (FIELD_DTYPE | FIELD_SHAPE | FIELD_OFFSETS)) {
        p->pos--;
        return parse_error(p, "a tensor needs dtype, shape and data_offsets");
    }
    return entry_consistent(p, e);
}

static bool add_entry(Parser *p, Header *h, char *name) {
    if (h->count == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 16;
        Entry *entries = realloc(h->entries, cap * sizeof *entries);
        if (!entries) {
            free(name);
            return parse_nomem(p);
        }
        h->entries = entries;
        h->cap = cap;
    }
    /* counted now, so that the name is freed with h whatever happens */
    return parse_tensor(p, &h->entries[h->count++], name);
}

/* One "key": "value" of the metadata. */
static bool add_meta(Parser *p, Header *h) {
    if (h->nmeta == h->metacap) {
        if (h->metacap > (1 << 28))
            return parse_error(p, "too many metadata entries");
        int cap = h->metacap ? 2 * h->metacap : 8;
        DlrtMeta *meta = realloc(h->meta, (size_t)cap * sizeof *meta);
        if (!meta)
            return parse_nomem(p);
        h->meta = meta;
        h->metacap = cap;
    }
    DlrtMeta *m = &h->meta[h->nmeta];
    m->key = m->value = NULL;
    h->nmeta++;   /* counted now, so that header_free frees a half entry */
    if (!parse_string(p, &m->key) || !expect(p, ':', "expected ':'"))
        return false;
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] != '"')
        return parse_error(p, "a metadata value must be a string");
    return parse_string(p, &m->value);
}

static bool parse_metadata(Parser *p, Header *h) {
    if (h->has_meta)
        return parse_error(p, "__metadata__ given twice");
    h->has_meta = true;
    if (!expect(p, '{', "expected '{' (the metadata)"))
        return false;
    if (accept(p, '}'))
        return true;
    do {
        if (!add_meta(p, h))
            return false;
    } while (accept(p, ','));
    return expect(p, '}', "expected ',' or '}'");
}

/* One "name": {...} member of the top-level object. */
static bool parse_member(Parser *p, Header *h) {
    char *name;
    if (!parse_string(p, &name))
        return false;
    if (!expect(p, ':', "expected ':'")) {
        free(name);
        return false;
    }
    if (strcmp(name, "__metadata__") == 0) {
        free(name);
        return parse_metadata(p, h);
    }
    if (!*name) {
        free(name);
        return parse_error(p, "a tensor with an empty name");
    }
    return add_entry(p, h, name);
}

static bool parse_header(Parser *p, Header *h) {
    if (p->len == 0 || p->text[0] != '{')
        return parse_error(p, "the header must start with '{'");
    p->pos = 1;
    if (!accept(p, '}')) {
        do {
            if (!parse_member(p, h))
                return false;
        } while (accept(p, ','));
        if (!expect(p, '}', "expected ',' or '}'"))
            return false;
    }
    skip_space(p);
    if (p->pos != p->len)
        return parse_error(p, "text after the header's object");
    return true;
}

/* ------------------------------------------------------------------------ */
/* Checking the header                                                      */
/* ------------------------------------------------------------------------ */

/* Duplicate names among the tensors or among the metadata keys. */
static DlrtStatus check_unique(const Header *h, const char *path, DlrtError *err) {
    bool nomem;
    const char *dup = find_duplicate(h->entries, h->count, sizeof *h->entries,
                                     offsetof(Entry, name), &nomem);
    if (!nomem && dup)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: two tensors are named '%s'", path, dup);
    if (!nomem)
        dup = find_duplicate(h->meta, (size_t)h->nmeta, sizeof *h->meta, offsetof(DlrtMeta, key),
                             &nomem);
    if (nomem)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    if (dup)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: the metadata key '%s' is given twice", path,
                         dup);
    return DLRT_OK;
}

static int compare_by_offset(const void *a, const void *b) {
    const Entry *x = *(const Entry *const *)a, *y = *(const Entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return 0;
}

/* The offsets tile [0, data_size) exactly: no gap, no overlap, nothing
 * past the end of the file and nothing after the last tensor. */
static DlrtStatus check_offsets(const Header *h, uint64_t data_size, const char *path,
                                DlrtError *err) {
    const Entry **order = malloc((h->count + 1) * sizeof *order);
    if (!order)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    for (size_t i = 0; i < h->count; i++)
        order[i] = &h->entries[i];
    qsort(order, h->count, sizeof *order, compare_by_offset);
    uint64_t at = 0;
    DlrtStatus st = DLRT_OK;
    for (size_t i = 0; i < h->count && st == DLRT_OK; i++) {
        const Entry *e = order[i];
        if (e->begin != at)
            st = dlrt_fail(err, DLRT_E_FORMAT, "%s: tensor '%s' starts at data offset %"
                           PRIu64 ", expected %" PRIu64 " (offsets must leave no gap "
                           "and not overlap)", path, e->name, e->begin, at);
        else if (e->end > data_size)
            st = dlrt_fail(err, DLRT_E_FORMAT, "%s: truncated: tensor '%s' ends at data "
                           "offset %" PRIu64 ", the file holds %" PRIu64 " bytes of data",
                           path, e->name, e->end, data_size);
        at = e->end;
    }
    if (st == DLRT_OK && at != data_size)
        st = dlrt_fail(err, DLRT_E_FORMAT, "%s: %" PRIu64 " bytes after the last tensor's "
                       "data", path, data_size - at);
    free(order);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Matching the caller's tensors                                            */
/* ------------------------------------------------------------------------ */

/* Entries are looked up by name through pointers sorted by name; names
 * are unique by now. */
static int compare_entry_names(const void *a, const void *b) {
    return strcmp((*(Entry *const *)a)->name, (*(Entry *const *)b)->name);
}

static int compare_name_to_entry(const void *key, const void *elem) {
    return strcmp((const char *)key, (*(Entry *const *)elem)->name);
}

/* Lists into buf the caller's tensors the file lacks ("'a', 'b', ..." when
 * they do not all fit) and returns how many there are. */
static int list_missing(char *buf, size_t cap, const DlrtTensor *tensors, int n,
                        Entry **match) {
    int missing = 0;
    size_t len = 0;
    bool cut = false;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (match[i])
            continue;
        const char *sep = missing ? ", " : "";
        if (!cut && len + strlen(sep) + strlen(tensors[i].name) + 2 + 6 < cap) {
            len += (size_t)snprintf(buf + len, cap - len, "%s'%s'", sep, tensors[i].name);
        } else if (!cut) {
            snprintf(buf + len, cap - len, "%s...", sep);
            cut = true;
        }
        missing++;
    }
    return missing;
}

static DlrtStatus check_entry(const DlrtTensor *t, const Entry *e, const char *path,
                              DlrtError *err) {
    if (t->dtype != e->dtype)
        return dlrt_fail(err, DLRT_E_SHAPE, "%s: tensor '%s' has dtype %s, the network "
                         "expects %s", path, t->name, dtype_names[e->dtype],
                         dtype_names[t->dtype]);
    bool same = t->rank == e->rank;
    for (int d = 0; same && d < t->rank; d++)
        same = t->dims[d] == e->dims[d];
    if (same)
        return DLRT_OK;
    char have[160], want[160];
    format_shape(have, sizeof have, e->rank, e->dims);
    format_shape(want, sizeof want, t->rank, t->dims);
    return dlrt_fail(err, DLRT_E_SHAPE, "%s: tensor '%s' has shape %s, the network "
                     "expects %s", path, t->name, have, want);
}

/* Pairs each of the caller's tensors with its entry (match[i]): every one
 * present, no entry left over, dtypes and shapes equal. */
static DlrtStatus match_tensors(Header *h, const DlrtTensor *tensors, int n, Entry **match,
                                const char *path, DlrtError *err) {
    Entry **by_name = malloc((h->count + 1) * sizeof *by_name);
    if (!by_name)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    for (size_t i = 0; i < h->count; i++)
        by_name[i] = &h->entries[i];
    qsort(by_name, h->count, sizeof *by_name, compare_entry_names);
    for (int i = 0; i < n; i++) {
        Entry **found = h->count ? bsearch(tensors[i].name, by_name, h->count,
                                           sizeof *by_name, compare_name_to_entry) : NULL;
        match[i] = found ? *found : NULL;
        if (match[i])
            match[i]->matched = true;
    }
    free(by_name);
    char names[400];
    int missing = list_missing(names, sizeof names, tensors, n, match);
    if (missing)
        return dlrt_fail(err, DLRT_E_SHAPE, "%s: missing tensor%s %s", path,
                         missing > 1 ? "s" : "", names);
    for (size_t i = 0; i < h->count; i++)
        if (!h->entries[i].matched)
            return dlrt_fail(err, DLRT_E_SHAPE, "%s: unexpected tensor '%s' (the network "
                             "has no parameter of that name)", path, h->entries[i].name);
    for (int i = 0; i < n; i++) {
        DlrtStatus st = check_entry(&tensors[i], match[i], path, err);
        if (st != DLRT_OK)
            return st;
    }
    return DLRT_OK;
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                  */
/* ------------------------------------------------------------------------ */

/* An open checkpoint and what its first bytes say. */
typedef struct Source {
    FILE *f;
    const char *path;
    uint64_t file_size;
    uint64_t header_size;   /* N, the JSON's length */
    char *header;           /* N bytes */
} Source;

static DlrtStatus source_open(Source *s, DlrtError *err) {
    s->f = fopen(s->path, "rb");
    if (!s->f)
        return dlrt_fail(err, DLRT_E_IO, "cannot open '%s': %s", s->path, strerror(errno));
    struct stat st;
    if (fstat(fileno(s->f), &st) != 0)
        return dlrt_fail(err, DLRT_E_IO, "cannot read '%s': %s", s->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return dlrt_fail(err, DLRT_E_IO, "cannot read '%s': not a regular file", s->path);
    s->file_size = (uint64_t)st.st_size;
    return DLRT_OK;
}

static DlrtStatus source_read_header(Source *s, DlrtError *err) {
    unsigned char size[8];
    if (s->file_size < 8 || fread(size, 1, 8, s->f) != 8)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: truncated: %" PRIu64 " bytes, too short "
                         "for a safetensors file", s->path, s->file_size);
    s->header_size = 0;
    for (int i = 7; i >= 0; i--)
        s->header_size = s->header_size << 8 | size[i];
    if (s->header_size > s->file_size - 8)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: the header size, %" PRIu64 " bytes, is "
                         "larger than the file (%" PRIu64 " bytes): truncated or not a "
                         "safetensors file", s->path, s->header_size, s->file_size);
    if (s->header_size > MAX_HEADER_SIZE)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: the header size, %" PRIu64 " bytes, is "
                         "larger than the limit of %u", s->path, s->header_size,
                         MAX_HEADER_SIZE);
    s->header = malloc((size_t)s->header_size + 1);
    if (!s->header)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    if (fread(s->header, 1, (size_t)s->header_size, s->f) != s->header_size)
        return dlrt_fail(err, DLRT_E_IO, "cannot read '%s'", s->path);
    return DLRT_OK;
}

/* Copies each matched tensor's bytes into the caller's data. */
static DlrtStatus source_read_data(Source *s, DlrtTensor *tensors, int n, Entry **match,
                                   DlrtError *err) {
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)(match[i]->end - match[i]->begin);
        off_t at = (off_t)(8 + s->header_size + match[i]->begin);
        if (bytes == 0)
            continue;
        if (fseeko(s->f, at, SEEK_SET) != 0 || fread(tensors[i].data, 1, bytes, s->f) != bytes)
            return dlrt_fail(err, DLRT_E_IO, "cannot read '%s': tensor '%s' is cut short",
                             s->path, tensors[i].name);
    }
    return DLRT_OK;
}

/* Parses and checks the header against the file and the caller's tensors. */
static DlrtStatus load_header(Source *s, Header *h, const DlrtTensor *tensors, int n,
                              Entry **match, DlrtError *err) {
    DlrtStatus st = source_read_header(s, err);
    if (st != DLRT_OK)
        return st;
    Parser p = {.text = s->header, .len = (size_t)s->header_size, .path = s->path,
                .err = err};
    if (!parse_header(&p, h))
        return p.status;
    st = check_unique(h, s->path, err);
    if (st == DLRT_OK)
        st = check_offsets(h, s->file_size - 8 - s->header_size, s->path, err);
    if (st == DLRT_OK)
        st = match_tensors(h, tensors, n, match, s->path, err);
    return st;
}

/* Hands the metadata over (or frees it when the caller does not want it). */
static void give_meta(Header *h, DlrtMeta **meta, int *nmeta) {
    if (meta && h->nmeta > 0) {
        *meta = h->meta;
        *nmeta = h->nmeta;
        h->meta = NULL;
        h->nmeta = 0;
    }
}

DlrtStatus dlrt_load_safetensors(const char *path, DlrtTensor *tensors, int n,
                                 DlrtMeta **meta, int *nmeta, DlrtError *err) {
    if (meta && !nmeta)
        return dlrt_fail(err, DLRT_E_ARG, "metadata asked for without a count");
    if (meta) {
        *meta = NULL;
        *nmeta = 0;
    }
    if (!path || !*path)
        return dlrt_fail(err, DLRT_E_ARG, "no checkpoint path");
    if (!host_is_little_endian())
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: safetensors files are little-endian, "
                         "and this host is not", path);
    DlrtStatus st = check_tensors(tensors, n, err);
    if (st != DLRT_OK)
        return st;
    Entry **match = calloc((size_t)n + 1, sizeof *match);
    if (!match)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    Source s = {.path = path};
    Header h = {0};
    st = source_open(&s, err);
    if (st == DLRT_OK)
        st = load_header(&s, &h, tensors, n, match, err);
    if (st == DLRT_OK)
        st = source_read_data(&s, tensors, n, match, err);
    if (st == DLRT_OK)
        give_meta(&h, meta, nmeta);
    if (s.f)
        fclose(s.f);
    free(s.header);
    free(match);
    header_free(&h);
    return st;
}
