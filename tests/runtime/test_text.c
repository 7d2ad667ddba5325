/* test_text.c — tests of libdlrt's text for character-level language
 * models (text.c), and of what it added to datasets and batching
 * (label_size in data.c and batch.c).
 *
 * With no arguments it runs the unit tests: it writes small text files
 * (plain and gzip-compressed) and folders of them into a fresh temporary
 * folder, loads them, and checks every byte read and every error, by its
 * status and its whole message; then the vocabulary (encoding, decoding,
 * through a real safetensors file and back, comparison), the datasets'
 * arithmetic and the batcher with a label per step.  It prints
 * "N passed, N failed" last and exits 1 on any failure.
 *
 * With a mode it is a tool for the lit tests (tests/runtime/text_*.test),
 * which compare its output with Python's reading of the same files
 * (tests/runtime/Inputs/text_reference.py):
 *   test_text load PATH [STEPS FRACTION]  the text, its vocabulary and ids
 *                                         (and the datasets' sizes)
 *   test_text save-vocab PATH CHECKPOINT  PATH's vocabulary into a checkpoint
 *   test_text read-vocab CHECKPOINT       the vocabulary of a checkpoint
 *   test_text check-vocab CHECKPOINT PATH whether it is PATH's vocabulary
 * Checkpoints hold one tensor, "w" (F32, [2]).  An error prints
 * "error: STATUS: MESSAGE" on stderr and exits 1.
 */
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define HARNESS_FILE "test_text.c"
#include "harness.h"

/* The scratch folder, from mkdtemp, removed at the end. */
static char scratch_dir[512];

/* A path in the scratch folder; four rotating buffers. */
static const char *tpath(const char *name) {
    static char bufs[4][1024];
    static int next;
    char *p = bufs[next++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", scratch_dir, name);
    return p;
}

/* Writes n bytes to the scratch file name, gzip-compressed when gz. */
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
        fprintf(stderr, "test_text: cannot write %s\n", path);
        exit(2);
    }
}

static void write_text(const char *name, const char *text, bool gz) {
    write_file(name, text, strlen(text), gz);
}

static void make_dir(const char *name) {
    if (mkdir(tpath(name), 0777) != 0) {
        perror("test_text: mkdir");
        exit(2);
    }
}

static bool text_is_zeroed(const DlrtText *t) {
    return !t->data && t->size == 0 && t->chars == 0 && t->files == 0;
}

static bool dataset_is_zeroed(const DlrtDataset *ds) {
    return ds->count == 0 && ds->rank == 0 && !ds->x && !ds->y && ds->num_classes == 0 &&
           ds->sample_size == 0 && ds->label_size == 0;
}

/* A failure of status want whose message is exactly the printf-style
 * expectation. */
