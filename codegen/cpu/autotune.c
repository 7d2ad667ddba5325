/* autotune.c — --autotune: the register block of each blocked convolution
 * (layout=B, codegen/cpu/blocked_conv.c) measured on this machine instead
 * of taken from the tile pass's model (dlc_tile_blocked_conv).
 *
 * For each conv2d of the inference network with a layout, the candidates
 * are the legal blocks (nv registers of B filters, nv dividing the
 * filters' blocks, by pb positions of a row or whole rows) that fit the
 * registers, the
 * MAX_CANDIDATES best by the model's time, and the op's own tile (the
 * model's choice, or one written in IR text) if it is not among them.
 * One C file holds, for every op not yet in the cache, one function per
 * candidate, written by cpu.c's own op_function on a copy of the op with
 * its tile overridden (the very code the build would write), and a main
 * that gives each op random operands at batch 1 in the op's source layout,
 * packs each candidate's weights once, and calls the candidates in turn,
 * round after round, with the threads the program uses by default
 * (dlrt_threads(): OpenMP's, all cores); each candidate's time is the
 * median of its calls after WARM_ROUNDS rounds of warm-up.  The file is
 * compiled with the program build's compiler and flags, in a temporary
 * folder removed afterwards.
 *
 * The cache is a text file, one line per convolution's signature: its
 * shapes, kernel, stride, padding, dilation, fused epilogue, source block
 * and B, the CPU model's vector and registers, the thread count, and the
 * compiler's and CPU's names (spaces as '_'), then the chosen tile, the
 * model's tile and the two times in microseconds:
 *
 *   conv2d in=64x56x56 out=64x56x56 kernel=3x3 stride=1x1 pad=1x1 dilation=1x1
 *   epilogue=relu cb=16 b=16 vector=64 registers=32 threads=2 cc=gcc_(Debian_12.2.0-14)_12.2.0
 *   cpu=Intel(R)_Xeon(R)_... tile=32x7 model=32x14 model_us=812.3 best_us=790.1
 *
 * (one line in the file).  Lines starting with '#' are comments.  An op
 * whose signature is there takes its tile without measuring; the others
 * are measured and their lines added.  A changed compiler, CPU or thread
 * count is a new signature, measured anew; the stale line stays beside
 * it.  The file is rewritten through a temporary file renamed into place.
 *
 * Preconditions: the module has been through the CPU pipeline (layout and
 * tile set the tiles). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../codegen.h"
#include "direct_conv.h"
#include "emit.h"

#define put dlc_cpu_put

/* The candidates timed per op besides its own tile, best by the model
 * first. */
#define MAX_CANDIDATES 12
/* Rounds of calls: warm-up, then at least MIN_ROUNDS and at most
 * MAX_ROUNDS, fewer than MAX_ROUNDS once an op has taken ROUND_SECONDS. */
#define WARM_ROUNDS 3
#define MIN_ROUNDS 9
#define MAX_ROUNDS 31
#define ROUND_SECONDS 0.5

/* One blocked convolution to tune. */
typedef struct Tune {
    DlcOp *op;
    int k;                                     /* its position in the network */
    const char *sig;                           /* its cache signature */
    int64_t model[2];                          /* its tile before tuning */
    int64_t cand[MAX_CANDIDATES + 1][2];       /* the tiles timed */
    int ncand;
    double us[MAX_CANDIDATES + 1];             /* their times */
    int64_t best[2];                           /* the chosen tile */
    double model_us, best_us;                  /* the times of model and best */
    bool known;                                /* from the cache, or measured */
    bool measured;                             /* in this run */
    int same;                                  /* 1 + the index of an earlier op of
                                                  the same signature, whose
                                                  measurement it shares; 0: none */
} Tune;

/* ---- the machine's identity ------------------------------------------------ */

/* s with its spaces as '_' and without its line end, in arena. */
static const char *word(DlcArena *a, const char *s) {
    char *w = dlc_arena_strdup(a, s);
    w[strcspn(w, "\n")] = 0;
    for (char *p = w; *p; p++)
        if (*p == ' ' || *p == '\t')
            *p = '_';
    return *w ? w : "unknown";
}

/* The first line of path that starts with prefix, after the prefix, or of
 * any line (prefix ""), in arena; "unknown" if none. */
