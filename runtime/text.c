/* text.c — text for character-level language models: UTF-8 files, their
 * vocabulary of characters, and datasets of next-character prediction.
 *
 * Reading.  dlrt_load_text reads a file, or the regular files of a folder
 * in the byte order of their names, into one buffer, exactly as stored:
 * line ends, byte order marks and the rest are kept, since a model learns
 * what it is given.  Files go through zlib's gzread, as data.c's do, so a
 * gzip-compressed file reads as its contents whatever its name.  Each
 * file's bytes are checked once read: no NUL byte (binary data), and
 * strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF, no character cut short at the end of a file); the message
 * gives the file and the byte offset in its (inflated) contents.  A limit
 * on the bytes in all (1 GiB unless the caller says otherwise) is checked
 * before reading a plain file whose size says it would pass it, and as a
 * compressed one inflates, so a wrong path to something huge fails fast.
 *
 * The vocabulary.  A character is a code point, the ids are the ranks of
 * the text's distinct characters in code point order, and a checkpoint
 * keeps them as one metadata string, the characters in id order: simple
 * to read anywhere (Python: list(metadata["vocabulary"])), with
 * safetensors.c's JSON escaping what JSON needs.  NUL, which a C string
 * cannot hold, never is a character: text with one is refused as binary.
 * Reading the metadata back checks it as strictly as the text, and that
 * the code points ascend, which rules out a character given twice.
 *
 * The datasets.  Non-overlapping samples of T ids with the T ids that
 * follow as labels (label_size = T): at a stride of T every position is an
 * input once and a label once, and the split between training and
 * validation falls on a sample's boundary, so that no validation label was
 * trained on.  Ids become floats, exact below 2^24, which bounds the
 * vocabulary (every Unicode vocabulary fits: there are 0x110000 code
 * points).
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "dlrt.h"

/* gzread reads at most this much at a time, and buffers start at it. */
#define CHUNK (1 << 20)
/* One past the largest code point. */
#define CODE_POINTS 0x110000u
/* The largest vocabulary a dataset takes: ids as floats are exact below
 * 2^24. */
#define MAX_FLOAT_ID (1 << 24)

/* ---- UTF-8 -------------------------------------------------------------- */

/* What decoding one character found. */
typedef enum Utf8Fault {
    UTF8_OK,         /* a character */
    UTF8_NUL,        /* a NUL byte: binary data */
    UTF8_STRAY,      /* a byte that starts no character (0x80-0xBF, 0xF8-0xFF) */
    UTF8_BROKEN,     /* a lead byte without the continuation bytes it needs */
    UTF8_OVERLONG,   /* a character in more bytes than it needs (0xC0 0xAF) */
    UTF8_SURROGATE,  /* U+D800 to U+DFFF, which UTF-8 excludes */
    UTF8_TOO_LARGE,  /* beyond U+10FFFF */
    UTF8_TRUNCATED,  /* the data ends inside a character */
} Utf8Fault;

/* Decodes the character at p (before end): its code point *cp and its
 * length *len, or for a fault the bytes that show it. */
static Utf8Fault utf8_decode(const uint8_t *p, const uint8_t *end, uint32_t *cp, int *len) {
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint8_t b = p[0];
    *cp = b;
    *len = 1;
    if (b < 0x80)
        return b ? UTF8_OK : UTF8_NUL;
    if (b < 0xC0 || b >= 0xF8)
        return UTF8_STRAY;
    /* 0xC0, 0xC1 and 0xF5-0xF7 decode here and fail as overlong or too
       large, which says more than "invalid byte" */
    int n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    uint32_t c = b & (0x7Fu >> n);
    for (int i = 1; i < n; i++) {
        *len = i + 1;
        if (p + i == end) {
            *len = i;
            return UTF8_TRUNCATED;
        }
        if ((p[i] & 0xC0) != 0x80)
            return UTF8_BROKEN;
        c = c << 6 | (p[i] & 0x3Fu);
    }
    *cp = c;
    if (c < least[n])
        return UTF8_OVERLONG;
    if (c >= 0xD800 && c <= 0xDFFF)
        return UTF8_SURROGATE;
    return c < CODE_POINTS ? UTF8_OK : UTF8_TOO_LARGE;
}