static bool check_exact_at(DlrtStatus st, const DlrtError *err, DlrtStatus want, int line,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static bool check_exact_at(DlrtStatus st, const DlrtError *err, DlrtStatus want, int line,
                           const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    bool ok = st == want && err->status == want && strcmp(err->message, text) == 0;
    if (!ok)
        fprintf(stderr, HARNESS_FILE ":%d: expected %s:\n  \"%s\"\ngot %s:\n  \"%s\"\n", line,
                dlrt_status_name(want), text, dlrt_status_name(st),
                st == DLRT_OK ? "" : err->message);
    return check_at(ok, "the expected error, word for word", line);
}
#define CHECK_EXACT(st, err, want, ...) check_exact_at((st), &(err), (want), __LINE__, __VA_ARGS__)

/* ======================================================================== */
/* Reading                                                                  */
/* ======================================================================== */

/* ASCII, Latin-1, the euro sign, an emoji (4 bytes), a CR LF and a tab. */
static const char sample[] = "h\xC3\xA9llo\r\nw\xC3\xB6rld \xE2\x82\xAC\t\xF0\x9F\x98\x80\n";
#define SAMPLE_CHARS 17

static void test_load_file(void) {
    for (int gz = 0; gz < 2; gz++) {
        write_text("sample.txt", sample, gz);
        DlrtText t;
        DlrtError err = {0};
        CHECK_OK(dlrt_load_text(&t, tpath("sample.txt"), 0, &err), err);
        CHECK(t.size == (int64_t)strlen(sample) && t.chars == SAMPLE_CHARS && t.files == 1);
        CHECK(t.data && memcmp(t.data, sample, sizeof sample) == 0); /* the NUL too */
        dlrt_text_free(&t);
        CHECK(text_is_zeroed(&t));
        dlrt_text_free(&t); /* twice is harmless */
    }
    /* a byte order mark and a lone CR are kept as they are */
    write_text("bom.txt", "\xEF\xBB\xBFx\ry", false);
    DlrtText t;
    DlrtError err = {0};
    CHECK_OK(dlrt_load_text(&t, tpath("bom.txt"), 0, &err), err);
    CHECK(t.size == 6 && t.chars == 4 && strcmp(t.data, "\xEF\xBB\xBFx\ry") == 0);
    dlrt_text_free(&t);
    /* every kind of character at its limits: U+0001, U+007F, U+0080,
       U+07FF, U+0800, U+D7FF, U+E000, U+FFFF, U+10000, U+10FFFF */
    const char edges[] = "\x01\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80"
                         "\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF";
    write_text("edges.txt", edges, true);
    CHECK_OK(dlrt_load_text(&t, tpath("edges.txt"), 0, &err), err);
    CHECK(t.chars == 10 && t.size == (int64_t)strlen(edges));
    dlrt_text_free(&t);
}

/* A folder as fortunes lays it out: NAME, NAME.dat, NAME.u8 -> NAME. */
static void test_load_folder(void) {
    make_dir("f");
    write_text("f/b", "second\n", false);
    write_text("f/B", "first ", false);           /* 'B' < 'b' in byte order */
    write_file("f/b.dat", "\0\0\0\2index", 10, false); /* strfile's index of b */
    write_text("f/c.gz", "th\xC3\xAErd", true);    /* compressed */
    write_text("f/\xC3\xA9", "!", false);          /* é: after every ASCII name */
    write_file("f/.hidden", "\0binary", 7, false);
    if (symlink("b", tpath("f/b.u8")) != 0 || symlink("nowhere", tpath("f/dangling")) != 0) {
        perror("test_text: symlink");
        exit(2);
    }
    make_dir("f/sub");
    write_text("f/sub/deeper", "not read", false);
    DlrtText t;
    DlrtError err = {0};
    CHECK_OK(dlrt_load_text(&t, tpath("f"), 0, &err), err);
    CHECK(t.data && strcmp(t.data, "first second\nth\xC3\xAErd!") == 0);
    CHECK(t.files == 4 && t.chars == 19 && t.size == 20);
    dlrt_text_free(&t);
    /* a .dat file beside no NAME is read, and here it is binary */
    write_file("f/z.dat", "\0\0\0\2", 4, false);
    CHECK_EXACT(dlrt_load_text(&t, tpath("f"), 0, &err), err, DLRT_E_FORMAT,
                "%s: a NUL byte at byte 0: binary data, not text", tpath("f/z.dat"));
    CHECK(text_is_zeroed(&t));
    /* so is a text file named so */
    write_text("f/z.dat", "words", false);
    CHECK_OK(dlrt_load_text(&t, tpath("f"), 0, &err), err);
    CHECK(t.files == 5 && t.data && strcmp(t.data, "first second\nth\xC3\xAErdwords!") == 0);
    dlrt_text_free(&t);
}

/* The limit on the bytes of text. */
static void test_load_limit(void) {
    DlrtText t;
    DlrtError err = {0};
    write_text("ten.txt", "0123456789", false);
    write_text("ten.gz", "0123456789", true);
    for (int gz = 0; gz < 2; gz++) {
        const char *name = gz ? "ten.gz" : "ten.txt";
        CHECK_OK(dlrt_load_text(&t, tpath(name), 10, &err), err);
        CHECK(t.size == 10);
        dlrt_text_free(&t);
        CHECK_EXACT(dlrt_load_text(&t, tpath(name), 9, &err), err, DLRT_E_RANGE,
                    "%s: more than 9 bytes of text, the limit", tpath(name));
        CHECK(text_is_zeroed(&t));
    }
    /* a folder's limit is on all its files together */
    make_dir("two");
    write_text("two/a", "abcdef", false);
    write_text("two/b", "ghijkl", true);
    CHECK_OK(dlrt_load_text(&t, tpath("two"), 12, &err), err);
    dlrt_text_free(&t);
    CHECK_EXACT(dlrt_load_text(&t, tpath("two"), 11, &err), err, DLRT_E_RANGE,
                "%s: the files of %s hold more than 11 bytes of text, the limit", tpath("two/b"),
                tpath("two"));
    write_text("two/b", "ghijkl", false);
    CHECK_EXACT(dlrt_load_text(&t, tpath("two"), 11, &err), err, DLRT_E_RANGE,
                "%s: the files of %s hold more than 11 bytes of text, the limit", tpath("two/b"),
                tpath("two"));
    /* the default, 1 GiB: a sparse file one byte larger fails before it
       is read */
    FILE *f = fopen(tpath("huge"), "wb");
    bool made = f && ftruncate(fileno(f), DLRT_TEXT_MAX_BYTES + 1) == 0;
    if (f)
        fclose(f);
    if (CHECK(made))
        CHECK_EXACT(dlrt_load_text(&t, tpath("huge"), 0, &err), err, DLRT_E_RANGE,
                    "%s: more than 1073741824 bytes of text, the limit", tpath("huge"));
    remove(tpath("huge"));
    CHECK_EXACT(dlrt_load_text(&t, tpath("ten.txt"), -1, &err), err, DLRT_E_ARG,
                "%s: a limit of -1 bytes of text is out of range", tpath("ten.txt"));
}

/* Loads the scratch file name, made of n bytes (gzip-compressed when gz),
 * and expects a DLRT_E_FORMAT whose message is the path and then tail. */
static void expect_bytes_error(const char *bytes, size_t n, bool gz, const char *tail,
                               int line) {
    write_file("bad", bytes, n, gz);
    DlrtText t = {.size = 99};
    DlrtError err = {0};
    DlrtStatus st = dlrt_load_text(&t, tpath("bad"), 0, &err);
    check_exact_at(st, &err, DLRT_E_FORMAT, line, "%s: %s", tpath("bad"), tail);
    check_at(text_is_zeroed(&t), "the text is left zeroed", line);
}
#define EXPECT_BYTES_ERROR(bytes, gz, tail) \
    expect_bytes_error((bytes), sizeof(bytes) - 1, (gz), (tail), __LINE__)

static void test_load_errors(void) {
    DlrtText t;
    DlrtError err = {0};
    CHECK_EXACT(dlrt_load_text(&t, tpath("nope"), 0, &err), err, DLRT_E_IO,
                "%s: cannot open: No such file or directory", tpath("nope"));
    CHECK(text_is_zeroed(&t));
    CHECK_EXACT(dlrt_load_text(&t, "/dev/null", 0, &err), err, DLRT_E_IO,
                "/dev/null: not a file or a folder");
    CHECK(dlrt_load_text(NULL, "x", 0, &err) == DLRT_E_ARG);
    CHECK(dlrt_load_text(&t, NULL, 0, &err) == DLRT_E_ARG);

    /* no text */
    for (int gz = 0; gz < 2; gz++)
        EXPECT_BYTES_ERROR("", gz, "no text: the file is empty");
    make_dir("none");
    CHECK_EXACT(dlrt_load_text(&t, tpath("none"), 0, &err), err, DLRT_E_FORMAT,
                "%s: no text: the folder holds no files to read", tpath("none"));
    write_text("none/.dot", "hidden", false);
    make_dir("none/sub");
    if (symlink("../sample.txt", tpath("none/link")) != 0)
        exit(2);
    CHECK_EXACT(dlrt_load_text(&t, tpath("none"), 0, &err), err, DLRT_E_FORMAT,
                "%s: no text: the folder holds no files to read", tpath("none"));
    write_text("none/a", "", false);
    CHECK_EXACT(dlrt_load_text(&t, tpath("none"), 0, &err), err, DLRT_E_FORMAT,
                "%s: no text: its one file is empty", tpath("none"));
    write_text("none/b", "", true);
    CHECK_EXACT(dlrt_load_text(&t, tpath("none"), 0, &err), err, DLRT_E_FORMAT,
                "%s: no text: its files are empty", tpath("none"));
    CHECK(text_is_zeroed(&t));

    /* binary data */
    for (int gz = 0; gz < 2; gz++)
        EXPECT_BYTES_ERROR("abc\0def", gz, "a NUL byte at byte 3: binary data, not text");
    /* a gzip header, then a deflate block of the reserved type 3 */
    EXPECT_BYTES_ERROR("\x1F\x8B\x08\x00\x00\x00\x00\x00\x00\x03\x07", false,
                       "bad gzip data: invalid block type");
    /* a gzip stream cut short */
    {
        write_text("whole.gz", "a text long enough to compress into a few dozen bytes", true);
        FILE *f = fopen(tpath("whole.gz"), "rb");
        char buf[256];
        size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
        if (f)
            fclose(f);
        write_file("bad", buf, n < 10 ? n : 10, false); /* the header alone */
        CHECK_EXACT(dlrt_load_text(&t, tpath("bad"), 0, &err), err, DLRT_E_FORMAT,
                    "%s: bad gzip data: the stream is cut short after 0 bytes", tpath("bad"));
    }

    /* not UTF-8: each kind, plain and compressed (the offset is in the
       inflated text) */
    for (int gz = 0; gz < 2; gz++) {
        EXPECT_BYTES_ERROR("ab\x80", gz, "not UTF-8 at byte 2: byte 0x80 cannot start a character");
        EXPECT_BYTES_ERROR("\xBF", gz, "not UTF-8 at byte 0: byte 0xBF cannot start a character");
        EXPECT_BYTES_ERROR("x\xFF", gz, "not UTF-8 at byte 1: byte 0xFF cannot start a character");
        EXPECT_BYTES_ERROR("x\xF8\x88\x80\x80\x80", gz,
                           "not UTF-8 at byte 1: byte 0xF8 cannot start a character");
        EXPECT_BYTES_ERROR("\xC3\xA9\xE2\x41", gz, "not UTF-8 at byte 2: an invalid sequence "
                           "(0xE2 0x41): 0xE2 begins a 3-byte character");
        EXPECT_BYTES_ERROR("\xE2\x82\xC3\xA9", gz, "not UTF-8 at byte 0: an invalid sequence "
                           "(0xE2 0x82 0xC3): 0xE2 begins a 3-byte character");
        EXPECT_BYTES_ERROR("\xC3 ", gz, "not UTF-8 at byte 0: an invalid sequence (0xC3 0x20): "
                           "0xC3 begins a 2-byte character");
        /* overlong: '/' in two, three and four bytes; U+07FF in three */
        EXPECT_BYTES_ERROR("a\xC0\xAF", gz,
                           "not UTF-8 at byte 1: an overlong encoding of U+002F (0xC0 0xAF)");
        EXPECT_BYTES_ERROR("a\xC1\xBF", gz,
                           "not UTF-8 at byte 1: an overlong encoding of U+007F (0xC1 0xBF)");
        EXPECT_BYTES_ERROR("\xE0\x80\xAF", gz, "not UTF-8 at byte 0: an overlong encoding of "
                           "U+002F (0xE0 0x80 0xAF)");
        EXPECT_BYTES_ERROR("\xE0\x9F\xBF", gz, "not UTF-8 at byte 0: an overlong encoding of "
                           "U+07FF (0xE0 0x9F 0xBF)");
        EXPECT_BYTES_ERROR("\xF0\x8F\xBF\xBF", gz, "not UTF-8 at byte 0: an overlong encoding "
                           "of U+FFFF (0xF0 0x8F 0xBF 0xBF)");
        /* surrogates, high and low */
        EXPECT_BYTES_ERROR("ok \xED\xA0\x80", gz, "not UTF-8 at byte 3: the surrogate U+D800 "
                           "(0xED 0xA0 0x80), which UTF-8 excludes");
        EXPECT_BYTES_ERROR("\xED\xBF\xBF", gz, "not UTF-8 at byte 0: the surrogate U+DFFF "
                           "(0xED 0xBF 0xBF), which UTF-8 excludes");
        /* beyond U+10FFFF */
        EXPECT_BYTES_ERROR("\xF4\x90\x80\x80", gz, "not UTF-8 at byte 0: U+110000 (0xF4 0x90 "
                           "0x80 0x80) is beyond U+10FFFF");
        EXPECT_BYTES_ERROR("\xF7\xBF\xBF\xBF", gz, "not UTF-8 at byte 0: U+1FFFFF (0xF7 0xBF "
                           "0xBF 0xBF) is beyond U+10FFFF");
        /* cut short by the end */
        EXPECT_BYTES_ERROR("ok\xE2\x82", gz, "not UTF-8 at byte 2: the data ends inside a "
                           "3-byte character (0xE2 0x82)");
        EXPECT_BYTES_ERROR("ok\xF0", gz, "not UTF-8 at byte 2: the data ends inside a 4-byte "
                           "character (0xF0)");
        EXPECT_BYTES_ERROR("\xC3", gz, "not UTF-8 at byte 0: the data ends inside a 2-byte "
                           "character (0xC3)");
    }
    /* Latin-1, the likeliest mistake */
    EXPECT_BYTES_ERROR("caf\xE9\n", false, "not UTF-8 at byte 3: an invalid sequence (0xE9 "
                       "0x0A): 0xE9 begins a 3-byte character");
    /* in a folder: the file that is wrong, and the offset in it; a
       character may not run from one file into the next */
    make_dir("split");
    write_text("split/a", "fine \xE2\x82", false);
    write_text("split/b", "\xAC euro", false);
    CHECK_EXACT(dlrt_load_text(&t, tpath("split"), 0, &err), err, DLRT_E_FORMAT,
                "%s: not UTF-8 at byte 5: the data ends inside a 3-byte character (0xE2 0x82)",
                tpath("split/a"));
    write_text("split/a", "fine ", false);
    CHECK_EXACT(dlrt_load_text(&t, tpath("split"), 0, &err), err, DLRT_E_FORMAT,
                "%s: not UTF-8 at byte 0: byte 0xAC cannot start a character", tpath("split/b"));
    CHECK(text_is_zeroed(&t));
    /* a file that cannot be read */
    if (getuid() != 0) {
        write_text("secret", "text", false);
        chmod(tpath("secret"), 0);
        CHECK_EXACT(dlrt_load_text(&t, tpath("secret"), 0, &err), err, DLRT_E_IO,
                    "%s: cannot open: Permission denied", tpath("secret"));
    }
}

/* ======================================================================== */
/* The vocabulary                                                           */
/* ======================================================================== */

/* c in UTF-8 at out, by the book (RFC 3629's table); returns its length. */
static int put_char(char *out, uint32_t c) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    int len = c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (int i = len - 1; i > 0; i--, c >>= 6)
        out[i] = (char)(0x80 | (c & 0x3F));
    out[0] = (char)(lead[len] | c);
    return len;
}

