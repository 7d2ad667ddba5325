/* fuzz_pgm.c — libFuzzer target for libdlrt's PGM reader (runtime/pgm.c).
 *
 * The input, plain or gzip, is one image file (P5 or P2): dlrt_load_pgm
 * must give one sample of [1, height, width] with every value in [0, 1],
 * or refuse it with a message.  Seeds: tests/fuzz/pgm/. */
#include "readers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    DlrtError err = {0};
    DlrtDataset ds;
    int fd = fuzz_memfile(data, size, path, sizeof path);
    DlrtStatus st = dlrt_load_pgm(&ds, path, &err);
    fuzz_check_dataset(st, &ds, &err, false);
    if (st == DLRT_OK) {
        REQUIRE(ds.count == 1 && ds.rank == 3 && ds.dims[0] == 1);
        for (int64_t i = 0; i < ds.sample_size; i++)
            REQUIRE(ds.x[i] >= 0 && ds.x[i] <= 1);
    }
    dlrt_dataset_free(&ds);
    close(fd);
    return 0;
}