/* The length of a character whose lead byte is b (a valid one). */
static int utf8_length(uint8_t b) {
    return b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
}

/* Encodes cp (a valid code point) at out; returns the bytes written. */
static int utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Whether a character may be shown as itself in a message: not a control
 * character, and nothing that would move or hide the text around it (line
 * and paragraph separators, zero-width and bidirectional marks, the byte
 * order mark). */
static bool printable(uint32_t cp) {
    return cp >= 0x20 && !(cp >= 0x7F && cp <= 0x9F) && !(cp >= 0x200B && cp <= 0x200F) &&
           !(cp >= 0x2028 && cp <= 0x202E) && !(cp >= 0x2066 && cp <= 0x2069) &&
           cp != 0xFEFF && !(cp >= 0xD800 && cp <= 0xDFFF) && cp < CODE_POINTS;
}

/* A character for messages: "U+00E9 'é'", or "U+000A" when it is not
 * printable; into buf (16 bytes at least); returns buf. */
static const char *char_text(char *buf, size_t size, uint32_t cp) {
    char c[5] = {0};
    if (printable(cp))
        c[utf8_encode(cp, c)] = '\0';
    snprintf(buf, size, c[0] ? "U+%04X '%s'" : "U+%04X", (unsigned)cp, c);
    return buf;
}

/* The bytes of a faulty sequence in hex, "0xE2 0x82", into buf. */
static const char *hex_bytes(char *buf, size_t size, const uint8_t *p, int len) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < len && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s0x%02X", i ? " " : "", p[i]);
    return buf;
}

/* The message of a fault at byte offset of name ("a.txt", "the text"). */
static DlrtStatus utf8_fail(DlrtError *err, const char *name, int64_t offset, Utf8Fault f,
                            const uint8_t *p, int len, uint32_t cp) {
    char hex[32];
    long long at = (long long)offset;
    hex_bytes(hex, sizeof hex, p, len);
    switch (f) {
    case UTF8_OK:
        break;
    case UTF8_NUL:
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: a NUL byte at byte %lld: binary data, not text",
                         name, at);
    case UTF8_STRAY:
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not UTF-8 at byte %lld: byte 0x%02X cannot "
                         "start a character", name, at, p[0]);
    case UTF8_BROKEN:
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not UTF-8 at byte %lld: an invalid sequence "
                         "(%s): 0x%02X begins a %d-byte character", name, at, hex, p[0],
                         utf8_length(p[0]));
    case UTF8_OVERLONG:
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not UTF-8 at byte %lld: an overlong encoding "
                         "of U+%04X (%s)", name, at, (unsigned)cp, hex);
    case UTF8_SURROGATE:
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not UTF-8 at byte %lld: the surrogate U+%04X "
                         "(%s), which UTF-8 excludes", name, at, (unsigned)cp, hex);
    case UTF8_TOO_LARGE:
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not UTF-8 at byte %lld: U+%X (%s) is beyond "
                         "U+10FFFF", name, at, (unsigned)cp, hex);
    case UTF8_TRUNCATED:
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: not UTF-8 at byte %lld: the data ends inside a "
                         "%d-byte character (%s)", name, at, utf8_length(p[0]), hex);
    }
    return dlrt_fail(err, DLRT_E_FORMAT, "%s: not UTF-8 at byte %lld", name, at);
}

/* Checks that n bytes at p are UTF-8 without NUL bytes and counts their
 * characters into *chars; messages name `name`. */
static DlrtStatus utf8_check(const char *name, const uint8_t *p, int64_t n, int64_t *chars,
                             DlrtError *err) {
    const uint8_t *s = p, *end = p + n;
    int64_t count = 0;
    while (s < end) {
        /* ASCII, most of any English text, one byte at a time */
        if (*s - 1u < 0x7Fu) {
            s++;
            count++;
            continue;
        }
        uint32_t cp;
        int len;
        Utf8Fault f = utf8_decode(s, end, &cp, &len);
        if (f != UTF8_OK)
            return utf8_fail(err, name, s - p, f, s, len, cp);
        s += len;
        count++;
    }
    *chars = count;
    return DLRT_OK;
}