static void test_vocab(void) {
    DlrtVocab v;
    DlrtError err = {0};
    CHECK_OK(dlrt_vocab_build(&v, sample, (int64_t)strlen(sample), &err), err);
    /* \t \n \r ' ' d h l o r w é ö € 😀 */
    const uint32_t want[] = {0x09, 0x0A, 0x0D, 0x20, 'd', 'h', 'l', 'o', 'r', 'w',
                             0xE9, 0xF6, 0x20AC, 0x1F600};
    CHECK(v.size == 14 && memcmp(v.chars, want, sizeof want) == 0);
    CHECK(strcmp(v.utf8, "\t\n\r dhlorw\xC3\xA9\xC3\xB6\xE2\x82\xAC\xF0\x9F\x98\x80") == 0);
    CHECK(v.latin1['h'] == 5 && v.latin1[0xE9] == 10 && v.latin1['z'] == -1 && v.latin1[0] == -1);

    /* encode and decode are inverses */
    int32_t *ids = NULL;
    int64_t n = 0;
    CHECK_OK(dlrt_vocab_encode(&v, sample, (int64_t)strlen(sample), &ids, &n, &err), err);
    const int32_t want_ids[SAMPLE_CHARS] = {5, 10, 6, 6, 7, 2, 1, 9, 11, 8,
                                            6, 4, 3, 12, 0, 13, 1};
    CHECK(n == SAMPLE_CHARS && ids && memcmp(ids, want_ids, sizeof want_ids) == 0);
    char *back = NULL;
    int64_t size = 0;
    CHECK_OK(dlrt_vocab_decode(&v, ids, n, &back, &size, &err), err);
    CHECK(back && size == (int64_t)strlen(sample) && strcmp(back, sample) == 0);
    free(back);
    free(ids);
    /* every id, decoded and encoded again */
    int32_t all[14];
    for (int i = 0; i < 14; i++)
        all[i] = i;
    CHECK_OK(dlrt_vocab_decode(&v, all, 14, &back, NULL, &err), err);
    CHECK(back && strcmp(back, v.utf8) == 0);
    CHECK_OK(dlrt_vocab_encode(&v, back, (int64_t)strlen(back), &ids, &n, &err), err);
    CHECK(n == 14 && memcmp(ids, all, sizeof all) == 0);
    free(ids);
    free(back);
    /* nothing gives nothing */
    CHECK_OK(dlrt_vocab_encode(&v, "", 0, &ids, &n, &err), err);
    CHECK(n == 0 && ids);
    free(ids);
    CHECK_OK(dlrt_vocab_decode(&v, NULL, 0, &back, &size, &err), err);
    CHECK(back && back[0] == '\0' && size == 0);
    free(back);

    /* a character not in the vocabulary: printable, and not */
    CHECK_EXACT(dlrt_vocab_encode(&v, "hold, world", 11, &ids, &n, &err), err, DLRT_E_RANGE,
                "the text: U+002C ',' at byte 4 (character 4) is not in the vocabulary of 14 "
                "characters");
    CHECK(!ids && n == 0);
    CHECK_EXACT(dlrt_vocab_encode(&v, "h\xC3\xA9\xC3\xA8", 5, &ids, &n, &err), err, DLRT_E_RANGE,
                "the text: U+00E8 '\xC3\xA8' at byte 3 (character 2) is not in the vocabulary "
                "of 14 characters");
    CHECK_EXACT(dlrt_vocab_encode(&v, "\xF0\x9F\x98\x80\xF0\x9F\x98\x81", 8, &ids, &n, &err), err,
                DLRT_E_RANGE, "the text: U+1F601 '\xF0\x9F\x98\x81' at byte 4 (character 1) is "
                "not in the vocabulary of 14 characters");
    CHECK_EXACT(dlrt_vocab_encode(&v, "ho\x01", 3, &ids, &n, &err), err, DLRT_E_RANGE,
                "the text: U+0001 at byte 2 (character 2) is not in the vocabulary of 14 "
                "characters");
    CHECK_EXACT(dlrt_vocab_encode(&v, "h\xE2\x80\xA8", 4, &ids, &n, &err), err, DLRT_E_RANGE,
                "the text: U+2028 at byte 1 (character 1) is not in the vocabulary of 14 "
                "characters");
    CHECK_EXACT(dlrt_vocab_encode(&v, "h\xC2\x85", 3, &ids, &n, &err), err, DLRT_E_RANGE,
                "the text: U+0085 at byte 1 (character 1) is not in the vocabulary of 14 "
                "characters");
    CHECK_EXACT(dlrt_vocab_encode(&v, "ho\xC0\xAF", 4, &ids, &n, &err), err, DLRT_E_FORMAT,
                "the text: not UTF-8 at byte 2: an overlong encoding of U+002F (0xC0 0xAF)");
    CHECK_EXACT(dlrt_vocab_encode(&v, "he\0", 3, &ids, &n, &err), err, DLRT_E_FORMAT,
                "the text: a NUL byte at byte 2: binary data, not text");
    CHECK(dlrt_vocab_encode(&v, "h", 1, NULL, &n, &err) == DLRT_E_ARG);

    /* ids out of range */
    const int32_t bad[] = {0, 13, 14};
    CHECK_EXACT(dlrt_vocab_decode(&v, bad, 3, &back, &size, &err), err, DLRT_E_RANGE,
                "id 14 at position 2 is out of range for a vocabulary of 14 characters");
    CHECK(!back && size == 0);
    const int32_t neg[] = {-1};
    CHECK_EXACT(dlrt_vocab_decode(&v, neg, 1, &back, &size, &err), err, DLRT_E_RANGE,
                "id -1 at position 0 is out of range for a vocabulary of 14 characters");
    dlrt_vocab_free(&v);
    CHECK(v.size == 0 && !v.chars && !v.utf8);
    dlrt_vocab_free(&v);

    /* text a vocabulary cannot come from */
    CHECK_EXACT(dlrt_vocab_build(&v, "", 0, &err), err, DLRT_E_FORMAT,
                "the text is empty: a vocabulary needs characters");
    CHECK_EXACT(dlrt_vocab_build(&v, "abc\xED\xA0\x80", 6, &err), err, DLRT_E_FORMAT,
                "the text: not UTF-8 at byte 3: the surrogate U+D800 (0xED 0xA0 0x80), which "
                "UTF-8 excludes");
    CHECK(v.size == 0 && !v.chars && !v.utf8);

    /* the whole range: one of every kind of character, and a vocabulary
       above 256 characters (the look-up beyond the Latin-1 table) */
    char *big = malloc(4 * 2000 + 1);
    int64_t at = 0;
    for (uint32_t c = 1; big && c < 0x110000; c += c < 0x300 ? 1 : 977) {
        if (c >= 0xD800 && c <= 0xDFFF)
            continue;
        char tmp[4];
        int len = put_char(tmp, c);
        /* backwards, so that building must sort */
        memmove(big + len, big, (size_t)at);
        memcpy(big, tmp, (size_t)len);
        at += len;
    }
    CHECK_OK(dlrt_vocab_build(&v, big, at, &err), err);
    bool ascending = v.size > 1000;
    for (int32_t i = 1; ascending && i < v.size; i++)
        ascending = v.chars[i] > v.chars[i - 1];
    CHECK(ascending && v.chars[0] == 1 && (int64_t)strlen(v.utf8) == at);
    CHECK_OK(dlrt_vocab_encode(&v, big, at, &ids, &n, &err), err);
    bool reversed = n == v.size;
    for (int64_t i = 0; reversed && i < n; i++)
        reversed = ids[i] == v.size - 1 - i;
    CHECK(reversed);
    CHECK_OK(dlrt_vocab_decode(&v, ids, n, &back, &size, &err), err);
    CHECK(size == at && memcmp(back, big, (size_t)at) == 0);
    free(back);
    free(ids);
    free(big);
    dlrt_vocab_free(&v);
}

