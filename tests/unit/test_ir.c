/* test_ir.c — unit tests of the IR library where a C-level test is clearer
 * than a .dl file: the sliding-window arithmetic of the shape rules against
 * PyTorch's documented formulas, float formatting that round-trips, the
 * string map at scale, suggestions, the builder with the printer and
 * parser, and the train-section schema.  Prints "N passed, N failed". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static int passed, failed;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (cond) {                                                           \
            passed++;                                                         \
        } else {                                                              \
            failed++;                                                         \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                       \
            printf(__VA_ARGS__);                                              \
            printf("\n");                                                     \
        }                                                                     \
    } while (0)

/* Runs op `kind` on one input of per-sample shape dims with the attributes
 * set by `set`, returning the result type (rank -1 on error). */
static DlcType infer1(DlcOpKind kind, int rank, const int64_t *dims,
                      void (*set)(DlcAttr *, const void *), const void *arg,
                      int *errors) {
    FILE *sink = fopen("/dev/null", "w");
    DlcCtx ctx;
    dlc_ctx_init(&ctx, sink);
    DlcType in = {.dtype = DLC_F32, .batched = true, .rank = rank};
    memcpy(in.dims, dims, sizeof(int64_t) * (size_t)rank);
    DlcAttr attrs[DLC_MAX_ATTRS];
    memset(attrs, 0, sizeof attrs);
    set(attrs, arg);
    dlc_op_fill_defaults(kind, attrs);
    DlcInfer inf = {.ctx = &ctx, .loc = DLC_NOLOC, .kind = kind, .in = &in, .nin = 1,
                    .attrs = attrs};
    DlcType out = {.rank = -1};
    if (dlc_infer(&inf))
        out = inf.out[0];
    *errors = ctx.nerrors;
    dlc_ctx_free(&ctx);
    fclose(sink);
    return out;
}

typedef struct Window { int64_t k, s, p, d; bool ceil; int64_t filters; } Window;

static void set_conv(DlcAttr *a, const void *arg) {
    const Window *w = arg;
    DlcOpKind k = DLC_OP_CONV2D;
#define SETP(name, v) a[dlc_op_attr_index(k, name)] = (DlcAttr){.type = DLC_ATTR_PAIR, .set = true, .pair = {v, v}}
    *dlc_attrs_at(k, a, DLC_A_FILTERS) = (DlcAttr){.type = DLC_ATTR_INT, .set = true, .i = w->filters};
    SETP("kernel", w->k);
    SETP("stride", w->s);
    SETP("pad", w->p);
    SETP("dilation", w->d);
}

static void set_pool(DlcAttr *a, const void *arg) {
    const Window *w = arg;
    DlcOpKind k = DLC_OP_MAXPOOL;
    SETP("kernel", w->k);
    SETP("stride", w->s);
    SETP("pad", w->p);
    *dlc_attrs_at(k, a, DLC_A_CEIL_MODE) = (DlcAttr){.type = DLC_ATTR_BOOL, .set = true, .b = w->ceil};
#undef SETP
}

/* torch.nn.Conv2d's documented output size */
static int64_t torch_conv_out(int64_t h, const Window *w) {
    return (h + 2 * w->p - w->d * (w->k - 1) - 1) / w->s + 1;
}

/* torch.nn.MaxPool2d's output size, ceil_mode included (the last window
 * must start inside the input or the left padding) */
static int64_t torch_pool_out(int64_t h, const Window *w) {
    double x = (double)(h + 2 * w->p - w->k) / (double)w->s;
    int64_t out = (int64_t)(w->ceil ? ceil(x) : floor(x)) + 1;
    if (w->ceil && (out - 1) * w->s >= h + w->p)
        out--;
    return out;
}