/* ---- reading ------------------------------------------------------------ */

/* The state of one dlrt_load_text call. */
typedef struct Loader {
    const char *root;   /* the path the caller gave, for messages */
    bool folder;        /* whether root is a folder */
    int64_t max;        /* the most bytes of text in all */
    char *buf;          /* the text so far; cap + 1 bytes (room for a NUL) */
    int64_t size, cap;  /* bytes in buf; its capacity */
    int64_t chars;      /* characters in buf */
    int files;          /* files read */
} Loader;

/* The limit passed while reading path. */
static DlrtStatus too_large(const Loader *ld, const char *path, DlrtError *err) {
    if (!ld->folder)
        return dlrt_fail(err, DLRT_E_RANGE, "%s: more than %lld bytes of text, the limit",
                         path, (long long)ld->max);
    return dlrt_fail(err, DLRT_E_RANGE, "%s: the files of %s hold more than %lld bytes of text, "
                     "the limit", path, ld->root, (long long)ld->max);
}

/* Makes room in the buffer for more bytes; the capacity stops at max + 1,
 * one byte past the limit, so that passing it is seen. */
static DlrtStatus grow(Loader *ld, const char *path, DlrtError *err) {
    int64_t top = ld->max + 1;
    int64_t ncap = ld->cap < CHUNK ? CHUNK : ld->cap > top / 2 ? top : 2 * ld->cap;
    ncap = ncap < top ? ncap : top;
    char *nbuf = (uint64_t)ncap < SIZE_MAX ? realloc(ld->buf, (size_t)ncap + 1) : NULL;
    if (!nbuf)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory after %lld bytes of text", path,
                         (long long)ld->size);
    ld->buf = nbuf;
    ld->cap = ncap;
    return DLRT_OK;
}

/* The failure gzread reported for path, as a status and message. */
static DlrtStatus gz_failure(gzFile f, const char *path, DlrtError *err) {
    int errnum = Z_OK;
    const char *msg = gzerror(f, &errnum);
    size_t plen = strlen(path);
    /* zlib prefixes its messages with the path it was given */
    if (strncmp(msg, path, plen) == 0 && strncmp(msg + plen, ": ", 2) == 0)
        msg += plen + 2;
    if (errnum == Z_MEM_ERROR)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory reading the file", path);
    if (errnum == Z_ERRNO)
        return dlrt_fail(err, DLRT_E_IO, "%s: cannot read: %s", path, msg);
    return dlrt_fail(err, DLRT_E_FORMAT, "%s: bad gzip data: %s", path, msg);
}

/* Appends the contents of the regular file path (file_size bytes on disk)
 * to the text, and checks them. */
static DlrtStatus read_file(Loader *ld, const char *path, int64_t file_size, DlrtError *err) {
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f) {
        if (errno == 0 || errno == ENOMEM)
            return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory opening the file", path);
        return dlrt_fail(err, DLRT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    gzbuffer(f, 1u << 17);
    int64_t start = ld->size;
    DlrtStatus st = DLRT_OK;
    /* a plain file's size is its text's: fail before reading it */
    if (gzdirect(f) && file_size > ld->max - start)
        st = too_large(ld, path, err);
    while (st == DLRT_OK) {
        if (ld->size == ld->cap && (st = grow(ld, path, err)) != DLRT_OK)
            break;
        int64_t room = ld->cap - ld->size;
        int k = gzread(f, ld->buf + ld->size, (unsigned)(room < CHUNK ? room : CHUNK));
        if (k < 0) {
            st = gz_failure(f, path, err);
        } else if (k == 0) {
            /* the end: of the file, or of a gzip stream cut short */
            int errnum = Z_OK;
            gzerror(f, &errnum);
            if (errnum == Z_BUF_ERROR)
                st = dlrt_fail(err, DLRT_E_FORMAT, "%s: bad gzip data: the stream is cut short "
                               "after %lld bytes", path, (long long)(ld->size - start));
            break;
        } else {
            ld->size += k;
            if (ld->size > ld->max)
                st = too_large(ld, path, err);
        }
    }
    gzclose(f);
    int64_t chars = 0;
    if (st == DLRT_OK)
        st = utf8_check(path, (const uint8_t *)ld->buf + start, ld->size - start, &chars, err);
    ld->chars += chars;
    ld->files++;
    return st;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder's entries, all but those whose names start with '.'. */
typedef struct Listing {
    char **names;   /* n names, sorted by strcmp (bytes), each malloc'd */
    int n, cap;     /* names held; room */
} Listing;

static void listing_free(Listing *l) {
    for (int i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    memset(l, 0, sizeof *l);
}

static DlrtStatus listing_add(Listing *l, const char *name, const char *dir, DlrtError *err) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **names = l->cap < (1 << 24) ? realloc(l->names, (size_t)cap * sizeof *names) : NULL;
        if (!names)
            return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory listing the folder", dir);
        l->names = names;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strdup(name)))
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory listing the folder", dir);
    l->n++;
    return DLRT_OK;
}

