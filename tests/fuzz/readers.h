/* readers.h — what the fuzz targets of libdlrt's file readers share.
 *
 * Each target hands a reader its input as a real file: an in-memory one
 * (memfd_create) read through its /proc/self/fd path, so that the reader
 * takes the same path as for a file on disk, gzip detection included.  A
 * reader must accept the bytes or refuse them with a message and leave its
 * output empty; REQUIRE aborts on a broken promise, which libFuzzer
 * reports with the input. */
#ifndef DLC_FUZZ_READERS_H
#define DLC_FUZZ_READERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dlrt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                         \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: broken: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* An in-memory file holding size bytes of data; its path into path. */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t pathsize) {
    int fd = memfd_create("fuzz-reader", 0);
    if (fd < 0) {
        perror("fuzz: memfd_create");
        abort();
    }
    for (size_t done = 0; done < size;) {
        ssize_t k = write(fd, data + done, size - done);
        if (k <= 0) {
            perror("fuzz: write");
            abort();
        }
        done += (size_t)k;
    }
    snprintf(path, pathsize, "/proc/self/fd/%d", fd);
    return fd;
}

/* A message was given: not empty, and terminated. */
static inline void fuzz_require_message(const DlrtError *err) {
    REQUIRE(err->message[0] != '\0' && memchr(err->message, '\0', sizeof err->message));
}

/* What every loaded dataset must be, and what a refused one must be:
 * zeroed.  Accepted, its shape's product is its sample size and its labels
 * (if any) are in 0 .. num_classes-1. */
static inline void fuzz_check_dataset(DlrtStatus st, const DlrtDataset *ds, const DlrtError *err,
                                      bool labels) {
    if (st != DLRT_OK) {
        fuzz_require_message(err);
        REQUIRE(ds->count == 0 && !ds->x && !ds->y);
        return;
    }
    REQUIRE(ds->count >= 1 && ds->rank >= 1 && ds->rank <= DLRT_MAX_SAMPLE_RANK);
    int64_t size = 1;
    for (int i = 0; i < ds->rank; i++) {
        REQUIRE(ds->dims[i] >= 1);
        size *= ds->dims[i];
    }
    REQUIRE(size == ds->sample_size && ds->x);
    /* every value is readable (ASan checks the extent) */
    volatile float sum = 0;
    for (int64_t i = 0; i < ds->count * ds->sample_size; i++)
        sum += ds->x[i];
    (void)sum;
    if (!labels) {
        REQUIRE(!ds->y);
        return;
    }
    REQUIRE(ds->y && ds->num_classes >= 1);
    for (int64_t i = 0; i < ds->count * dlrt_dataset_label_size(ds); i++)
        REQUIRE(ds->y[i] >= 0 && ds->y[i] < ds->num_classes);
}

/* The two files of a loader that reads images and labels from separate
 * files: the first two bytes (little-endian) are the images' length, cut
 * to what there is; the images follow, then the labels. */
typedef struct FuzzPair {
    const uint8_t *images, *labels;
    size_t nimages, nlabels;
} FuzzPair;

static inline FuzzPair fuzz_split(const uint8_t *data, size_t size) {
    FuzzPair p = {data, data, 0, 0};
    if (size < 2)
        return p;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8;
    if (n > size - 2)
        n = size - 2;
    p.images = data + 2, p.nimages = n;
    p.labels = data + 2 + n, p.nlabels = size - 2 - n;
    return p;
}

#endif