static const char *line_of(DlcArena *a, const char *path, const char *prefix) {
    FILE *f = fopen(path, "r");
    char line[512];
    const char *found = "unknown";
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, prefix, strlen(prefix)) == 0) {
            const char *v = line + strlen(prefix);
            v += strspn(v, " \t:");
            found = word(a, v);
            break;
        }
    if (f)
        fclose(f);
    return found;
}

/* The threads a program uses by default: OpenMP's, OMP_NUM_THREADS or
 * the processors online. */
static int default_threads(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- candidates and signatures ------------------------------------------- */

static const char *signature(DlcArena *a, const DlcOp *op, const DlcTargetCpu *t, int threads,
                             const char *cc, const char *cpu) {
    const DlcType *x = &op->in[0]->type, *y = &op->out[0]->type;
    const int64_t *k = dlc_attr_pair(op, DLC_A_KERNEL), *s = dlc_attr_pair(op, DLC_A_STRIDE),
                  *p = dlc_attr_pair(op, DLC_A_PAD), *d = dlc_attr_pair(op, DLC_A_DILATION);
    DlcOpKind act = dlc_op_fused_activation(op);
    return dlc_arena_printf(
        a, "conv2d in=%lldx%lldx%lld out=%lldx%lldx%lld kernel=%lldx%lld stride=%lldx%lld "
           "pad=%lldx%lld dilation=%lldx%lld epilogue=%s%s%s cb=%lld b=%lld vector=%d "
           "registers=%d threads=%d cc=%s cpu=%s",
        (long long)x->dims[0], (long long)x->dims[1], (long long)x->dims[2],
        (long long)y->dims[0], (long long)y->dims[1], (long long)y->dims[2], (long long)k[0],
        (long long)k[1], (long long)s[0], (long long)s[1], (long long)p[0], (long long)p[1],
        (long long)d[0], (long long)d[1],
        dlc_op_folded_batchnorm(op) >= 0 ? "batchnorm" : dlc_op_bias(op) ? "bias" : "none",
        dlc_attr_bool(op, DLC_A_RESIDUAL) ? ",residual" : "",
        act == DLC_OP_COUNT ? "" : dlc_arena_printf(a, ",%s", dlc_op_info(act)->name),
        (long long)(dlc_value_layout(op->in[0]) ? dlc_attr_int(op, DLC_A_LAYOUT) : 1),
        (long long)dlc_attr_int(op, DLC_A_LAYOUT), t->vector, t->registers, threads, cc, cpu);
}

typedef struct Ranked {
    int64_t nv, pb;
    double time;
} Ranked;

static int by_time(const void *a, const void *b) {
    double x = ((const Ranked *)a)->time, y = ((const Ranked *)b)->time;
    return x < y ? -1 : x > y;
}

/* The tiles to time for u: every legal block, the best MAX_CANDIDATES by
 * the model, and the op's own. */
static void candidates(Tune *u, const DlcTargetCpu *t) {
    const DlcOp *op = u->op;
    int64_t b = dlc_attr_int(op, DLC_A_LAYOUT);
    int64_t cb = dlc_value_layout(op->in[0]) ? b : 1;
    int64_t cob = (op->out[0]->type.dims[0] + b - 1) / b;
    int64_t row = op->out[0]->type.dims[1] * op->out[0]->type.dims[2]; /* the most a row has */
    Ranked *all = malloc(sizeof *all * (size_t)(cob * row + 1));
    if (!all)
        dlc_unreachable("out of memory");
    int n = 0;
    for (int64_t nv = 1; nv <= cob; nv++)
        for (int64_t pb = 1; pb <= row; pb++) {
            double time = dlc_tile_blocked_block(op, t, b, cb, nv, pb);
            if (time > 0) /* else not legal: too many registers, not whole rows */
                all[n++] = (Ranked){nv, pb, time};
        }
    qsort(all, (size_t)n, sizeof *all, by_time);
    u->ncand = 0;
    u->cand[u->ncand][0] = u->model[0], u->cand[u->ncand++][1] = u->model[1];
    for (int i = 0; i < n && u->ncand < MAX_CANDIDATES + 1; i++) {
        if (all[i].nv * b == u->model[0] && all[i].pb == u->model[1])
            continue;
        if (u->ncand == MAX_CANDIDATES) /* the model's own is the extra one */
            break;
        u->cand[u->ncand][0] = all[i].nv * b, u->cand[u->ncand++][1] = all[i].pb;
    }
    free(all);
}

/* ---- the cache --------------------------------------------------------------- */

/* Reads the cache into the ops whose signatures it has; false after a
 * line it cannot parse (an error naming the file and the line).  A
 * missing file is an empty cache.  *text: the file's lines, kept. */
static bool read_cache(DlcCtx *ctx, const char *path, Tune *u, int nu, char **text) {
    *text = NULL;
    size_t size;
    char *buf = dlc_read_file(path, &size);
    if (!buf)
        return errno == ENOENT ||
               (dlc_error(ctx, DLC_NOLOC, "cannot read the autotune cache '%s': %s", path,
                          strerror(errno)),
                false);
    *text = buf;
    int lineno = 0;
    for (char *p = buf; *p;) {
        char *eol = strchr(p, '\n'), *next = eol ? eol + 1 : p + strlen(p);
        size_t len = (size_t)(next - p) - (eol ? 1 : 0);
        lineno++;
        char line[2048];
        if (len >= sizeof line)
            len = sizeof line - 1;
        memcpy(line, p, len);
        line[len] = 0;
        p = next;
        if (line[0] == 0 || line[0] == '#')
            continue;
        char *tail = strstr(line, " tile=");
        long long tr, tc, mr, mc;
        double mus, bus;
        int end = -1;
        if (strncmp(line, "conv2d ", 7) != 0 || !tail ||
            sscanf(tail, " tile=%lldx%lld model=%lldx%lld model_us=%lf best_us=%lf%n", &tr, &tc,
                   &mr, &mc, &mus, &bus, &end) != 6 ||
            tail[end] != 0 || tr < 1 || tc < 1) {
            dlc_error(ctx, DLC_NOLOC, "%s:%d: not an autotune cache line: expected 'conv2d "
                      "SIGNATURE tile=RxC model=RxC model_us=T best_us=T'", path, lineno);
            return false;
        }
        *tail = 0;
        for (int i = 0; i < nu; i++)
            if (!u[i].known && strcmp(u[i].sig, line) == 0) {
                u[i].known = true;
                u[i].best[0] = tr, u[i].best[1] = tc;
                u[i].model_us = mus, u[i].best_us = bus;
            }
    }
    return true;
}

/* The old lines and the new ones into path, through a temporary file. */
static bool write_cache(DlcCtx *ctx, const char *path, const char *old, const Tune *u, int nu) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        dlc_unreachable("open_memstream failed");
    if (old && *old)
        fprintf(f, "%s%s", old, old[strlen(old) - 1] == '\n' ? "" : "\n");
    else
        fprintf(f, "# dlc --autotune: the register blocks of blocked convolutions, measured\n");
    for (int i = 0; i < nu; i++)
        if (u[i].measured)
            fprintf(f, "%s tile=%lldx%lld model=%lldx%lld model_us=%.1f best_us=%.1f\n",
                    u[i].sig, (long long)u[i].best[0], (long long)u[i].best[1],
                    (long long)u[i].model[0], (long long)u[i].model[1], u[i].model_us,
                    u[i].best_us);
    fclose(f);
    bool ok = dlc_write_file(ctx, path, buf, len);
    free(buf);
    return ok;
}