static void test_windows(void) {
    int errors;
    for (int64_t h = 1; h <= 40; h++)
        for (int64_t k = 1; k <= 7; k++)
            for (int64_t s = 1; s <= 3; s++)
                for (int64_t p = 0; p <= 3; p++)
                    for (int64_t d = 1; d <= 2; d++) {
                        Window w = {k, s, p, d, false, 8};
                        int64_t want = torch_conv_out(h, &w);
                        DlcType t = infer1(DLC_OP_CONV2D, 3, (int64_t[]){4, h, h}, set_conv, &w,
                                           &errors);
                        if (h + 2 * p < d * (k - 1) + 1)
                            CHECK(errors == 1, "conv h=%ld k=%ld p=%ld d=%ld must not fit",
                                  (long)h, (long)k, (long)p, (long)d);
                        else
                            CHECK(t.rank == 3 && t.dims[1] == want && t.dims[2] == want &&
                                      t.dims[0] == 8,
                                  "conv h=%ld k=%ld s=%ld p=%ld d=%ld: got %ld, want %ld",
                                  (long)h, (long)k, (long)s, (long)p, (long)d,
                                  (long)t.dims[1], (long)want);
                    }
    for (int64_t h = 1; h <= 40; h++)
        for (int64_t k = 1; k <= 5; k++)
            for (int64_t s = 1; s <= 3; s++)
                for (int64_t p = 0; 2 * p <= k; p++)
                    for (int c = 0; c < 2; c++) {
                        Window w = {k, s, p, 1, c, 0};
                        DlcType t = infer1(DLC_OP_MAXPOOL, 3, (int64_t[]){4, h, h}, set_pool, &w,
                                           &errors);
                        if (h + 2 * p < k)
                            continue;
                        int64_t want = torch_pool_out(h, &w);
                        CHECK(t.rank == 3 && t.dims[1] == want,
                              "pool h=%ld k=%ld s=%ld p=%ld ceil=%d: got %ld, want %ld", (long)h,
                              (long)k, (long)s, (long)p, c, (long)t.dims[1], (long)want);
                    }
    /* GoogLeNet's pools with ceil_mode: 112 -> 56 -> 28 -> 14 -> 7 */
    int64_t h = 112;
    for (int i = 0; i < 4; i++) {
        Window w = {3, 2, 0, 1, true, 0};
        DlcType t = infer1(DLC_OP_MAXPOOL, 3, (int64_t[]){64, h, h}, set_pool, &w, &errors);
        CHECK(t.dims[1] == h / 2, "googlenet pool %ld -> %ld", (long)h, (long)t.dims[1]);
        h = t.dims[1];
    }
}

static void test_format_double(void) {
    const double cases[] = {0.0, 1.0, 0.1, 0.01, 5e-4, 1e-5, 123456789.0, 1e300, -2.5,
                            1.0 / 3.0, 0.9, 0.999, 1e-8};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[64];
        dlc_format_double(buf, sizeof buf, cases[i]);
        CHECK(strtod(buf, NULL) == cases[i] && strpbrk(buf, ".e"), "format %.17g gave %s",
              cases[i], buf);
    }
    char buf[64];
    dlc_format_double(buf, sizeof buf, 0.01);
    CHECK(strcmp(buf, "0.01") == 0, "0.01 printed as %s", buf);
    dlc_format_double(buf, sizeof buf, 2.0);
    CHECK(strcmp(buf, "2.0") == 0, "2.0 printed as %s", buf);
    srand(1);
    for (int i = 0; i < 10000; i++) {
        double x = (double)rand() / RAND_MAX * pow(10, rand() % 40 - 20);
        dlc_format_double(buf, sizeof buf, x);
        if (strtod(buf, NULL) != x) {
            CHECK(false, "%.17g printed as %s", x, buf);
            break;
        }
    }
    passed++;
}

