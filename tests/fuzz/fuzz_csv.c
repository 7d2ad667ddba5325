/* fuzz_csv.c — libFuzzer target for libdlrt's CSV reader (runtime/data.c).
 *
 * The input's first byte chooses the label column (-1 to 6: -1 and columns
 * past the last are errors the reader must report) and whether a header
 * row is skipped; the rest, plain or gzip, is the file.  Seeds:
 * tests/fuzz/csv/. */
#include "readers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    int column = (data[0] & 7) - 1;
    bool header = data[0] & 8;
    char path[64];
    DlrtError err = {0};
    DlrtDataset ds;
    int fd = fuzz_memfile(data + 1, size - 1, path, sizeof path);
    DlrtStatus st = dlrt_load_csv(&ds, path, column, header, NULL, &err);
    fuzz_check_dataset(st, &ds, &err, true);
    if (st == DLRT_OK)
        REQUIRE(ds.rank == 1);
    dlrt_dataset_free(&ds);
    close(fd);
    return 0;
}
