/* fuzz_safetensors.c — libFuzzer target for libdlrt's checkpoint reader
 * (runtime/safetensors.c).
 *
 * The input is a checkpoint that should hold three tensors, w (f32 [2, 3]),
 * b (f64 [3]) and step (i64 scalar), and metadata: dlrt_load_safetensors
 * must fill them or refuse the file with a message, leaving no metadata
 * behind; the metadata it accepts are terminated strings.  Seeds:
 * tests/fuzz/safetensors/ (tests/fuzz/make_seeds.py writes them). */
#include "readers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    float w[6];
    double b[3];
    int64_t step;
    DlrtTensor t[] = {
        {.name = "w", .dtype = DLRT_F32, .rank = 2, .dims = {2, 3}, .data = w},
        {.name = "b", .dtype = DLRT_F64, .rank = 1, .dims = {3}, .data = b},
        {.name = "step", .dtype = DLRT_I64, .rank = 0, .data = &step},
    };
    DlrtError err = {0};
    DlrtMeta *meta = NULL;
    int nmeta = -1;
    int fd = fuzz_memfile(data, size, path, sizeof path);
    DlrtStatus st = dlrt_load_safetensors(path, t, 3, &meta, &nmeta, &err);
    if (st != DLRT_OK) {
        fuzz_require_message(&err);
        REQUIRE(!meta && nmeta == 0);
    } else {
        REQUIRE(nmeta >= 0 && (nmeta == 0 || meta));
        for (int i = 0; i < nmeta; i++)
            REQUIRE(meta[i].key && meta[i].value && strlen(meta[i].key) + 1 > 0);
        dlrt_meta_free(meta, nmeta);
    }
    /* without metadata, the path a generated network's NAME_load takes */
    memset(&err, 0, sizeof err);
    if (dlrt_load_safetensors(path, t, 3, NULL, NULL, &err) != DLRT_OK)
        fuzz_require_message(&err);
    close(fd);
    return 0;
}
