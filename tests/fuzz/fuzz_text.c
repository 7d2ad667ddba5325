/* fuzz_text.c — libFuzzer target for libdlrt's text (runtime/text.c).
 *
 * The input is read twice.  As a file (an in-memory one, memfd_create,
 * read through its /proc/self/fd path, so gzip and plain bytes take the
 * real path): dlrt_load_text must accept it or refuse it with a message;
 * accepted, its vocabulary must build, encode and decode it back to the
 * same bytes, survive the metadata round trip, and cut into datasets whose
 * sizes follow the documented arithmetic.  As a checkpoint's "vocabulary"
 * metadata value (up to its first NUL): dlrt_vocab_from_meta must accept
 * it or refuse it, and accepted, hold it exactly, in ascending order.  A
 * broken promise aborts, which libFuzzer reports with the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dlrt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                        \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_text.c:%d: broken: %s\n", __LINE__, #cond); \
            abort();                                                         \
        }                                                                    \
    } while (0)

/* A message was given: not empty, and terminated. */
static void require_message(const DlrtError *err) {
    REQUIRE(err->message[0] != '\0' && memchr(err->message, '\0', sizeof err->message));
}

/* The datasets of n ids in samples of steps, with a fraction held out. */
static void check_datasets(const int32_t *ids, int64_t n, int32_t vocab, int64_t steps,
                           double fraction) {
    DlrtDataset train, val;
    DlrtError err = {0};
    DlrtStatus st = dlrt_text_dataset(&train, &val, ids, n, steps, fraction, vocab, &err);
    int64_t total = n > 0 ? (n - 1) / steps : 0;
    if (st != DLRT_OK) {
        require_message(&err);
        REQUIRE(st == DLRT_E_SHAPE);
        REQUIRE(train.count == 0 && !train.x && val.count == 0 && !val.x);
        return;
    }
    REQUIRE(train.count >= 1 && train.count + val.count == total);
    REQUIRE(fraction == 0 ? val.count == 0 : val.count >= 1);
    REQUIRE(train.label_size == steps && train.num_classes == vocab);
    for (int64_t i = 0; i < train.count * steps; i++)
        REQUIRE(train.x[i] == (float)ids[i] && train.y[i] == ids[i + 1]);
    for (int64_t i = 0; i < val.count * steps; i++)
        REQUIRE(val.x[i] == (float)ids[train.count * steps + i] &&
                val.y[i] == ids[train.count * steps + i + 1]);
    REQUIRE(dlrt_dataset_check(&train, 1, &steps, vocab, &err) == DLRT_OK);
    dlrt_dataset_free(&train);
    dlrt_dataset_free(&val);
}

/* Everything that must hold of a text dlrt_load_text accepted. */
static void check_text(const DlrtText *t, uint8_t knob) {
    DlrtError err = {0};
    DlrtVocab v, back;
    REQUIRE(t->size > 0 && t->files == 1 && t->chars >= 1 && t->chars <= t->size);
    REQUIRE(t->data[t->size] == '\0' && (int64_t)strlen(t->data) == t->size);
    REQUIRE(dlrt_vocab_build(&v, t->data, t->size, &err) == DLRT_OK);
    REQUIRE(v.size >= 1 && v.size <= t->chars);
    for (int32_t i = 1; i < v.size; i++)
        REQUIRE(v.chars[i] > v.chars[i - 1]);
    int32_t *ids = NULL;
    int64_t n = 0, size = 0;
    REQUIRE(dlrt_vocab_encode(&v, t->data, t->size, &ids, &n, &err) == DLRT_OK);
    REQUIRE(n == t->chars);
    char *text = NULL;
    REQUIRE(dlrt_vocab_decode(&v, ids, n, &text, &size, &err) == DLRT_OK);
    REQUIRE(size == t->size && memcmp(text, t->data, (size_t)size + 1) == 0);
    free(text);
    DlrtMeta m = dlrt_vocab_meta(&v);
    REQUIRE(dlrt_vocab_from_meta(&back, &m, 1, "fuzz", &err) == DLRT_OK);
    REQUIRE(dlrt_vocab_check(&back, &v, &err) == DLRT_OK);
    dlrt_vocab_free(&back);
    check_datasets(ids, n, v.size, 1 + knob % 16, (knob >> 4) / 16.0);
    free(ids);
    dlrt_vocab_free(&v);
}

static void fuzz_file(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz-text", 0);
    if (fd < 0) {
        perror("fuzz_text: memfd_create");
        abort();
    }
    for (size_t done = 0; done < size;) {
        ssize_t k = write(fd, data + done, size - done);
        if (k <= 0) {
            perror("fuzz_text: write");
            abort();
        }
        done += (size_t)k;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    DlrtText t;
    DlrtError err = {0};
    /* a limit that a small gzip bomb passes, well within the RSS limit */
    DlrtStatus st = dlrt_load_text(&t, path, 1 << 22, &err);
    if (st == DLRT_OK)
        check_text(&t, size ? data[0] : 0);
    else
        require_message(&err);
    REQUIRE(st == DLRT_OK || (!t.data && t.size == 0));
    dlrt_text_free(&t);
    close(fd);
}

static void fuzz_meta(const uint8_t *data, size_t size) {
    char *value = malloc(size + 1);
    if (!value)
        return;
    memcpy(value, data, size);
    value[size] = '\0';
    DlrtMeta m = {"vocabulary", value};
    DlrtVocab v;
    DlrtError err = {0};
    if (dlrt_vocab_from_meta(&v, &m, 1, "fuzz", &err) == DLRT_OK) {
        REQUIRE(strcmp(v.utf8, value) == 0 && v.size >= 1);
        for (int32_t i = 1; i < v.size; i++)
            REQUIRE(v.chars[i] > v.chars[i - 1]);
        int32_t *ids = NULL;
        int64_t n = 0;
        REQUIRE(dlrt_vocab_encode(&v, value, (int64_t)strlen(value), &ids, &n, &err) == DLRT_OK);
        for (int64_t i = 0; i < n; i++)
            REQUIRE(ids[i] == i);
        free(ids);
        dlrt_vocab_free(&v);
    } else {
        require_message(&err);
        REQUIRE(v.size == 0 && !v.chars && !v.utf8);
    }
    free(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_file(data, size);
    fuzz_meta(data, size);
    return 0;
}