/* The vocabulary of a text, for the tests below; exits if it fails. */
static DlrtVocab vocab_of(const char *text) {
    DlrtVocab v;
    if (dlrt_vocab_build(&v, text, (int64_t)strlen(text), NULL) != DLRT_OK)
        exit(2);
    return v;
}

/* Reads the vocabulary from one metadata value and expects a
 * DLRT_E_FORMAT with message "ckpt: " tail. */
static void expect_meta_error(const char *value, const char *tail, int line) {
    DlrtMeta meta[] = {{"network", "charlm"}, {"vocabulary", (char *)value}};
    DlrtVocab v = {.size = 7};
    DlrtError err = {0};
    DlrtStatus st = dlrt_vocab_from_meta(&v, meta, 2, "ckpt", &err);
    check_exact_at(st, &err, DLRT_E_FORMAT, line, "ckpt: %s", tail);
    check_at(v.size == 0 && !v.chars && !v.utf8, "the vocabulary is left zeroed", line);
}

static void test_vocab_meta(void) {
    DlrtVocab v = vocab_of(sample), back;
    DlrtError err = {0};
    DlrtMeta m = dlrt_vocab_meta(&v);
    CHECK(strcmp(m.key, "vocabulary") == 0 && strcmp(m.key, DLRT_VOCAB_KEY) == 0 &&
          m.value == v.utf8);
    DlrtMeta meta[] = {{"network", "charlm"}, m, {"epoch", "3"}};
    CHECK_OK(dlrt_vocab_from_meta(&back, meta, 3, "ckpt", &err), err);
    CHECK(back.size == v.size && memcmp(back.chars, v.chars, 14 * sizeof *v.chars) == 0 &&
          strcmp(back.utf8, v.utf8) == 0 && memcmp(back.latin1, v.latin1, sizeof v.latin1) == 0);
    CHECK_OK(dlrt_vocab_check(&back, &v, &err), err);
    dlrt_vocab_free(&back);

    CHECK_EXACT(dlrt_vocab_from_meta(&back, meta, 1, "ckpt", &err), err, DLRT_E_FORMAT,
                "ckpt: no \"vocabulary\" in the metadata: not a character-level model's "
                "checkpoint");
    CHECK_EXACT(dlrt_vocab_from_meta(&back, NULL, 0, NULL, &err), err, DLRT_E_FORMAT,
                "the checkpoint: no \"vocabulary\" in the metadata: not a character-level "
                "model's checkpoint");
    DlrtMeta twice[] = {m, {"x", "y"}, m};
    CHECK_EXACT(dlrt_vocab_from_meta(&back, twice, 3, "ckpt", &err), err, DLRT_E_FORMAT,
                "ckpt: the metadata key \"vocabulary\" is given twice");
    expect_meta_error("", "the vocabulary is empty", __LINE__);
    expect_meta_error("abca", "the vocabulary is not in ascending order of code point: "
                      "U+0061 'a' (id 3) follows U+0063 'c'", __LINE__);
    expect_meta_error("ab\xC3\xA9\xC3\xA9", "the vocabulary holds U+00E9 '\xC3\xA9' twice "
                      "(ids 2 and 3)", __LINE__);
    expect_meta_error("\n\n", "the vocabulary holds U+000A twice (ids 0 and 1)", __LINE__);
    expect_meta_error("ab\xC0\xAF", "the vocabulary: not UTF-8 at byte 2: an overlong encoding "
                      "of U+002F (0xC0 0xAF)", __LINE__);
    expect_meta_error("a\xED\xB0\x80", "the vocabulary: not UTF-8 at byte 1: the surrogate "
                      "U+DC00 (0xED 0xB0 0x80), which UTF-8 excludes", __LINE__);
    expect_meta_error("a\xF0\x9F", "the vocabulary: not UTF-8 at byte 1: the data ends inside "
                      "a 4-byte character (0xF0 0x9F)", __LINE__);
    CHECK(dlrt_vocab_from_meta(NULL, meta, 3, "ckpt", &err) == DLRT_E_ARG);
    dlrt_vocab_free(&v);
}