/* dir/name in a new string; NULL when out of memory. */
static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, name, b + 1);
    }
    return p;
}

/* Whether name is "NAME.dat" and NAME is in the (sorted) listing: strfile's
 * index of the fortune file NAME. */
static bool is_strfile_index(const Listing *l, const char *name) {
    size_t n = strlen(name);
    if (n <= 4 || strcmp(name + n - 4, ".dat") != 0)
        return false;
    char *base = strndup(name, n - 4);
    bool found = base && bsearch(&base, l->names, (size_t)l->n, sizeof *l->names,
                                 compare_names) != NULL;
    free(base);
    return found;
}

/* Lists the folder's entries (every name but those starting with '.'),
 * sorted. */
static DlrtStatus list_folder(const char *dir, Listing *l, DlrtError *err) {
    errno = 0;
    DIR *d = opendir(dir);
    if (!d)
        return dlrt_fail(err, errno == ENOMEM ? DLRT_E_NOMEM : DLRT_E_IO,
                         "%s: cannot open the folder: %s", dir, strerror(errno));
    DlrtStatus st = DLRT_OK;
    struct dirent *e;
    for (errno = 0; st == DLRT_OK && (e = readdir(d)) != NULL; errno = 0)
        if (e->d_name[0] != '.')
            st = listing_add(l, e->d_name, dir, err);
    if (st == DLRT_OK && errno)
        st = dlrt_fail(err, DLRT_E_IO, "%s: cannot read the folder: %s", dir, strerror(errno));
    closedir(d);
    if (st == DLRT_OK && l->n > 1)
        qsort(l->names, (size_t)l->n, sizeof *l->names, compare_names);
    return st;
}

/* Reads the regular files directly in dir, in the order of their names. */
static DlrtStatus read_folder(Loader *ld, const char *dir, DlrtError *err) {
    Listing l = {0};
    DlrtStatus st = list_folder(dir, &l, err);
    for (int i = 0; st == DLRT_OK && i < l.n; i++) {
        char *path = join(dir, l.names[i]);
        struct stat sb;
        if (!path)
            st = dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory listing the folder", dir);
        else if (lstat(path, &sb) != 0)
            st = dlrt_fail(err, DLRT_E_IO, "%s: cannot read: %s", path, strerror(errno));
        /* symbolic links (fortunes' NAME.u8 -> NAME would read twice),
           subfolders, devices and strfile's indexes are not text */
        else if (S_ISREG(sb.st_mode) && !is_strfile_index(&l, l.names[i]))
            st = read_file(ld, path, (int64_t)sb.st_size, err);
        free(path);
    }
    listing_free(&l);
    if (st == DLRT_OK && ld->files == 0)
        st = dlrt_fail(err, DLRT_E_FORMAT, "%s: no text: the folder holds no files to read", dir);
    return st;
}

