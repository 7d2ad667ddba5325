/* fuzz_ir.c — libFuzzer target for the IR text parser and the verifier.
 * Any input must parse or be rejected with diagnostics; a module that
 * parses and verifies must pass check_module(). */
#include "roundtrip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *sink = fopen("/dev/null", "w");
    DlcCtx ctx;
    dlc_ctx_init(&ctx, sink);
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    int file = dlc_ctx_add_source(&ctx, "fuzz.dlir", text, size, true);
    DlcModule *m = dlc_parse_ir(&ctx, file);
    if (m && dlc_verify(&ctx, m))
        check_module(&ctx, m);
    dlc_module_free(m);
    dlc_ctx_free(&ctx);
    fclose(sink);
    return 0;
}