/* ---- the timing program ---------------------------------------------------- */

/* One op's candidates and its timing function, tune_K, into o. */
static void put_op(DlcCtx *ctx, DlcArena *a, Out *o, const Tune *u, int id) {
    const DlcOp *op = u->op;
    const char *name[MAX_CANDIDATES + 1], *scratch[MAX_CANDIDATES + 1];
    for (int c = 0; c < u->ncand; c++) {
        DlcOp copy = *op;
        int64_t *tile = dlc_attrs_at(copy.kind, copy.attrs, DLC_A_TILE)->pair;
        tile[0] = u->cand[c][0], tile[1] = u->cand[c][1];
        name[c] = dlc_cpu_op_function(ctx, a, o, &copy, u->k,
                                      dlc_arena_printf(a, "t%d_c%d", id, c), &scratch[c]);
    }
    put(o, "\n/* %s: %d candidates */\n"
           "static void tune_%d(FILE *out, int threads) {\n"
           "    int64_t max_batch = 1;\n"
           "    (void)max_batch;\n",
        op->out[0]->name, u->ncand, id);
    for (int i = 0; i < op->nin; i++)
        put(o, "    float *a%d = buffer(%lld);\n", i, (long long)dlc_cpu_numel(op->in[i]));
    put(o, "    float *r0 = buffer(%lld);\n"
           "    float *work[%d], *packed[%d];\n"
           "    double us[%d][%d];\n",
        (long long)dlc_cpu_numel(op->out[0]), u->ncand, u->ncand, u->ncand, MAX_ROUNDS);
    for (int c = 0; c < u->ncand; c++) {
        DlcOp copy = *op;
        int64_t *tile = dlc_attrs_at(copy.kind, copy.attrs, DLC_A_TILE)->pair;
        tile[0] = u->cand[c][0], tile[1] = u->cand[c][1];
        put(o, "    {\n    %s"
               "        work[%d] = buffer(w);\n"
               "        packed[%d] = buffer(%lld);\n"
               "        %s_pack(a%d, packed[%d], 0, 1);\n"
               "    }\n",
            scratch[c] ? scratch[c] : "int64_t w = 1;\n", c, c,
            (long long)dlc_cpu_blocked_conv_packed(&copy), name[c], op->nin - op->nparams, c);
    }
    put(o, "    int rounds = 0;\n"
           "    double spent = 0;\n"
           "    for (int r = -%d; r < %d && (r < %d || spent < %g); r++) {\n",
        WARM_ROUNDS, MAX_ROUNDS, MIN_ROUNDS, ROUND_SECONDS);
    for (int c = 0; c < u->ncand; c++) {
        put(o, "        {\n            double t0 = now();\n            %s(1", name[c]);
        for (int i = 0; i < op->nin; i++)
            put(o, ", a%d", i);
        put(o, ", r0, work[%d], threads, packed[%d]);\n"
               "            double dt = now() - t0;\n"
               "            if (r >= 0)\n"
               "                us[%d][r] = dt * 1e6, spent += dt;\n"
               "        }\n",
            c, c, c);
    }
    put(o, "        rounds = r + 1;\n"
           "    }\n"
           "    for (int c = 0; c < %d; c++) {\n"
           "        qsort(us[c], (size_t)rounds, sizeof us[c][0], by_value);\n"
           "        fprintf(out, \"%d %%d %%.3f\\n\", c, us[c][rounds / 2]);\n"
           "        free(work[c]);\n"
           "        free(packed[c]);\n"
           "    }\n",
        u->ncand, id);
    for (int i = 0; i < op->nin; i++)
        put(o, "    free(a%d);\n", i);
    put(o, "    free(r0);\n}\n");
}

