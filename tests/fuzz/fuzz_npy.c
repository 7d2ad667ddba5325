/* fuzz_npy.c — libFuzzer target for libdlrt's NumPy .npy reader
 * (runtime/data.c).
 *
 * The input, plain or gzip, is read as images to classify
 * (dlrt_load_npy_images with a sample shape of [1, 2, 2]) and, split as
 * fuzz_split says, as an images file and a labels file
 * (dlrt_load_npy).  Seeds: tests/fuzz/npy/. */
#include "readers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char images[64], labels[64];
    DlrtError err = {0};
    DlrtDataset ds;
    static const int64_t dims[] = {1, 2, 2};
    int fd = fuzz_memfile(data, size, images, sizeof images);
    DlrtStatus st = dlrt_load_npy_images(&ds, images, 3, dims, NULL, &err);
    fuzz_check_dataset(st, &ds, &err, false);
    dlrt_dataset_free(&ds);
    close(fd);

    FuzzPair p = fuzz_split(data, size);
    int a = fuzz_memfile(p.images, p.nimages, images, sizeof images);
    int b = fuzz_memfile(p.labels, p.nlabels, labels, sizeof labels);
    memset(&err, 0, sizeof err);
    st = dlrt_load_npy(&ds, images, labels, NULL, &err);
    fuzz_check_dataset(st, &ds, &err, true);
    dlrt_dataset_free(&ds);
    close(a);
    close(b);
    return 0;
}
