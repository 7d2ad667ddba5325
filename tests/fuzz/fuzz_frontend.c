/* fuzz_frontend.c — libFuzzer target for the .dl frontend: scanner, parser,
 * elaboration and shape rules.  Any input must end in a module or in
 * diagnostics, never in a crash, a hang, a leak or undefined behaviour; an
 * accepted module must also pass check_module(). */
#include "roundtrip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    DlcCtx ctx;
    int file = fuzz_ctx(&ctx, data, size, "fuzz.dl", false);
    /* small limits, so that no input runs long enough to be a false timeout */
    DlcFrontendOptions opt = {.max_steps = 100000, .max_ops = 20000};
    DlcModule *m = dlc_frontend_compile(&ctx, file, &opt);
    if (m) {
        check_module(&ctx, m);
        dlc_module_free(m);
    }
    fuzz_ctx_free(&ctx);
    return 0;
}