static bool write_program(DlcCtx *ctx, DlcArena *a, const char *path, Tune *u, int nu) {
    Out o = {.name = path};
    o.f = open_memstream(&o.buf, &o.len);
    if (!o.f)
        dlc_unreachable("open_memstream failed");
    put(&o, "/* dlc --autotune: the candidate register blocks of each blocked\n"
            " * convolution, timed at batch 1 (codegen/cpu/autotune.c). */\n"
            "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n#include <stdio.h>\n"
            "#include <stdlib.h>\n#include <string.h>\n#include <time.h>\n\n"
            "#include \"dlrt.h\"\n\n"
            "static double now(void) {\n"
            "    struct timespec ts;\n"
            "    clock_gettime(CLOCK_MONOTONIC, &ts);\n"
            "    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;\n}\n\n"
            "static int by_value(const void *a, const void *b) {\n"
            "    double x = *(const double *)a, y = *(const double *)b;\n"
            "    return x < y ? -1 : x > y;\n}\n\n"
            "/* n floats in [0.5, 1.5) (a batchnorm's variance stays positive), at\n"
            " * least one, on a cache line */\n"
            "static float *buffer(int64_t n) {\n"
            "    size_t bytes = ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) / 64 * 64;\n"
            "    float *p = aligned_alloc(64, bytes);\n"
            "    if (!p) {\n"
            "        fprintf(stderr, \"out of memory\\n\");\n"
            "        exit(1);\n"
            "    }\n"
            "    for (int64_t i = 0; i < n; i++)\n"
            "        p[i] = 0.5f + (float)(i * 7919 %% 1000) / 1000;\n"
            "    return p;\n}\n");
    int id = 0;
    for (int i = 0; i < nu; i++)
        if (!u[i].known)
            put_op(ctx, a, &o, &u[i], id++);
    put(&o, "\nint main(int argc, char **argv) {\n"
            "    FILE *out = argc == 2 ? fopen(argv[1], \"w\") : NULL;\n"
            "    if (!out)\n"
            "        return 1;\n"
            "    int threads = dlrt_threads();\n");
    for (int i = 0; i < id; i++)
        put(&o, "    tune_%d(out, threads);\n", i);
    put(&o, "    return fclose(out) != 0;\n}\n");
    fclose(o.f);
    bool ok = dlc_write_file(ctx, path, o.buf, o.len);
    free(o.buf);
    return ok;
}