/* Through a real checkpoint: every character JSON must escape, and more. */
static void test_vocab_checkpoint(void) {
    const char text[] = "say \"hi\"\\ \x01\x1F\t\n\r\x7F/ caf\xC3\xA9 \xE2\x80\xA8\xE2\x80\xA9 "
                        "\xEF\xBB\xBF \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF";
    DlrtVocab v = vocab_of(text), back;
    DlrtError err = {0};
    float w[2] = {1.5f, -2.0f}, w2[2] = {0, 0};
    DlrtTensor t = {.name = "w", .dtype = DLRT_F32, .rank = 1, .dims = {2}, .data = w};
    DlrtMeta meta[] = {{"network", "charlm"}, dlrt_vocab_meta(&v), {"step", "12"}};
    CHECK_OK(dlrt_save_safetensors(tpath("lm.safetensors"), &t, 1, meta, 3, &err), err);
    DlrtMeta *got = NULL;
    int ngot = 0;
    t.data = w2;
    CHECK_OK(dlrt_load_safetensors(tpath("lm.safetensors"), &t, 1, &got, &ngot, &err), err);
    CHECK(ngot == 3 && w2[0] == 1.5f && w2[1] == -2.0f);
    CHECK_OK(dlrt_vocab_from_meta(&back, got, ngot, tpath("lm.safetensors"), &err), err);
    CHECK(back.size == v.size && back.size == 23 && strcmp(back.utf8, v.utf8) == 0);
    CHECK_OK(dlrt_vocab_check(&back, &v, &err), err);
    /* the ids mean the same characters */
    int32_t *a = NULL, *b = NULL;
    int64_t na = 0, nb = 0;
    CHECK_OK(dlrt_vocab_encode(&v, text, (int64_t)strlen(text), &a, &na, &err), err);
    CHECK_OK(dlrt_vocab_encode(&back, text, (int64_t)strlen(text), &b, &nb, &err), err);
    CHECK(na == nb && na > 0 && memcmp(a, b, (size_t)na * sizeof *a) == 0);
    free(a);
    free(b);
    dlrt_meta_free(got, ngot);
    dlrt_vocab_free(&back);
    /* a checkpoint without one */
    CHECK_OK(dlrt_save_safetensors(tpath("plain.safetensors"), &t, 1, meta, 1, &err), err);
    CHECK_OK(dlrt_load_safetensors(tpath("plain.safetensors"), &t, 1, &got, &ngot, &err), err);
    CHECK_EXACT(dlrt_vocab_from_meta(&back, got, ngot, tpath("plain.safetensors"), &err), err,
                DLRT_E_FORMAT, "%s: no \"vocabulary\" in the metadata: not a character-level "
                "model's checkpoint", tpath("plain.safetensors"));
    dlrt_meta_free(got, ngot);
    dlrt_vocab_free(&v);
}