DlrtStatus dlrt_load_text(DlrtText *text, const char *path, int64_t max_bytes, DlrtError *err) {
    if (!text || !path)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_load_text: a text and a path are needed");
    memset(text, 0, sizeof *text);
    if (max_bytes < 0 || max_bytes > INT64_MAX / 2)
        return dlrt_fail(err, DLRT_E_ARG, "%s: a limit of %lld bytes of text is out of range",
                         path, (long long)max_bytes);
    Loader ld = {.root = path, .max = max_bytes ? max_bytes : DLRT_TEXT_MAX_BYTES};
    struct stat sb;
    DlrtStatus st;
    if (stat(path, &sb) != 0)
        st = dlrt_fail(err, DLRT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    else if ((ld.folder = S_ISDIR(sb.st_mode)))
        st = read_folder(&ld, path, err);
    else if (S_ISREG(sb.st_mode))
        st = read_file(&ld, path, (int64_t)sb.st_size, err);
    else
        st = dlrt_fail(err, DLRT_E_IO, "%s: not a file or a folder", path);
    if (st == DLRT_OK && ld.size == 0)
        st = !ld.folder ? dlrt_fail(err, DLRT_E_FORMAT, "%s: no text: the file is empty", path)
                        : dlrt_fail(err, DLRT_E_FORMAT, "%s: no text: %s empty", path,
                                    ld.files == 1 ? "its one file is" : "its files are");
    if (st != DLRT_OK) {
        free(ld.buf);
        return st;
    }
    ld.buf[ld.size] = '\0';
    /* give back what the last doubling took beyond the text */
    char *fit = realloc(ld.buf, (size_t)ld.size + 1);
    *text = (DlrtText){.data = fit ? fit : ld.buf, .size = ld.size, .chars = ld.chars,
                       .files = ld.files};
    return DLRT_OK;
}

void dlrt_text_free(DlrtText *text) {
    if (!text)
        return;
    free(text->data);
    memset(text, 0, sizeof *text);
}

/* ---- the vocabulary ----------------------------------------------------- */

/* Fills v from n ascending code points (taking cps over: it becomes
 * v->chars, freed on failure too). */
static DlrtStatus vocab_init(DlrtVocab *v, uint32_t *cps, int32_t n, DlrtError *err) {
    memset(v, 0, sizeof *v);
    size_t bytes = 1;
    char tmp[4];
    for (int32_t i = 0; i < n; i++)
        bytes += (size_t)utf8_encode(cps[i], tmp);
    char *utf8 = malloc(bytes);
    if (!utf8) {
        free(cps);
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for a vocabulary of %d characters",
                         (int)n);
    }
    size_t at = 0;
    for (int32_t i = 0; i < n; i++)
        at += (size_t)utf8_encode(cps[i], utf8 + at);
    utf8[at] = '\0';
    for (int i = 0; i < 256; i++)
        v->latin1[i] = -1;
    for (int32_t i = 0; i < n && cps[i] < 256; i++)
        v->latin1[cps[i]] = i;
    v->size = n;
    v->chars = cps;
    v->utf8 = utf8;
    return DLRT_OK;
}