/* Reads the program's times into the ops it measured. */
static bool read_times(DlcCtx *ctx, const char *path, Tune *u, int nu) {
    FILE *f = fopen(path, "r");
    int got = 0, want = 0;
    for (int i = 0; i < nu; i++)
        want += u[i].known ? 0 : u[i].ncand;
    Tune **ids = calloc((size_t)nu + 1, sizeof *ids);
    int n = 0;
    for (int i = 0; i < nu; i++)
        if (!u[i].known)
            ids[n++] = &u[i];
    int id, c;
    double us;
    while (f && fscanf(f, "%d %d %lf", &id, &c, &us) == 3)
        if (id >= 0 && id < n && c >= 0 && c < ids[id]->ncand)
            ids[id]->us[c] = us, got++;
    if (f)
        fclose(f);
    free(ids);
    if (got != want) {
        dlc_error(ctx, DLC_NOLOC, "--autotune: the timing program reported %d of %d times",
                  got, want);
        return false;
    }
    return true;
}

/* Measures the ops not in the cache: one program for all of them. */
static bool measure(DlcCtx *ctx, DlcArena *a, const DlcAutotuneOptions *opt, const char *dir,
                    Tune *u, int nu) {
    const char *src = dlc_arena_printf(a, "%s/tune.c", dir),
               *exe = dlc_arena_printf(a, "%s/tune", dir),
               *times = dlc_arena_printf(a, "%s/times.txt", dir);
    bool ok = write_program(ctx, a, src, u, nu);
    if (ok) {
        char *argv[96];
        int n = 0;
        for (int i = 0; opt->cc[i] && n < 80; i++)
            argv[n++] = (char *)opt->cc[i];
        argv[n++] = (char *)src;
        for (int i = 0; opt->libs[i] && n < 92; i++)
            argv[n++] = (char *)opt->libs[i];
        argv[n++] = "-o";
        argv[n++] = (char *)exe;
        argv[n] = NULL;
        ok = dlc_run(argv, NULL);
        if (!ok)
            dlc_error(ctx, DLC_NOLOC, "--autotune: the C compiler '%s' failed on the timing "
                      "program", opt->cc[0]);
    }
    if (ok) {
        char *argv[] = {(char *)exe, (char *)times, NULL};
        ok = dlc_run(argv, NULL);
        if (!ok)
            dlc_error(ctx, DLC_NOLOC, "--autotune: the timing program failed");
    }
    ok = ok && read_times(ctx, times, u, nu);
    unlink(src);
    unlink(exe);
    unlink(times);
    for (int i = 0; ok && i < nu; i++) {
        if (u[i].known)
            continue;
        int best = 0;
        for (int c = 1; c < u[i].ncand; c++)
            if (u[i].us[c] < u[i].us[best])
                best = c;
        u[i].best[0] = u[i].cand[best][0], u[i].best[1] = u[i].cand[best][1];
        u[i].model_us = u[i].us[0], u[i].best_us = u[i].us[best];
        u[i].known = u[i].measured = true;
    }
    return ok;
}

/* ---- the entry ------------------------------------------------------------------ */

