/* roundtrip.h — the property both fuzz targets check on every module they
 * manage to build: it verifies, the passes (autodiff included) keep it
 * valid, and its IR text parses back and prints identically.  A violation aborts, which libFuzzer
 * reports as a crash with the input that caused it. */
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "../passes/passes.h"

/* A context whose diagnostics go nowhere, with the fuzz input as source
 * `name`; returns the source's index.  Close with fuzz_ctx_free. */
static int fuzz_ctx(DlcCtx *ctx, const uint8_t *data, size_t size, const char *name, bool is_ir) {
    dlc_ctx_init(ctx, fopen("/dev/null", "w"));
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    return dlc_ctx_add_source(ctx, name, text, size, is_ir);
}

static void fuzz_ctx_free(DlcCtx *ctx) {
    FILE *sink = ctx->err;
    dlc_ctx_free(ctx);
    fclose(sink);
}

static char *print_to_string(const DlcModule *m, size_t *len) {
    char *buf;
    FILE *f = open_memstream(&buf, len);
    dlc_print_module(f, m);
    fclose(f);
    return buf;
}

static void check_module(DlcCtx *ctx, DlcModule *m) {
    if (!dlc_verify(ctx, m))
        dlc_unreachable("a module that was accepted does not verify");
    for (int i = 0; dlc_default_pipeline[i]; i++) {
        dlc_pass_lookup(dlc_default_pipeline[i])->run(ctx, m, &(DlcPassOptions){0});
        if (!dlc_verify(ctx, m))
            dlc_unreachable("pass %s broke the module", dlc_default_pipeline[i]);
    }
    /* autodiff may refuse a network (an op without a gradient rule), but
       what it builds must be valid */
    int errors = ctx->nerrors;
    if (dlc_pass_autodiff(ctx, m, &(DlcPassOptions){0}) && ctx->nerrors == errors && !dlc_verify(ctx, m))
        dlc_unreachable("autodiff built a module that does not verify");
    if (ctx->nerrors > errors)
        return;
    size_t la, lb;
    char *a = print_to_string(m, &la);
    int file = dlc_ctx_add_source(ctx, "roundtrip.dlir", a, la, true);
    DlcModule *back = dlc_parse_ir(ctx, file);
    if (!back || !dlc_verify(ctx, back))
        dlc_unreachable("printed IR does not parse back:\n%s", a);
    char *b = print_to_string(back, &lb);
    if (la != lb || memcmp(a, b, la) != 0)
        dlc_unreachable("IR text does not round-trip:\n%s\n---- printed back as ----\n%s", a, b);
    free(b);
    dlc_module_free(back);
}