static void test_map_and_suggestions(void) {
    DlcArena a = {0};
    DlcMap m;
    dlc_map_init(&m, &a);
    for (long i = 0; i < 20000; i++)
        dlc_map_put(&m, dlc_arena_printf(&a, "k%ld", i), (void *)(i + 1));
    bool ok = m.len == 20000;
    for (long i = 0; i < 20000 && ok; i++)
        ok = dlc_map_get(&m, dlc_arena_printf(&a, "k%ld", i)) == (void *)(i + 1);
    CHECK(ok, "map lost keys");
    CHECK(dlc_map_get(&m, "absent") == NULL, "map invents keys");
    dlc_arena_free(&a);

    CHECK(dlc_edit_distance("convd2", "conv2d") == 1, "transposition counts once");
    CHECK(dlc_edit_distance("", "abc") == 3, "insertions");
    const char *ops[] = {"conv2d", "dense", "relu", "maxpool"};
    CHECK(dlc_closest("convd2", ops, 4) && strcmp(dlc_closest("convd2", ops, 4), "conv2d") == 0,
          "convd2 -> conv2d");
    CHECK(dlc_closest("dens", ops, 4) && strcmp(dlc_closest("dens", ops, 4), "dense") == 0,
          "dens -> dense");
    CHECK(dlc_closest("softmax", ops, 4) == NULL, "no wild guesses");
    CHECK(dlc_closest("x", ops, 4) == NULL, "no guesses for one letter");
}

static char *print_str(const DlcModule *m) {
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    dlc_print_module(f, m);
    fclose(f);
    return buf;
}

/* A network built with the builder prints, verifies, parses back and
 * prints the same. */
static void test_builder_roundtrip(void) {
    FILE *sink = fopen("/dev/null", "w");
    DlcCtx ctx;
    dlc_ctx_init(&ctx, sink);
    DlcModule *m = dlc_module_new(&ctx);
    DlcNetwork *net = dlc_network_new(m, "tiny", DLC_NOLOC);
    DlcType img = {.dtype = DLC_F32, .batched = true, .rank = 3, .dims = {1, 8, 8}};
    DlcValue *x = dlc_network_add_input(m, net, "x", img, DLC_NOLOC);
    DlcType wt = {.dtype = DLC_F32, .rank = 4, .dims = {4, 1, 3, 3}};
    DlcType bt = {.dtype = DLC_F32, .rank = 1, .dims = {4}};
    DlcValue *w = dlc_network_add_param(m, net, "c.weight", wt, DLC_INIT_KAIMING_UNIFORM, true, DLC_NOLOC);
    DlcValue *b = dlc_network_add_param(m, net, "c.bias", bt, DLC_INIT_ZEROS, true, DLC_NOLOC);
    DlcAttr attrs[DLC_MAX_ATTRS] = {0};
    *dlc_attrs_at(DLC_OP_CONV2D, attrs, DLC_A_FILTERS) = (DlcAttr){.type = DLC_ATTR_INT, .set = true, .i = 4};
    *dlc_attrs_at(DLC_OP_CONV2D, attrs, DLC_A_KERNEL) = (DlcAttr){.type = DLC_ATTR_PAIR, .set = true, .pair = {3, 3}};
    dlc_op_fill_defaults(DLC_OP_CONV2D, attrs);
    DlcType ct = {.dtype = DLC_F32, .batched = true, .rank = 3, .dims = {4, 6, 6}};
    const char *names[] = {dlc_network_unique_name(m, net, "c")};
    DlcOp *op = dlc_network_add_op(m, net, DLC_OP_CONV2D, (DlcValue *[]){x, w, b}, 3, 2, attrs,
                                   &ct, names, 1, DLC_NOLOC);
    CHECK(op != NULL, "conv added");
    const char *n2[] = {dlc_network_unique_name(m, net, "c")};
    CHECK(strcmp(n2[0], "c.1") == 0, "unique name is c.1, got %s", n2[0]);
    DlcOp *r = dlc_network_add_op(m, net, DLC_OP_RELU, &op->out[0], 1, 0, NULL, &ct, n2, 1, DLC_NOLOC);
    dlc_network_add_output(m, net, r->out[0]);
    DlcTrain *t = dlc_train_new(m, "tiny", DLC_NOLOC);
    DlcCfg lr = {.kind = DLC_CFG_FLOAT, .f = 0.1};
    DlcCfgArg *args = dlc_arena_alloc(&m->arena, sizeof *args);
    args[0] = (DlcCfgArg){.key = "lr", .val = lr};
    dlc_train_add(m, t, "optimizer", (DlcCfg){.kind = DLC_CFG_CALL, .s = "sgd", .args = args, .nargs = 1},
                  DLC_NOLOC);
    DlcCfgArg *path = dlc_arena_alloc(&m->arena, sizeof *path);
    path[0] = (DlcCfgArg){.val = {.kind = DLC_CFG_STR, .s = "a \"quoted\"\tpath\n"}};
    dlc_train_add(m, t, "data", (DlcCfg){.kind = DLC_CFG_CALL, .s = "idx", .args = path, .nargs = 1},
                  DLC_NOLOC);
    CHECK(dlc_verify(&ctx, m), "built module verifies");

    char *a = print_str(m);
    CHECK(strstr(a, "%c = conv2d(%x, @c.weight, @c.bias) {filters=4, kernel=3} : f32[N,4,6,6]") != NULL,
          "printed conv:\n%s", a);
    int file = dlc_ctx_add_source(&ctx, "t.dlir", strdup(a), strlen(a), true);
    DlcModule *back = dlc_parse_ir(&ctx, file);
    CHECK(back != NULL && dlc_verify(&ctx, back), "printed module parses and verifies");
    if (back) {
        char *b2 = print_str(back);
        CHECK(strcmp(a, b2) == 0, "round trip:\n%s\nvs\n%s", a, b2);
        free(b2);
    }
    dlc_module_free(back);

    /* a wrong result type is caught by the verifier */
    r->out[0]->type.dims[0] = 5;
    int before = ctx.nerrors;
    CHECK(!dlc_verify(&ctx, m) && ctx.nerrors == before + 1, "verifier catches a wrong type");
    free(a);
    dlc_module_free(m);
    dlc_ctx_free(&ctx);
    fclose(sink);
}