/* The id of code point cp, or -1 when it is not in the vocabulary. */
static int32_t vocab_id(const DlrtVocab *v, uint32_t cp) {
    if (cp < 256)
        return v->latin1[cp];
    int32_t lo = 0, hi = v->size;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (v->chars[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->size && v->chars[lo] == cp ? lo : -1;
}

/* Walks n bytes of valid UTF-8 (already checked) one character at a time. */
static uint32_t next_char(const uint8_t **s) {
    const uint8_t *p = *s;
    int n = utf8_length(p[0]);
    uint32_t c = n == 1 ? p[0] : p[0] & (0x7Fu >> n);
    for (int i = 1; i < n; i++)
        c = c << 6 | (p[i] & 0x3Fu);
    *s = p + n;
    return c;
}

DlrtStatus dlrt_vocab_build(DlrtVocab *v, const char *text, int64_t size, DlrtError *err) {
    if (!v || (!text && size > 0) || size < 0)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_vocab_build: a vocabulary and a text are needed");
    memset(v, 0, sizeof *v);
    if (size == 0)
        return dlrt_fail(err, DLRT_E_FORMAT, "the text is empty: a vocabulary needs characters");
    int64_t chars = 0;
    DlrtStatus st = utf8_check("the text", (const uint8_t *)text, size, &chars, err);
    if (st != DLRT_OK)
        return st;
    /* a bit per code point: 136 KiB */
    uint8_t *seen = calloc(CODE_POINTS / 8, 1);
    if (!seen)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for a vocabulary");
    int32_t n = 0;
    const uint8_t *s = (const uint8_t *)text, *end = s + size;
    while (s < end) {
        uint32_t c = next_char(&s);
        uint8_t bit = (uint8_t)(1u << (c & 7));
        n += !(seen[c >> 3] & bit);
        seen[c >> 3] |= bit;
    }
    uint32_t *cps = malloc((size_t)n * sizeof *cps);
    if (!cps) {
        free(seen);
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for a vocabulary of %d characters",
                         (int)n);
    }
    int32_t k = 0;
    for (uint32_t c = 0; c < CODE_POINTS; c++)
        if (seen[c >> 3] & (1u << (c & 7)))
            cps[k++] = c;
    free(seen);
    return vocab_init(v, cps, n, err);
}

DlrtStatus dlrt_vocab_encode(const DlrtVocab *v, const char *text, int64_t size, int32_t **ids,
                             int64_t *n, DlrtError *err) {
    if (!ids || !n)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_vocab_encode: no place for the ids");
    *ids = NULL;
    *n = 0;
    if (!v || v->size < 1 || !v->chars || (!text && size > 0) || size < 0)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_vocab_encode: a vocabulary and a text are needed");
    int64_t chars = 0;
    DlrtStatus st = size > 0 ? utf8_check("the text", (const uint8_t *)text, size, &chars, err)
                             : DLRT_OK;
    if (st != DLRT_OK)
        return st;
    if ((uint64_t)chars >= SIZE_MAX / sizeof **ids)
        return dlrt_fail(err, DLRT_E_NOMEM, "the text: too many characters for memory: %lld",
                         (long long)chars);
    int32_t *out = malloc((size_t)(chars > 0 ? chars : 1) * sizeof *out);
    if (!out)
        return dlrt_fail(err, DLRT_E_NOMEM, "the text: out of memory for the ids of %lld "
                         "characters", (long long)chars);
    const uint8_t *s = (const uint8_t *)text, *end = size > 0 ? s + size : s;
    for (int64_t i = 0; s < end; i++) {
        const uint8_t *at = s;
        uint32_t c = next_char(&s);
        if ((out[i] = vocab_id(v, c)) < 0) {
            char name[32];
            free(out);
            return dlrt_fail(err, DLRT_E_RANGE, "the text: %s at byte %lld (character %lld) is "
                             "not in the vocabulary of %d characters",
                             char_text(name, sizeof name, c), (long long)(at - (const uint8_t *)text),
                             (long long)i, (int)v->size);
        }
    }
    *ids = out;
    *n = chars;
    return DLRT_OK;
}

DlrtStatus dlrt_vocab_decode(const DlrtVocab *v, const int32_t *ids, int64_t n, char **text,
                             int64_t *size, DlrtError *err) {
    if (!text)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_vocab_decode: no place for the text");
    *text = NULL;
    if (size)
        *size = 0;
    if (!v || v->size < 1 || !v->chars || (!ids && n > 0) || n < 0)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_vocab_decode: a vocabulary and ids are needed");
    int64_t bytes = 0;
    char tmp[4];
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->size)
            return dlrt_fail(err, DLRT_E_RANGE, "id %d at position %lld is out of range for a "
                             "vocabulary of %d characters", (int)ids[i], (long long)i,
                             (int)v->size);
        bytes += utf8_encode(v->chars[ids[i]], tmp);
    }
    char *out = (uint64_t)bytes < SIZE_MAX ? malloc((size_t)bytes + 1) : NULL;
    if (!out)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for %lld bytes of text",
                         (long long)bytes);
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++)
        at += utf8_encode(v->chars[ids[i]], out + at);
    out[at] = '\0';
    *text = out;
    if (size)
        *size = at;
    return DLRT_OK;
}

DlrtMeta dlrt_vocab_meta(const DlrtVocab *v) {
    return (DlrtMeta){DLRT_VOCAB_KEY, v->utf8};
}