static void test_vocab_check(void) {
    DlrtVocab abc = vocab_of("abc"), abcd = vocab_of("abcd"), abd = vocab_of("abd"),
              abe = vocab_of("ab\xC3\xA9"), bcd = vocab_of("bcd"), nl = vocab_of("ab\n");
    DlrtError err = {0};
    CHECK_OK(dlrt_vocab_check(&abc, &abc, &err), err);
    CHECK_EXACT(dlrt_vocab_check(&abc, &abcd, &err), err, DLRT_E_SHAPE,
                "the checkpoint's vocabulary is not the data's: 3 characters against 4; they "
                "differ first at id 3: none in the checkpoint, U+0064 'd' in the data; the "
                "checkpoint lacks the data's U+0064 'd'");
    CHECK_EXACT(dlrt_vocab_check(&abcd, &abc, &err), err, DLRT_E_SHAPE,
                "the checkpoint's vocabulary is not the data's: 4 characters against 3; they "
                "differ first at id 3: U+0064 'd' in the checkpoint, none in the data");
    CHECK_EXACT(dlrt_vocab_check(&abc, &abd, &err), err, DLRT_E_SHAPE,
                "the checkpoint's vocabulary is not the data's: 3 characters against 3; they "
                "differ first at id 2: U+0063 'c' in the checkpoint, U+0064 'd' in the data; "
                "the checkpoint lacks the data's U+0064 'd'");
    CHECK_EXACT(dlrt_vocab_check(&abc, &abe, &err), err, DLRT_E_SHAPE,
                "the checkpoint's vocabulary is not the data's: 3 characters against 3; they "
                "differ first at id 2: U+0063 'c' in the checkpoint, U+00E9 '\xC3\xA9' in the "
                "data; the checkpoint lacks the data's U+00E9 '\xC3\xA9'");
    /* the data lacks one the checkpoint has: encodable, but ids shift */
    CHECK_EXACT(dlrt_vocab_check(&abcd, &bcd, &err), err, DLRT_E_SHAPE,
                "the checkpoint's vocabulary is not the data's: 4 characters against 3; they "
                "differ first at id 0: U+0061 'a' in the checkpoint, U+0062 'b' in the data");
    CHECK_EXACT(dlrt_vocab_check(&abc, &nl, &err), err, DLRT_E_SHAPE,
                "the checkpoint's vocabulary is not the data's: 3 characters against 3; they "
                "differ first at id 0: U+0061 'a' in the checkpoint, U+000A in the data; the "
                "checkpoint lacks the data's U+000A");
    DlrtVocab zero = {0};
    CHECK(dlrt_vocab_check(&abc, &zero, &err) == DLRT_E_ARG);
    DlrtVocab *all[] = {&abc, &abcd, &abd, &abe, &bcd, &nl};
    for (int i = 0; i < 6; i++)
        dlrt_vocab_free(all[i]);
}

/* ======================================================================== */
/* The datasets                                                             */
/* ======================================================================== */

/* ids 0, 1, ..., n-1 modulo v. */
static int32_t *ramp(int64_t n, int32_t v) {
    int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    if (!ids)
        exit(2);
    for (int64_t i = 0; i < n; i++)
        ids[i] = (int32_t)(i % v);
    return ids;
}

/* Whether ds holds count samples of steps from ids starting at ids[from]. */
static bool holds(const DlrtDataset *ds, const int32_t *ids, int64_t from, int64_t count,
                  int64_t steps, int32_t v) {
    bool ok = ds->count == count && ds->rank == 1 && ds->dims[0] == steps &&
              ds->sample_size == steps && ds->label_size == steps && ds->num_classes == v &&
              (count == 0 || (ds->x && ds->y));
    for (int64_t i = 0; ok && i < count * steps; i++)
        ok = ds->x[i] == (float)ids[from + i] && ds->y[i] == ids[from + i + 1];
    return ok;
}

static void test_dataset(void) {
    DlrtDataset train, val;
    DlrtError err = {0};
    int32_t *ids = ramp(100, 1000);
    /* 11 ids in samples of 3: (11 - 1) / 3 = 3 samples, id 10 only a label
       of none, since the last sample's labels end at id 9 */
    CHECK_OK(dlrt_text_dataset(&train, &val, ids, 11, 3, 0, 1000, &err), err);
    CHECK(holds(&train, ids, 0, 3, 3, 1000) && holds(&val, ids, 9, 0, 3, 1000));
    CHECK(train.y[8] == 9 && train.x[8] == 8.0f);
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&val);
    CHECK(dataset_is_zeroed(&train) && dataset_is_zeroed(&val));
    CHECK_OK(dlrt_text_dataset(&train, NULL, ids, 11, 3, 0, 1000, &err), err);
    CHECK(holds(&train, ids, 0, 3, 3, 1000));
    dlrt_dataset_free(&train);
    /* 10 ids make 3 samples too: the last label is id 9 */
    CHECK_OK(dlrt_text_dataset(&train, NULL, ids, 10, 3, 0, 1000, &err), err);
    CHECK(holds(&train, ids, 0, 3, 3, 1000));
    dlrt_dataset_free(&train);
    /* a split: 100 ids, 9 steps: 11 samples; 0.2 of 11 is 2.2, so 2 */
    CHECK_OK(dlrt_text_dataset(&train, &val, ids, 100, 9, 0.2, 1000, &err), err);
    CHECK(holds(&train, ids, 0, 9, 9, 1000) && holds(&val, ids, 81, 2, 9, 1000));
    /* inputs and labels apart: training labels are ids 1..81, validation
       labels 82..99; the only id in both is 81, the last training label
       and the first validation input */
    CHECK(train.y[train.count * 9 - 1] == 81 && val.x[0] == 81.0f && val.y[0] == 82);
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&val);
    /* rounding to the nearest sample: 0.25 of 11 is 2.75, so 3 */
    CHECK_OK(dlrt_text_dataset(&train, &val, ids, 100, 9, 0.25, 1000, &err), err);
    CHECK(holds(&train, ids, 0, 8, 9, 1000) && holds(&val, ids, 72, 3, 9, 1000));
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&val);
    /* steps of 1: every id but the last is a sample */
    CHECK_OK(dlrt_text_dataset(&train, &val, ids, 5, 1, 0.5, 1000, &err), err);
    CHECK(holds(&train, ids, 0, 2, 1, 1000) && holds(&val, ids, 2, 2, 1, 1000));
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&val);
    /* the datasets pass the check a network makes */
    CHECK_OK(dlrt_text_dataset(&train, &val, ids, 100, 9, 0.2, 1000, &err), err);
    CHECK_OK(dlrt_dataset_check(&train, 1, (const int64_t[]){9}, 1000, &err), err);
    CHECK_OK(dlrt_dataset_check(&val, 1, (const int64_t[]){9}, 1000, &err), err);
    CHECK(dlrt_dataset_label_size(&train) == 9);
    CHECK_EXACT(dlrt_dataset_check(&train, 1, (const int64_t[]){9}, 50, &err), err, DLRT_E_RANGE,
                "label 50 at sample 5, step 4 is out of range for 50 classes");
    CHECK_EXACT(dlrt_dataset_check(&train, 1, (const int64_t[]){8}, 1000, &err), err,
                DLRT_E_SHAPE, "sample 0 has shape [9] but the network takes [8]");
    train.label_size = 3;
    CHECK_EXACT(dlrt_dataset_check(&train, 1, (const int64_t[]){9}, 1000, &err), err,
                DLRT_E_SHAPE, "3 labels per sample do not fit samples of shape [9]: a label per "
                "step needs as many as the first dimension");
    train.label_size = 9;
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&val);
    free(ids);

    /* errors; the datasets stay zeroed */
    ids = ramp(20, 5);
    DlrtDataset t2 = {.count = 4}, v2 = {.count = 4};
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 0, 0.1, 5, &err), err, DLRT_E_ARG,
                "a sequence of 0 steps: it needs at least 1");
    CHECK(dataset_is_zeroed(&t2) && dataset_is_zeroed(&v2));
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 4, 1.0, 5, &err), err, DLRT_E_ARG,
                "a validation fraction of 1: it must be at least 0 and below 1");
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 4, -0.5, 5, &err), err, DLRT_E_ARG,
                "a validation fraction of -0.5: it must be at least 0 and below 1");
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 4, NAN, 5, &err), err, DLRT_E_ARG,
                "a validation fraction of nan: it must be at least 0 and below 1");
    CHECK_EXACT(dlrt_text_dataset(&t2, NULL, ids, 20, 4, 0.1, 5, &err), err, DLRT_E_ARG,
                "a validation fraction of 0.1 but no validation dataset");
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 4, 0.1, 0, &err), err, DLRT_E_ARG,
                "a vocabulary of 0 characters: ids as floats need 1 to 2^24 (16777216)");
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 4, 0.1, (1 << 24) + 1, &err), err,
                DLRT_E_ARG, "a vocabulary of 16777217 characters: ids as floats need 1 to 2^24 "
                "(16777216)");
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 4, 0.1, 4, &err), err, DLRT_E_RANGE,
                "id 4 at position 4 is out of range for a vocabulary of 4 characters");
    ids[7] = -3;
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 4, 0.1, 5, &err), err, DLRT_E_RANGE,
                "id -3 at position 7 is out of range for a vocabulary of 5 characters");
    ids[7] = 2;
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 4, 4, 0, 5, &err), err, DLRT_E_SHAPE,
                "a text of 4 characters is too short for a sequence of 4 steps, which takes 5");
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 0, 4, 0, 5, &err), err, DLRT_E_SHAPE,
                "a text of 0 characters is too short for a sequence of 4 steps, which takes 5");
    /* 20 ids, 4 steps: 4 samples; 0.1 of 4 rounds to none, 0.9 to all */
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 4, 0.1, 5, &err), err, DLRT_E_SHAPE,
                "a validation fraction of 0.1 of 4 sequences of 4 steps is less than one "
                "sequence");
    CHECK_EXACT(dlrt_text_dataset(&t2, &v2, ids, 20, 4, 0.9, 5, &err), err, DLRT_E_SHAPE,
                "a validation fraction of 0.9 of 4 sequences of 4 steps leaves none to train on");
    CHECK(dataset_is_zeroed(&t2) && dataset_is_zeroed(&v2));
    CHECK_OK(dlrt_text_dataset(&t2, &v2, ids, 20, 4, 0.13, 5, &err), err);
    CHECK(t2.count == 3 && v2.count == 1);
    dlrt_dataset_free(&t2);
    dlrt_dataset_free(&v2);
    CHECK(dlrt_text_dataset(NULL, &v2, ids, 20, 4, 0, 5, &err) == DLRT_E_ARG);
    free(ids);
}

