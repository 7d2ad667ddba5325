/* fuzz_ir.c — libFuzzer target for the IR text parser and the verifier.
 * Any input must parse or be rejected with diagnostics; a module that
 * parses and verifies must pass check_module(). */
#include "roundtrip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    DlcCtx ctx;
    int file = fuzz_ctx(&ctx, data, size, "fuzz.dlir", true);
    DlcModule *m = dlc_parse_ir(&ctx, file);
    if (m && dlc_verify(&ctx, m))
        check_module(&ctx, m);
    dlc_module_free(m);
    fuzz_ctx_free(&ctx);
    return 0;
}