bool dlc_cpu_autotune(DlcCtx *ctx, DlcModule *m, const DlcAutotuneOptions *opt) {
    DlcTargetCpu t = opt->cpu, host;
    dlc_target_cpu_host(&host);
    if (!t.vector)
        t = host;
    DlcArena a = {0};
    char dir[] = "/tmp/dlc-tune-XXXXXX";
    if (!mkdtemp(dir)) {
        dlc_error(ctx, DLC_NOLOC, "cannot create a temporary folder: %s", strerror(errno));
        return false;
    }
    const char *version = dlc_arena_printf(&a, "%s/cc-version", dir);
    char *argv[] = {(char *)opt->cc[0], "--version", NULL};
    const char *cc = dlc_run(argv, version) ? line_of(&a, version, "") : "unknown";
    unlink(version);
    const char *cpu = line_of(&a, "/proc/cpuinfo", "model name");
    int threads = default_threads();

    Tune *u = NULL;
    int nu = 0, cap = 0;
    for (int i = 0; i < m->nnetworks; i++) {
        DlcNetwork *net = m->networks[i];
        if (dlc_is_derived_network(net->name))
            continue;
        for (int k = 0; k < net->nops; k++) {
            DlcOp *op = net->ops[k];
            if (!dlc_cpu_is_blocked_conv(op))
                continue;
            DLC_PUSH(&a, u, nu, cap, ((Tune){.op = op, .k = k}));
            Tune *v = &u[nu - 1];
            v->sig = signature(&a, op, &t, threads, cc, cpu);
            v->model[0] = dlc_attr_pair(op, DLC_A_TILE)[0];
            v->model[1] = dlc_attr_pair(op, DLC_A_TILE)[1];
        }
    }
    bool ok = true;
    char *old = NULL;
    if (nu && t.vector != host.vector) {
        dlc_error(ctx, DLC_NOLOC, "--autotune measures on this machine, whose vector registers "
                  "are of %d bytes; --target-cpu says %d", host.vector, t.vector);
        ok = false;
    }
    ok = ok && read_cache(ctx, opt->cache, u, nu, &old);
    int missing = 0;
    for (int i = 0; ok && i < nu; i++) {
        /* an op whose signature an earlier one has shares its measurement */
        for (int j = 0; j < i && !u[i].known; j++)
            if (!u[j].known && strcmp(u[i].sig, u[j].sig) == 0)
                u[i].known = true, u[i].same = j + 1;
        if (!u[i].known) {
            candidates(&u[i], &t);
            missing++;
        }
    }
    if (ok)
        fprintf(stderr, "dlc: autotune: %d blocked convolutions, %d measured, cache '%s'\n",
                nu, missing, opt->cache);
    if (ok && missing)
        ok = measure(ctx, &a, opt, dir, u, nu);
    rmdir(dir);
    double model = 0, best = 0;
    for (int i = 0; ok && i < nu; i++) {
        Tune *v = &u[i];
        if (v->same) {
            const Tune *same = &u[v->same - 1];
            v->best[0] = same->best[0], v->best[1] = same->best[1];
            v->model_us = same->model_us, v->best_us = same->best_us;
        }
        int64_t *tile = dlc_attrs_at(v->op->kind, v->op->attrs, DLC_A_TILE)->pair;
        tile[0] = v->best[0], tile[1] = v->best[1];
        model += v->model_us, best += v->best_us;
        fprintf(stderr, "dlc: autotune: %-24s model %3lldx%-3lld %9.1f us  best %3lldx%-3lld "
                "%9.1f us  model/best %.3f\n", v->op->out[0]->name, (long long)v->model[0],
                (long long)v->model[1], v->model_us, (long long)v->best[0],
                (long long)v->best[1], v->best_us, v->best_us > 0 ? v->model_us / v->best_us : 0);
    }
    if (ok && nu)
        fprintf(stderr, "dlc: autotune: total model %.1f us, best %.1f us, model/best %.3f "
                "(batch 1, %d threads)\n", model, best, best > 0 ? model / best : 0, threads);
    if (ok && missing)
        ok = write_cache(ctx, opt->cache, old, u, nu);
    free(old);
    dlc_arena_free(&a);
    return ok;
}