/* ======================================================================== */
/* The batcher with a label per step                                        */
/* ======================================================================== */

/* A text dataset's batches carry each sample's labels with it: the input
 * at step t + 1 is the label at step t. */
static void test_batcher_steps(void) {
    DlrtDataset train;
    DlrtBatcher b;
    DlrtError err = {0};
    int32_t *ids = ramp(101, 1000); /* 20 samples of 5 */
    CHECK_OK(dlrt_text_dataset(&train, NULL, ids, 101, 5, 0, 1000, &err), err);
    float x[8 * 5];
    int32_t y[8 * 5];
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        CHECK_OK(dlrt_batcher_init(&b, &train, 8, shuffle, 3, &err), err);
        int64_t n, seen = 0, sizes[4] = {0}, k = 0;
        bool ok = true, in_order = true;
        int32_t firsts[20];
        while ((n = dlrt_batcher_next(&b, x, y)) > 0) {
            sizes[k++ & 3] = n;
            for (int64_t s = 0; s < n; s++) {
                int32_t first = (int32_t)x[5 * s];
                ok = ok && first % 5 == 0;
                for (int t = 0; t < 5; t++)
                    ok = ok && x[5 * s + t] == (float)(first + t) && y[5 * s + t] == first + t + 1;
                in_order = in_order && first == 5 * seen;
                firsts[seen++] = first / 5;
            }
        }
        CHECK(ok && seen == 20 && k == 3 && sizes[0] == 8 && sizes[1] == 8 && sizes[2] == 4);
        bool perm = true;
        for (int i = 0; i < 20 && perm; i++) {
            int c = 0;
            for (int j = 0; j < 20; j++)
                c += firsts[j] == i;
            perm = c == 1;
        }
        CHECK(perm && in_order == !shuffle);
        dlrt_batcher_free(&b);
    }
    dlrt_dataset_free(&train);
    free(ids);
    DlrtDataset bad = {.count = 1, .x = x, .y = y, .label_size = -1};
    CHECK_EXACT(dlrt_batcher_init(&b, &bad, 8, false, 3, &err), err, DLRT_E_ARG,
                "dlrt_batcher_init: -1 labels per sample");
}

/* label_size 1 and 0 (a zeroed dataset's, as every other loader makes)
 * batch alike: one label per sample. */
static void test_batcher_one_label(void) {
    float xs[12];
    int32_t ys[6];
    for (int i = 0; i < 6; i++) {
        xs[2 * i] = (float)i;
        xs[2 * i + 1] = (float)i + 0.5f;
        ys[i] = i;
    }
    DlrtDataset zero = {.count = 6, .rank = 1, .dims = {2}, .sample_size = 2, .x = xs, .y = ys,
                        .num_classes = 6};
    DlrtDataset one = zero;
    one.label_size = 1;
    CHECK(dlrt_dataset_label_size(&zero) == 1 && dlrt_dataset_label_size(&one) == 1);
    DlrtError err = {0};
    CHECK_OK(dlrt_dataset_check(&one, 1, (const int64_t[]){2}, 6, &err), err);
    CHECK_EXACT(dlrt_dataset_check(&one, 1, (const int64_t[]){2}, 5, &err), err, DLRT_E_RANGE,
                "label 5 at sample 5 is out of range for 5 classes");
    DlrtBatcher a, b;
    CHECK_OK(dlrt_batcher_init(&a, &zero, 4, true, 11, &err), err);
    CHECK_OK(dlrt_batcher_init(&b, &one, 4, true, 11, &err), err);
    for (int epoch = 0; epoch < 2; epoch++) {
        float xa[8] = {0}, xb[8] = {0};
        int32_t ya[5] = {-1, -1, -1, -1, -7}, yb[5] = {-1, -1, -1, -1, -7};
        int64_t na, nb;
        do {
            na = dlrt_batcher_next(&a, xa, ya);
            nb = dlrt_batcher_next(&b, xb, yb);
            CHECK(na == nb && memcmp(xa, xb, sizeof xa) == 0 && memcmp(ya, yb, sizeof ya) == 0);
            CHECK(ya[4] == -7); /* nothing past batch labels */
            for (int64_t k = 0; k < na; k++)
                CHECK(xa[2 * k] == (float)ya[k]);
        } while (na > 0);
        dlrt_batcher_next_epoch(&a);
        dlrt_batcher_next_epoch(&b);
    }
    dlrt_batcher_free(&a);
    dlrt_batcher_free(&b);
}