DlrtStatus dlrt_vocab_from_meta(DlrtVocab *v, const DlrtMeta *meta, int nmeta,
                                const char *source, DlrtError *err) {
    if (!v || nmeta < 0 || (nmeta > 0 && !meta))
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_vocab_from_meta: a vocabulary and metadata are "
                         "needed");
    memset(v, 0, sizeof *v);
    const char *src = source ? source : "the checkpoint";
    const char *value = NULL;
    for (int i = 0; i < nmeta; i++) {
        if (!meta[i].key || strcmp(meta[i].key, DLRT_VOCAB_KEY) != 0)
            continue;
        if (value)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s: the metadata key \"%s\" is given twice",
                             src, DLRT_VOCAB_KEY);
        value = meta[i].value ? meta[i].value : "";
    }
    if (!value)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s: no \"%s\" in the metadata: not a "
                         "character-level model's checkpoint", src, DLRT_VOCAB_KEY);
    char name[128];
    snprintf(name, sizeof name, "%s: the vocabulary", src);
    int64_t size = (int64_t)strlen(value), chars = 0;
    DlrtStatus st = utf8_check(name, (const uint8_t *)value, size, &chars, err);
    if (st != DLRT_OK)
        return st;
    if (chars == 0)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s is empty", name);
    /* at most one per code point, were they all ascending */
    if (chars > (int64_t)CODE_POINTS)
        return dlrt_fail(err, DLRT_E_FORMAT, "%s has %lld characters, more than Unicode has",
                         name, (long long)chars);
    uint32_t *cps = malloc((size_t)chars * sizeof *cps);
    if (!cps)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory for %lld characters", name,
                         (long long)chars);
    const uint8_t *s = (const uint8_t *)value;
    for (int64_t i = 0; i < chars; i++) {
        cps[i] = next_char(&s);
        if (i == 0 || cps[i] > cps[i - 1])
            continue;
        char a[32], b[32];
        char_text(a, sizeof a, cps[i]);
        char_text(b, sizeof b, cps[i - 1]);
        free(cps);
        if (strcmp(a, b) == 0)
            return dlrt_fail(err, DLRT_E_FORMAT, "%s holds %s twice (ids %lld and %lld)", name,
                             a, (long long)i - 1, (long long)i);
        return dlrt_fail(err, DLRT_E_FORMAT, "%s is not in ascending order of code point: %s "
                         "(id %lld) follows %s", name, a, (long long)i, b);
    }
    return vocab_init(v, cps, (int32_t)chars, err);
}

DlrtStatus dlrt_vocab_check(const DlrtVocab *checkpoint, const DlrtVocab *data, DlrtError *err) {
    if (!checkpoint || !data || !checkpoint->chars || !data->chars)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_vocab_check: two vocabularies are needed");
    const DlrtVocab *a = checkpoint, *b = data;
    int32_t common = a->size < b->size ? a->size : b->size, i = 0;
    while (i < common && a->chars[i] == b->chars[i])
        i++;
    if (i == common && a->size == b->size)
        return DLRT_OK;
    char ca[32] = "none", cb[32] = "none", what[96] = "";
    if (i < a->size)
        char_text(ca, sizeof ca, a->chars[i]);
    if (i < b->size)
        char_text(cb, sizeof cb, b->chars[i]);
    /* what the data holds that the checkpoint cannot encode */
    for (int32_t k = 0; k < b->size; k++)
        if (vocab_id(a, b->chars[k]) < 0) {
            char c[32];
            snprintf(what, sizeof what, "; the checkpoint lacks the data's %s",
                     char_text(c, sizeof c, b->chars[k]));
            break;
        }
    return dlrt_fail(err, DLRT_E_SHAPE, "the checkpoint's vocabulary is not the data's: %d "
                     "characters against %d; they differ first at id %d: %s in the checkpoint, "
                     "%s in the data%s", (int)a->size, (int)b->size, (int)i, ca, cb, what);
}

void dlrt_vocab_free(DlrtVocab *v) {
    if (!v)
        return;
    free(v->chars);
    free(v->utf8);
    memset(v, 0, sizeof *v);
}

/* ---- the datasets ------------------------------------------------------- */