/* Out-of-range train settings are errors, each reported once. */
static void test_train_schema(void) {
    struct { const char *key; DlcCfg val; int errors; } cases[] = {
        {"batch", {.kind = DLC_CFG_INT, .i = 64}, 0},
        {"batch", {.kind = DLC_CFG_INT, .i = 0}, 1},
        {"batch", {.kind = DLC_CFG_FLOAT, .f = 1.5}, 1},
        {"epochs", {.kind = DLC_CFG_INT, .i = -1}, 1},
        {"seed", {.kind = DLC_CFG_INT, .i = 7}, 0},
        {"loss", {.kind = DLC_CFG_SYM, .s = "cross_entropy"}, 0},
        {"loss", {.kind = DLC_CFG_SYM, .s = "cross_entropi"}, 1},
        {"loss", {.kind = DLC_CFG_INT, .i = 3}, 1},
        {"optimiser", {.kind = DLC_CFG_SYM, .s = "sgd"}, 1},
        {"optimizer", {.kind = DLC_CFG_SYM, .s = "sgd"}, 1}, /* lr is required */
        {"optimizer", {.kind = DLC_CFG_SYM, .s = "adam"}, 0},
        {"schedule", {.kind = DLC_CFG_SYM, .s = "cosine"}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        FILE *sink = fopen("/dev/null", "w");
        DlcCtx ctx;
        dlc_ctx_init(&ctx, sink);
        DlcModule *m = dlc_module_new(&ctx);
        dlc_network_new(m, "net", DLC_NOLOC);
        DlcTrain *t = dlc_train_new(m, "net", DLC_NOLOC);
        dlc_train_add(m, t, cases[i].key, cases[i].val, DLC_NOLOC);
        dlc_train_check(&ctx, m, t);
        CHECK(ctx.nerrors == cases[i].errors, "train case %zu (%s): %d errors, want %d", i,
              cases[i].key, ctx.nerrors, cases[i].errors);
        dlc_module_free(m);
        dlc_ctx_free(&ctx);
        fclose(sink);
    }
}

int main(void) {
    test_windows();
    test_format_double();
    test_map_and_suggestions();
    test_builder_roundtrip();
    test_train_schema();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