/* ======================================================================== */
/* Modes for lit                                                            */
/* ======================================================================== */

static int fail_mode(const DlrtError *err) {
    fprintf(stderr, "error: %s: %s\n", dlrt_status_name(err->status), err->message);
    return 1;
}

static void print_vocab(const DlrtVocab *v) {
    printf("vocabulary: %d characters:", (int)v->size);
    for (int32_t i = 0; i < v->size; i++)
        printf(" %X", (unsigned)v->chars[i]);
    printf("\n");
}

/* The text of path, its vocabulary, ids and (with steps) datasets. */
static int mode_load(const char *path, int64_t steps, double fraction) {
    DlrtText t;
    DlrtVocab v = {0};
    DlrtDataset train = {0}, val = {0};
    DlrtError err = {0};
    int32_t *ids = NULL;
    int64_t n = 0;
    DlrtStatus st = dlrt_load_text(&t, path, 0, &err);
    if (st == DLRT_OK)
        st = dlrt_vocab_build(&v, t.data, t.size, &err);
    if (st == DLRT_OK)
        st = dlrt_vocab_encode(&v, t.data, t.size, &ids, &n, &err);
    if (st == DLRT_OK && steps > 0)
        st = dlrt_text_dataset(&train, &val, ids, n, steps, fraction, v.size, &err);
    if (st == DLRT_OK) {
        printf("text: %lld bytes, %lld characters, crc32 %08lx; files: %d\n",
               (long long)t.size, (long long)t.chars,
               crc32(0, (const Bytef *)t.data, (unsigned)t.size), t.files);
        print_vocab(&v);
        printf("ids: %lld, crc32 %08lx\n", (long long)n,
               crc32(0, (const Bytef *)ids, (unsigned)((size_t)n * sizeof *ids)));
        if (steps > 0)
            printf("datasets: %lld training and %lld validation sequences of %lld steps\n",
                   (long long)train.count, (long long)val.count, (long long)steps);
    }
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&val);
    free(ids);
    dlrt_vocab_free(&v);
    dlrt_text_free(&t);
    return st == DLRT_OK ? 0 : fail_mode(&err);
}

/* The checkpoints of the modes: one tensor, "w". */
static float mode_w[2] = {0.25f, 4.0f};
static DlrtTensor mode_tensor(void) {
    return (DlrtTensor){.name = "w", .dtype = DLRT_F32, .rank = 1, .dims = {2}, .data = mode_w};
}

/* Loads a checkpoint's vocabulary into v. */
static DlrtStatus read_vocab(const char *checkpoint, DlrtVocab *v, DlrtError *err) {
    DlrtTensor w = mode_tensor();
    DlrtMeta *meta = NULL;
    int nmeta = 0;
    DlrtStatus st = dlrt_load_safetensors(checkpoint, &w, 1, &meta, &nmeta, err);
    if (st == DLRT_OK)
        st = dlrt_vocab_from_meta(v, meta, nmeta, checkpoint, err);
    dlrt_meta_free(meta, nmeta);
    return st;
}

static int mode_vocab(const char *mode, const char *a, const char *b) {
    DlrtText t = {0};
    DlrtVocab v = {0}, data = {0};
    DlrtError err = {0};
    DlrtStatus st;
    if (strcmp(mode, "save-vocab") == 0) {
        st = dlrt_load_text(&t, a, 0, &err);
        if (st == DLRT_OK)
            st = dlrt_vocab_build(&v, t.data, t.size, &err);
        if (st == DLRT_OK) {
            DlrtTensor w = mode_tensor();
            DlrtMeta meta[] = {{"network", "charlm"}, dlrt_vocab_meta(&v)};
            st = dlrt_save_safetensors(b, &w, 1, meta, 2, &err);
        }
    } else if (strcmp(mode, "read-vocab") == 0) {
        if ((st = read_vocab(a, &v, &err)) == DLRT_OK)
            print_vocab(&v);
    } else {
        st = read_vocab(a, &v, &err);
        if (st == DLRT_OK)
            st = dlrt_load_text(&t, b, 0, &err);
        if (st == DLRT_OK)
            st = dlrt_vocab_build(&data, t.data, t.size, &err);
        if (st == DLRT_OK)
            st = dlrt_vocab_check(&v, &data, &err);
        if (st == DLRT_OK)
            printf("the vocabularies agree: %d characters\n", (int)v.size);
    }
    dlrt_vocab_free(&v);
    dlrt_vocab_free(&data);
    dlrt_text_free(&t);
    return st == DLRT_OK ? 0 : fail_mode(&err);
}

static int run_mode(int argc, char **argv) {
    const char *mode = argv[1];
    if (strcmp(mode, "load") == 0 && (argc == 3 || argc == 5))
        return mode_load(argv[2], argc == 5 ? atoll(argv[3]) : 0, argc == 5 ? atof(argv[4]) : 0);
    if (strcmp(mode, "save-vocab") == 0 && argc == 4)
        return mode_vocab(mode, argv[2], argv[3]);
    if (strcmp(mode, "read-vocab") == 0 && argc == 3)
        return mode_vocab(mode, argv[2], NULL);
    if (strcmp(mode, "check-vocab") == 0 && argc == 4)
        return mode_vocab(mode, argv[2], argv[3]);
    fprintf(stderr, "usage: test_text [load PATH [STEPS FRACTION] | save-vocab PATH CHECKPOINT |"
                    " read-vocab CHECKPOINT | check-vocab CHECKPOINT PATH]\n");
    return 2;
}

/* ======================================================================== */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(path);
}

int main(int argc, char **argv) {
    if (argc > 1)
        return run_mode(argc, argv);
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch_dir, sizeof scratch_dir, "%s/dlrt-text-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(scratch_dir)) {
        perror("test_text: mkdtemp");
        return 2;
    }
    test_load_file();
    test_load_folder();
    test_load_limit();
    test_load_errors();
    test_vocab();
    test_vocab_meta();
    test_vocab_checkpoint();
    test_vocab_check();
    test_dataset();
    test_batcher_steps();
    test_batcher_one_label();
    nftw(scratch_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return harness_report();
}