/* count samples of steps ids from ids (x: each id, labels: the next) into
 * ds; count may be 0 (an empty validation set). */
static DlrtStatus make_samples(DlrtDataset *ds, const int32_t *ids, int64_t count,
                               int64_t steps, int32_t vocab_size, DlrtError *err) {
    int64_t n = count * steps;
    memset(ds, 0, sizeof *ds);
    if ((uint64_t)n > SIZE_MAX / sizeof(float))
        return dlrt_fail(err, DLRT_E_NOMEM, "%lld samples of %lld steps do not fit in memory",
                         (long long)count, (long long)steps);
    if (n > 0) {
        ds->x = malloc((size_t)n * sizeof *ds->x);
        ds->y = malloc((size_t)n * sizeof *ds->y);
        if (!ds->x || !ds->y) {
            dlrt_dataset_free(ds);
            return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for %lld samples of %lld steps",
                             (long long)count, (long long)steps);
        }
        for (int64_t i = 0; i < n; i++) {
            ds->x[i] = (float)ids[i];
            ds->y[i] = ids[i + 1];
        }
    }
    ds->count = count;
    ds->rank = 1;
    ds->dims[0] = steps;
    ds->sample_size = steps;
    ds->num_classes = vocab_size;
    ds->label_size = steps;
    return DLRT_OK;
}

DlrtStatus dlrt_text_dataset(DlrtDataset *train, DlrtDataset *val, const int32_t *ids, int64_t n,
                             int64_t steps, double val_fraction, int32_t vocab_size,
                             DlrtError *err) {
    if (!train || (!ids && n > 0) || n < 0)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_text_dataset: a dataset and ids are needed");
    memset(train, 0, sizeof *train);
    if (val)
        memset(val, 0, sizeof *val);
    if (steps < 1)
        return dlrt_fail(err, DLRT_E_ARG, "a sequence of %lld steps: it needs at least 1",
                         (long long)steps);
    if (!(val_fraction >= 0 && val_fraction < 1))
        return dlrt_fail(err, DLRT_E_ARG, "a validation fraction of %g: it must be at least 0 "
                         "and below 1", val_fraction);
    if (!val && val_fraction > 0)
        return dlrt_fail(err, DLRT_E_ARG, "a validation fraction of %g but no validation "
                         "dataset", val_fraction);
    if (vocab_size < 1 || vocab_size > MAX_FLOAT_ID)
        return dlrt_fail(err, DLRT_E_ARG, "a vocabulary of %d characters: ids as floats need "
                         "1 to 2^24 (%d)", (int)vocab_size, MAX_FLOAT_ID);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab_size)
            return dlrt_fail(err, DLRT_E_RANGE, "id %d at position %lld is out of range for a "
                             "vocabulary of %d characters", (int)ids[i], (long long)i,
                             (int)vocab_size);
    int64_t total = n > 0 ? (n - 1) / steps : 0;
    if (total < 1)
        return dlrt_fail(err, DLRT_E_SHAPE, "a text of %lld characters is too short for a "
                         "sequence of %lld steps, which takes %lld", (long long)n,
                         (long long)steps, (long long)steps + 1);
    int64_t nval = (int64_t)llround(val_fraction * (double)total), ntrain = total - nval;
    if (val_fraction > 0 && nval == 0)
        return dlrt_fail(err, DLRT_E_SHAPE, "a validation fraction of %g of %lld sequences of "
                         "%lld steps is less than one sequence", val_fraction,
                         (long long)total, (long long)steps);
    if (ntrain == 0)
        return dlrt_fail(err, DLRT_E_SHAPE, "a validation fraction of %g of %lld sequences of "
                         "%lld steps leaves none to train on", val_fraction, (long long)total,
                         (long long)steps);
    DlrtStatus st = make_samples(train, ids, ntrain, steps, vocab_size, err);
    if (st == DLRT_OK && val)
        st = make_samples(val, ids + ntrain * steps, nval, steps, vocab_size, err);
    if (st != DLRT_OK) {
        dlrt_dataset_free(train);
        if (val)
            dlrt_dataset_free(val);
    }
    return st;
}
