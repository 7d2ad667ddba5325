/* fuzz_idx.c — libFuzzer target for libdlrt's IDX reader (runtime/data.c).
 *
 * The input, plain or gzip, is read as an images file alone
 * (dlrt_load_idx_images, as `./net predict` reads one) and, split as
 * fuzz_split says (readers.h), as an images file and a labels file
 * (dlrt_load_idx, as training reads them).  Seeds: tests/fuzz/idx/. */
#include "readers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char images[64], labels[64];
    DlrtError err = {0};
    DlrtDataset ds;
    int fd = fuzz_memfile(data, size, images, sizeof images);
    DlrtStatus st = dlrt_load_idx_images(&ds, images, NULL, &err);
    fuzz_check_dataset(st, &ds, &err, false);
    dlrt_dataset_free(&ds);
    close(fd);

    FuzzPair p = fuzz_split(data, size);
    int a = fuzz_memfile(p.images, p.nimages, images, sizeof images);
    int b = fuzz_memfile(p.labels, p.nlabels, labels, sizeof labels);
    memset(&err, 0, sizeof err);
    st = dlrt_load_idx(&ds, images, labels, NULL, &err);
    fuzz_check_dataset(st, &ds, &err, true);
    dlrt_dataset_free(&ds);
    close(a);
    close(b);
    return 0;
}
