/* dlc.c — the compiler driver.
 *
 * Reads the command line, reads the input (.dl source or .dlir IR text),
 * runs the pass pipeline with the verifier after every pass, and writes the
 * requested output.  compile_one() is the whole pipeline in one readable
 * function.  Output is built in memory and written only when compilation
 * succeeded, through a temporary file renamed into place, so an error never
 * leaves a half-written or stale -o file behind.  docs/cli.md documents the
 * options. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../codegen/codegen.h"
#include "../frontend/frontend.h"
#include "../passes/passes.h"
#include "dlc_commit.h" /* DLC_COMMIT, written by the build (cmake/commit.cmake) */

/* What --version says, and what a program dlc builds says built it. */
#define DLC_BUILT_BY "dlc " DLC_VERSION " (commit " DLC_COMMIT ")"

typedef enum Emit { EMIT_GUESS, EMIT_IR, EMIT_DOT, EMIT_C, EMIT_EXE, EMIT_PTX } Emit;
typedef enum InputKind { INPUT_GUESS, INPUT_DL, INPUT_DLIR } InputKind;

#define MAX_LIST 64

typedef struct Options {
    const char *input;
    const char *output;          /* NULL: standard output */
    Emit emit;
    InputKind kind;
    const char *passes[MAX_LIST]; /* explicit --passes, NULL-terminated */
    bool passes_given;
    const char *print_after[MAX_LIST];
    int nprint_after;
    bool print_after_all;
    bool split_input;
    const char *include_dirs[MAX_LIST];
    int ninclude;
    bool dtype_given;
    DlcEmitOptions codegen;      /* --dtype, -fno-plan-memory */
    const char *left_out[MAX_LIST]; /* -fno-PASS: passes left out of every pipeline */
    int nleft_out;
    const DlcTarget *devices[MAX_LIST]; /* --target=: the CPU first, then the others */
    int ndevices;
    DlcPassOptions pass;         /* --mem-budget, --target-cpu */
    const char *autotune;        /* --autotune's cache file; NULL without it */
    const char *quantize_skip[MAX_LIST + 1]; /* --quantize-skip, NULL-terminated */
    int nquantize_skip;
} Options;

static void usage(FILE *out) {
    fputs(
        "usage: dlc [options] FILE\n"
        "\n"
        "Compiles a network written in the .dl language (or dlc IR text, .dlir).\n"
        "\n"
        "options:\n"
        "  -o FILE                write the output to FILE (default: standard output)\n"
        "  --emit=KIND            what to write: ir (IR text), dot (Graphviz), ptx (the GPU\n"
        "                         kernels, for inspection), c (NAME.h and\n"
        "                         NAME.c for the CPU, into the folder -o), exe (a program\n"
        "                         that trains and evaluates the network); by default exe\n"
        "                         with -o FILE, ir with -o FILE.dlir or without -o\n"
        "  --target=cpu|cpu,cuda  the devices a program (or --emit=c code) runs on: the\n"
        "                         CPU, or also NVIDIA GPUs (NAME_cuda.c, PTX through\n"
        "                         LLVM's NVPTX backend; ./net --device cuda)\n"
        "  --gpu-arch=sm_NN       the GPU architecture of the PTX (default sm_80; sm_60\n"
        "                         to sm_90)\n"
        "  --gpu-math=f32|tf32|bf16\n"
        "                         the GPU's matrix products (convolutions, dense layers\n"
        "                         and their gradients): f32 on the CUDA cores (default),\n"
        "                         or on the tensor cores with TF32 (10-bit mantissa) or\n"
        "                         bf16 (7-bit) operands; f32 sums and f32 weights either\n"
        "                         way (sm_80 and later; docs/gpu.md)\n"
        "  --dtype=f32|f64        the element type of --emit=c code (default f32; f64\n"
        "                         for exact gradient checks)\n"
        "  --passes=P1,P2,...     run exactly these passes (default: the standard\n"
        "                         pipeline for .dl input, none for .dlir input)\n"
        "  --print-after=P1,...   print the IR to standard error after these passes\n"
        "                         ('elaborate' names the frontend)\n"
        "  --print-after-all      print the IR after the frontend and every pass\n"
        "  --list-passes          list the passes and exit\n"
        "  --list-ops             list the ops and their arguments and exit\n"
        "  --split-input-file     compile each '// -----' separated part on its own\n"
        "  -x dl|dlir             the input's language (default: from its extension)\n"
        "  -I DIR                 also look for imported files in DIR\n",
        out);
    /* two strings: ISO C's compilers need take only 4095 characters in one */
    fputs(
        "  -fno-PASS              leave PASS out of the pipeline (-fno-fuse: every op\n"
        "                         stays separate; -fno-layout: every tensor stays in\n"
        "                         the plain layout; -fno-tile with -fno-layout: every\n"
        "                         convolution calls im2col and BLAS)\n"
        "  --target-cpu=SPEC      the CPU the layout and tile passes choose for, instead\n"
        "                         of this one: l1=SIZE,l2=SIZE,vector=BYTES,registers=N,\n"
        "                         vnni=0|1 (any of them; SIZE with K or M)\n"
        "  --quantize=int8        run the inference network's convolutions and dense\n"
        "                         layers in int8 (the program's calibrate command sets\n"
        "                         the scales; docs/quantization.md)\n"
        "  --quantize-skip=L,...  keep these layers (named as their weights, less\n"
        "                         .weight) in f32\n"
        "  --autotune[=FILE]      time the candidate register blocks of each blocked\n"
        "                         convolution on this machine and use the fastest,\n"
        "                         cached in FILE (default: the output's name and\n"
        "                         .autotune) for later builds (exe and c)\n"
        "  -fno-plan-memory       give every value of the generated code memory of its\n"
        "                         own, instead of sharing it between values that are\n"
        "                         not live at the same time (for comparison)\n"
        "  --mem-budget=BYTES     the most memory each network may need at its train\n"
        "                         section's batch size (parameters, optimizer state and\n"
        "                         activations; K, M or G for KiB, MiB or GiB): cheap\n"
        "                         forward values are recomputed in the backward pass to\n"
        "                         fit, and it is an error if they cannot be\n"
        "  --bucket-size=BYTES    the largest bucket of gradients that data-parallel\n"
        "                         training (mpirun -np K ./net train) sums across the\n"
        "                         ranks at once (K, M or G for KiB, MiB or GiB); by\n"
        "                         default an eighth of the gradients, at least 64K\n"
        "                         (docs/distributed.md)\n"
        "  -Werror                treat warnings as errors\n"
        "  -w                     do not print warnings\n"
        "  --version              print the version and the commit and exit\n"
        "  --help                 print this help and exit\n"
        "\n"
        "FILE may be '-' for standard input.  Exit status: 0 on success, 1 when the\n"
        "input has errors, 2 for bad command-line use.\n",
        out);
}

static void list_passes(void) {
    int n;
    const DlcPass *t = dlc_pass_table(&n);
    for (int i = 0; i < n; i++)
        printf("%-13s %s\n", t[i].name, t[i].summary);
    printf("\ndefault pipeline for .dl input:");
    for (int i = 0; dlc_default_pipeline[i]; i++)
        printf(" %s", dlc_default_pipeline[i]);
    printf("\n");
}

static void list_ops(void) {
    static const char *const types[] = {"int", "float", "bool", "pair"};
    for (int k = 0; k < DLC_OP_COUNT; k++) {
        const DlcOpInfo *op = dlc_op_info((DlcOpKind)k);
        printf("%s(%s", op->name, op->arity < 0 ? "x1, x2, ..." : op->arity == 2 ? "x, y" : "x");
        for (int i = 0; i < op->nattrs; i++) {
            const DlcAttrSpec *s = &op->attrs[i];
            printf(", %s: %s", s->name, types[s->type]);
            if (s->default_from >= 0) {
                printf(" = %s", op->attrs[s->default_from].name);
            } else if (!s->required) {
                char buf[64];
                switch (s->type) {
                case DLC_ATTR_INT: printf(" = %lld", (long long)s->def.i); break;
                case DLC_ATTR_PAIR: printf(" = %lld", (long long)s->def.pair[0]); break;
                case DLC_ATTR_BOOL: printf(" = %s", s->def.b ? "true" : "false"); break;
                case DLC_ATTR_FLOAT:
                    dlc_format_double(buf, sizeof buf, s->def.f);
                    printf(" = %s", buf);
                    break;
                }
            }
        }
        printf(")\n");
    }
}

/* Splits a comma-separated list into out (pointers into s, which is modified). */
static int split_list(char *s, const char **out, int max, int n) {
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n == max - 1) {
            fprintf(stderr, "dlc: error: too many names in a list\n");
            exit(2);
        }
        out[n++] = tok;
    }
    out[n] = NULL;
    return n;
}

static void check_pass_names(const char *const *names, bool allow_elaborate) {
    for (int i = 0; names[i]; i++) {
        if (dlc_pass_lookup(names[i]) || (allow_elaborate && strcmp(names[i], "elaborate") == 0))
            continue;
        int n;
        const DlcPass *t = dlc_pass_table(&n);
        const char *cands[MAX_LIST + 1];
        for (int k = 0; k < n && k < MAX_LIST; k++)
            cands[k] = t[k].name;
        cands[n] = "elaborate";
        const char *guess = dlc_closest(names[i], cands, allow_elaborate ? n + 1 : n);
        fprintf(stderr, "dlc: error: unknown pass '%s'%s%s%s (see --list-passes)\n", names[i],
                guess ? "; did you mean '" : "", guess ? guess : "", guess ? "'?" : "");
        exit(2);
    }
}

/* A positive number of bytes, with an optional K, M or G (KiB, MiB, GiB)
 * suffix; exits with a message otherwise. */
static int64_t parse_bytes(const char *option, const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double unit = 1;
    if (*end && strchr("KMG", *end)) {
        unit = *end == 'K' ? 1024.0 : *end == 'M' ? 1024.0 * 1024 : 1024.0 * 1024 * 1024;
        end += strncmp(end + 1, "iB", 2) == 0 ? 3 : 1;
    }
    v *= unit;
    if (end == s || *end || errno || !(v >= 1 && v <= 9e18)) {
        fprintf(stderr, "dlc: error: %s takes a positive number of bytes (with K, M or G for "
                "KiB, MiB or GiB), not '%s'\n", option, s);
        exit(2);
    }
    return (int64_t)v;
}

/* --target=cpu or cpu,cuda: the devices, each a target of codegen.c's table;
 * the CPU hosts the program and comes first. */
static void parse_devices(const char *arg, Options *o) {
    char list[256];
    snprintf(list, sizeof list, "%s", arg);
    const char *names[MAX_LIST + 1];
    split_list(list, names, MAX_LIST, 0);
    const DlcTarget *cpu = dlc_target_lookup("cpu");
    o->ndevices = 1;
    o->devices[0] = cpu;
    bool has_cpu = false, ok = strlen(arg) < sizeof list; /* not cut short */
    for (int i = 0; names[i] && ok; i++) {
        const DlcTarget *t = dlc_target_lookup(names[i]);
        for (int j = 0; j < i; j++)
            ok &= strcmp(names[j], names[i]) != 0;
        ok &= t != NULL;
        has_cpu |= t == cpu;
        if (ok && t != cpu)
            o->devices[o->ndevices++] = t;
    }
    if (!ok || !has_cpu) {
        fprintf(stderr, "dlc: error: --target takes cpu or cpu,cuda, not '%s'\n", arg);
        exit(2);
    }
    o->codegen.cuda = o->ndevices > 1; /* the CPU's code then links NAME_cuda.c */
}

/* Copies argv into rest without the -fno-PASS (or --fno-PASS) options,
 * whose passes go into o->left_out, checking that PASS is one
 * (-fno-plan-memory, which is not a pass, stays for getopt); returns the
 * number copied. */
static int take_left_out_passes(int argc, char **argv, char **rest, Options *o) {
    int n = 1;
    rest[0] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool takes_next = strcmp(a, "-o") == 0 || strcmp(a, "-x") == 0 || strcmp(a, "-I") == 0;
        if (takes_next && i + 1 < argc) {
            rest[n++] = argv[i++];
            rest[n++] = argv[i];
            continue;
        }
        const char *name = strncmp(a, "-fno-", 5) == 0    ? a + 5
                           : strncmp(a, "--fno-", 6) == 0 ? a + 6
                                                          : NULL;
        if (strcmp(a, "--") == 0) {
            while (i < argc)
                rest[n++] = argv[i++];
            break;
        }
        if (!name || strcmp(name, "plan-memory") == 0) {
            rest[n++] = argv[i];
            continue;
        }
        const char *names[2] = {name, NULL};
        check_pass_names(names, false);
        if (o->nleft_out < MAX_LIST)
            o->left_out[o->nleft_out++] = name;
    }
    rest[n] = NULL;
    return n;
}

static void parse_options(int argc, char **argv, Options *o) {
    enum { OPT_EMIT = 256, OPT_PASSES, OPT_PRINT_AFTER, OPT_PRINT_AFTER_ALL, OPT_LIST_PASSES,
           OPT_LIST_OPS, OPT_SPLIT, OPT_VERSION, OPT_HELP, OPT_WERROR, OPT_DTYPE,
           OPT_NO_PLAN_MEMORY, OPT_MEM_BUDGET, OPT_BUCKET_SIZE, OPT_TARGET, OPT_GPU_ARCH,
           OPT_GPU_MATH, OPT_TARGET_CPU, OPT_AUTOTUNE, OPT_QUANTIZE, OPT_QUANTIZE_SKIP };
    static const struct option longopts[] = {
        {"emit", required_argument, NULL, OPT_EMIT},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"passes", required_argument, NULL, OPT_PASSES},
        {"print-after", required_argument, NULL, OPT_PRINT_AFTER},
        {"print-after-all", no_argument, NULL, OPT_PRINT_AFTER_ALL},
        {"list-passes", no_argument, NULL, OPT_LIST_PASSES},
        {"list-ops", no_argument, NULL, OPT_LIST_OPS},
        {"split-input-file", no_argument, NULL, OPT_SPLIT},
        {"version", no_argument, NULL, OPT_VERSION},
        {"help", no_argument, NULL, OPT_HELP},
        {"Werror", no_argument, NULL, OPT_WERROR},
        {"fno-plan-memory", no_argument, NULL, OPT_NO_PLAN_MEMORY},
        {"target-cpu", required_argument, NULL, OPT_TARGET_CPU},
        {"autotune", optional_argument, NULL, OPT_AUTOTUNE},
        {"mem-budget", required_argument, NULL, OPT_MEM_BUDGET},
        {"bucket-size", required_argument, NULL, OPT_BUCKET_SIZE},
        {"target", required_argument, NULL, OPT_TARGET},
        {"gpu-arch", required_argument, NULL, OPT_GPU_ARCH},
        {"gpu-math", required_argument, NULL, OPT_GPU_MATH},
        {"quantize", required_argument, NULL, OPT_QUANTIZE},
        {"quantize-skip", required_argument, NULL, OPT_QUANTIZE_SKIP},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->codegen.plan_memory = true;
    o->devices[o->ndevices++] = dlc_target_lookup("cpu");
    char **rest = malloc(sizeof *rest * (size_t)(argc + 1));
    if (!rest)
        dlc_unreachable("out of memory");
    argc = take_left_out_passes(argc, argv, rest, o);
    argv = rest;
    o->codegen.gpu_arch = "sm_80";
    int c;
    opterr = 0;
    while ((c = getopt_long_only(argc, argv, "o:x:I:w", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o->output = optarg; break;
        case 'x':
            if (strcmp(optarg, "dl") == 0)
                o->kind = INPUT_DL;
            else if (strcmp(optarg, "dlir") == 0)
                o->kind = INPUT_DLIR;
            else {
                fprintf(stderr, "dlc: error: -x takes dl or dlir, not '%s'\n", optarg);
                exit(2);
            }
            break;
        case 'I':
            if (o->ninclude == MAX_LIST) {
                fprintf(stderr, "dlc: error: too many -I options\n");
                exit(2);
            }
            o->include_dirs[o->ninclude++] = optarg;
            break;
        case 'w': break; /* read again in main, like -Werror */
        case OPT_EMIT:
            if (strcmp(optarg, "ir") == 0)
                o->emit = EMIT_IR;
            else if (strcmp(optarg, "dot") == 0)
                o->emit = EMIT_DOT;
            else if (strcmp(optarg, "c") == 0)
                o->emit = EMIT_C;
            else if (strcmp(optarg, "exe") == 0)
                o->emit = EMIT_EXE;
            else if (strcmp(optarg, "ptx") == 0)
                o->emit = EMIT_PTX;
            else {
                fprintf(stderr, "dlc: error: unknown --emit kind '%s' (use ir, dot, ptx, c or exe)\n", optarg);
                exit(2);
            }
            break;
        case OPT_DTYPE:
            if (strcmp(optarg, "f32") != 0 && strcmp(optarg, "f64") != 0) {
                fprintf(stderr, "dlc: error: --dtype takes f32 or f64, not '%s'\n", optarg);
                exit(2);
            }
            o->codegen.dtype = optarg[1] == '6' ? DLC_F64 : DLC_F32;
            o->dtype_given = true;
            break;
        case OPT_PASSES:
            split_list(optarg, o->passes, MAX_LIST, 0);
            check_pass_names(o->passes, false);
            o->passes_given = true;
            break;
        case OPT_PRINT_AFTER:
            o->nprint_after = split_list(optarg, o->print_after, MAX_LIST, o->nprint_after);
            check_pass_names(o->print_after, true);
            break;
        case OPT_PRINT_AFTER_ALL: o->print_after_all = true; break;
        case OPT_LIST_PASSES: list_passes(); exit(0);
        case OPT_LIST_OPS: list_ops(); exit(0);
        case OPT_SPLIT: o->split_input = true; break;
        case OPT_VERSION: printf("%s\n", DLC_BUILT_BY); exit(0);
        case OPT_HELP: usage(stdout); exit(0);
        case OPT_WERROR: break; /* read again in main, it sits in the context */
        case OPT_NO_PLAN_MEMORY: o->codegen.plan_memory = false; break;
        case OPT_TARGET_CPU: {
            if (!o->pass.cpu.vector)
                dlc_target_cpu_host(&o->pass.cpu);
            const char *why = dlc_target_cpu_parse(optarg, &o->pass.cpu);
            if (why) {
                fprintf(stderr, "dlc: error: --target-cpu '%s': %s\n", optarg, why);
                exit(2);
            }
            break;
        }
        case OPT_AUTOTUNE: o->autotune = optarg ? optarg : ""; break;
        case OPT_QUANTIZE:
            if (strcmp(optarg, "int8") != 0) {
                fprintf(stderr, "dlc: error: --quantize takes int8, not '%s'\n", optarg);
                exit(2);
            }
            o->pass.quantize = DLC_QUANTIZE_INT8;
            break;
        case OPT_QUANTIZE_SKIP:
            o->nquantize_skip = split_list(optarg, o->quantize_skip, MAX_LIST, o->nquantize_skip);
            o->pass.quantize_skip = o->quantize_skip;
            break;
        case OPT_MEM_BUDGET: o->pass.mem_budget = parse_bytes("--mem-budget", optarg); break;
        case OPT_BUCKET_SIZE:
            o->codegen.bucket_bytes = parse_bytes("--bucket-size", optarg);
            break;
        case OPT_TARGET: parse_devices(optarg, o); break;
        case OPT_GPU_ARCH:
            if (!dlc_target_lookup("cuda")->arch_ok(optarg)) {
                fprintf(stderr, "dlc: error: --gpu-arch takes sm_60, sm_61, sm_70, sm_75, sm_80, "
                        "sm_86, sm_87, sm_89 or sm_90, not '%s'\n", optarg);
                exit(2);
            }
            o->codegen.gpu_arch = optarg;
            break;
        case OPT_GPU_MATH:
            if (strcmp(optarg, "f32") == 0)
                o->codegen.gpu_math = DLC_GPU_MATH_F32;
            else if (strcmp(optarg, "tf32") == 0)
                o->codegen.gpu_math = DLC_GPU_MATH_TF32;
            else if (strcmp(optarg, "bf16") == 0)
                o->codegen.gpu_math = DLC_GPU_MATH_BF16;
            else {
                fprintf(stderr, "dlc: error: --gpu-math takes f32, tf32 or bf16, not '%s'\n", optarg);
                exit(2);
            }
            break;
        default:
            if (optopt && optopt < 256)
                fprintf(stderr, "dlc: error: option '-%c' %s\n", optopt,
                        strchr("oxI", optopt) ? "needs an argument" : "is unknown");
            else
                fprintf(stderr, "dlc: error: unknown or incomplete option '%s'\n",
                        argv[optind - 1]);
            fprintf(stderr, "usage: dlc [options] FILE (see dlc --help)\n");
            exit(2);
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, optind == argc ? "dlc: error: no input file\n"
                                       : "dlc: error: more than one input file\n");
        fprintf(stderr, "usage: dlc [options] FILE (see dlc --help)\n");
        exit(2);
    }
    o->input = argv[optind];
    free(rest); /* the options point at the strings, not into it */
    if (o->emit == EMIT_GUESS) {
        size_t n = o->output ? strlen(o->output) : 0;
        bool ir = !o->output || strcmp(o->output, "-") == 0 ||
                  (n > 5 && strcmp(o->output + n - 5, ".dlir") == 0);
        bool dot = n > 4 && strcmp(o->output + n - 4, ".dot") == 0;
        o->emit = ir ? EMIT_IR : dot ? EMIT_DOT : EMIT_EXE;
    }
    if (o->emit == EMIT_EXE && (!o->output || strcmp(o->output, "-") == 0)) {
        fprintf(stderr, "dlc: error: --emit=exe writes a program: name it with -o FILE\n");
        exit(2);
    }
    if (o->dtype_given && o->emit != EMIT_C) {
        fprintf(stderr, "dlc: error: --dtype applies to --emit=c (a program is f32, with an "
                "f64 copy for its gradcheck)\n");
        exit(2);
    }
    if (o->emit == EMIT_C && !o->output) {
        fprintf(stderr, "dlc: error: --emit=c writes files: give their folder with -o DIR\n");
        exit(2);
    }
    if (o->autotune && o->emit != EMIT_C && o->emit != EMIT_EXE) {
        fprintf(stderr, "dlc: error: --autotune applies to a program and to --emit=c\n");
        exit(2);
    }
    if (o->autotune && !*o->autotune) { /* beside the output */
        size_t n = strlen(o->output) + sizeof ".autotune";
        char *path = malloc(n);
        if (!path)
            dlc_unreachable("out of memory");
        snprintf(path, n, "%s.autotune", o->output);
        o->autotune = path; /* lives as long as the options */
    }
    if (o->kind == INPUT_GUESS) {
        size_t n = strlen(o->input);
        o->kind = n > 5 && strcmp(o->input + n - 5, ".dlir") == 0 ? INPUT_DLIR : INPUT_DL;
    }
    o->pass.gpu = o->codegen.cuda || o->emit == EMIT_PTX;
    if (o->codegen.gpu_math != DLC_GPU_MATH_F32 && atoi(o->codegen.gpu_arch + 3) < 80) {
        fprintf(stderr, "dlc: error: --gpu-math=%s needs the tensor cores of sm_80 or later; "
                "--gpu-arch is %s\n", o->codegen.gpu_math == DLC_GPU_MATH_TF32 ? "tf32" : "bf16",
                o->codegen.gpu_arch);
        exit(2);
    }
}

static bool wants_print_after(const Options *o, const char *stage) {
    if (o->print_after_all)
        return true;
    for (int i = 0; i < o->nprint_after; i++)
        if (strcmp(o->print_after[i], stage) == 0)
            return true;
    return false;
}

static void print_after(const Options *o, const DlcModule *m, const char *stage) {
    if (!wants_print_after(o, stage))
        return;
    fprintf(stderr, "// ----- IR after %s -----\n", stage);
    dlc_print_module(stderr, m);
}

/* Creates the output folder of --emit=c if it is not there. */
static bool dlc_make_dir(DlcCtx *ctx, const char *dir) {
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return true;
    if (mkdir(dir, 0777) == 0)
        return true;
    dlc_error(ctx, DLC_NOLOC, "cannot create the folder '%s': %s", dir, strerror(errno));
    return false;
}

/* Appends the words of a space-separated list to argv. */
static int add_words(char **argv, int n, int max, char *list) {
    for (char *w = strtok(list, " "); w && n < max - 1; w = strtok(NULL, " "))
        argv[n++] = w;
    return n;
}

/* Where the runtime's header and libraries are. */
typedef struct RuntimePaths {
    char include[PATH_MAX + 8];      /* "-I" and the folder of dlrt.h */
    char program_lib[PATH_MAX + 32]; /* libdlrt_program.a */
    char lib[PATH_MAX + 32];         /* libdlrt.a */
} RuntimePaths;

/* a and b into buf; false if it does not fit. */
static bool join(char *buf, size_t size, const char *a, const char *b) {
    int n = snprintf(buf, size, "%s%s", a, b);
    return n >= 0 && (size_t)n < size;
}

/* The runtime this dlc goes with.  Run from its build folder
 * (DLC_BUILD_DIR), it is the build's (DLC_RUNTIME_*, set by CMake);
 * anywhere else, dlc has been installed (or its prefix moved), and the
 * runtime is the one installed beside it: DLC_INSTALL_*_REL, relative to
 * the folder of this executable, never the source tree. */
static bool runtime_paths(DlcCtx *ctx, RuntimePaths *rp) {
    char exe[PATH_MAX], here[PATH_MAX], build[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) {
        dlc_error(ctx, DLC_NOLOC, "cannot find the dlc executable (/proc/self/exe): %s",
                  strerror(errno));
        return false;
    }
    exe[k] = '\0';
    *strrchr(exe, '/') = '\0';
    if (realpath(exe, here) && realpath(DLC_BUILD_DIR, build) && strcmp(here, build) == 0)
        return join(rp->include, sizeof rp->include, "-I", DLC_RUNTIME_INCLUDE) &&
               join(rp->program_lib, sizeof rp->program_lib, DLC_RUNTIME_PROGRAM_LIB, "") &&
               join(rp->lib, sizeof rp->lib, DLC_RUNTIME_LIB, "");
    char header[PATH_MAX + 16];
    bool fits = join(rp->include, sizeof rp->include, "-I", exe) &&
                join(header, sizeof header, rp->include + 2, "/" DLC_INSTALL_INCLUDE_REL) &&
                join(rp->include, sizeof rp->include, "-I", header) &&
                join(header, sizeof header, rp->include + 2, "/dlrt.h") &&
                join(rp->program_lib, sizeof rp->program_lib, exe,
                     "/" DLC_INSTALL_LIB_REL "/libdlrt_program.a") &&
                join(rp->lib, sizeof rp->lib, exe, "/" DLC_INSTALL_LIB_REL "/libdlrt.a");
    if (!fits) {
        dlc_error(ctx, DLC_NOLOC, "the folder of dlc is too long a path: '%s'", exe);
        return false;
    }
    const char *missing = access(header, R_OK) != 0            ? header
                          : access(rp->program_lib, R_OK) != 0 ? rp->program_lib
                          : access(rp->lib, R_OK) != 0         ? rp->lib
                                                               : NULL;
    if (missing) {
        dlc_error(ctx, DLC_NOLOC, "the runtime installed with dlc is missing: cannot read '%s' "
                  "(reinstall dlc, or use --emit=c)", missing);
        return false;
    }
    return true;
}

/* The compiler's command line as far as the sources, into argv (of at
 * least 64), as a program is built: the system C compiler ($CC, else cc)
 * at -O3 for this CPU, the runtime's flags and header; returns its length.
 * cflags is the caller's copy of DLC_RUNTIME_CFLAGS, which argv points into. */
static int compiler_argv(char **argv, char *cflags, const RuntimePaths *rp) {
    const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    argv[0] = (char *)cc, argv[1] = "-std=c11", argv[2] = "-O3", argv[3] = "-march=native";
    int n = add_words(argv, 4, 64, cflags);
    argv[n++] = (char *)rp->include;
    return n;
}

/* What follows the sources: libdlrt (after libdlrt_program where
 * program_lib is given) and its libraries, into argv from n; libs is the
 * caller's copy of DLC_RUNTIME_LIBS.  Returns the new length. */
static int library_argv(char **argv, int n, char *libs, const RuntimePaths *rp,
                        const char *program_lib) {
    if (program_lib)
        argv[n++] = (char *)program_lib;
    argv[n++] = (char *)rp->lib;
    n = add_words(argv, n, 60, libs);
    argv[n++] = "-lm";
    return n;
}

/* --autotune: the target's autotune, with the program's compiler. */
static bool autotune(DlcCtx *ctx, DlcModule *m, const Options *o, const DlcTarget *target) {
    RuntimePaths rp;
    if (!runtime_paths(ctx, &rp))
        return false;
    char cflags[] = DLC_RUNTIME_CFLAGS, libs[] = DLC_RUNTIME_LIBS;
    char *cc[64], *lib[64];
    cc[compiler_argv(cc, cflags, &rp)] = NULL;
    lib[library_argv(lib, 0, libs, &rp, NULL)] = NULL;
    DlcAutotuneOptions opt = {.cache = o->autotune, .cpu = o->pass.cpu,
                              .cc = (const char *const *)cc, .libs = (const char *const *)lib};
    /* the verifier checks the tiles a cache file gave (check_tile) */
    return target->autotune(ctx, m, &opt) && dlc_verify(ctx, m);
}

/* --emit=exe: the C target into a temporary folder, a main that calls
 * dlrt_main, the system C compiler ($CC, else cc) at -O3 for this CPU,
 * libdlrt, and a rename into place.  Paths to the runtime: runtime_paths. */
static bool build_program(DlcCtx *ctx, const DlcModule *m, const Options *o,
                          const char *output) {
    const DlcEmitOptions *opt = &o->codegen;
    const DlcTarget *host = o->devices[0];
    struct stat st;
    if (stat(output, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* renaming a program over /dev/null would replace the device */
        dlc_error(ctx, DLC_NOLOC, "cannot write a program to '%s': it is not a regular file "
                  "(for IR, give --emit=ir)", output);
        return false;
    }
    const DlcNetwork *net = NULL;
    for (int i = 0; i < m->nnetworks; i++) {
        const char *name = m->networks[i]->name;
        if (dlc_is_derived_network(name))
            continue;
        if (net) {
            dlc_error(ctx, m->networks[i]->loc, "a program is built from one network; this file "
                      "has '%s' and '%s' (use --emit=c for several)", net->name, name);
            return false;
        }
        net = m->networks[i];
    }
    if (!net) {
        dlc_error(ctx, DLC_NOLOC, "the file has no network to build a program from");
        return false;
    }
    char dir[] = "/tmp/dlc-XXXXXX";
    if (!mkdtemp(dir)) {
        dlc_error(ctx, DLC_NOLOC, "cannot create a temporary folder: %s", strerror(errno));
        return false;
    }
    char cfile[300], mainfile[300], tmp_out[4200], inc[400];
    snprintf(cfile, sizeof cfile, "%s/%s.c", dir, net->name);
    snprintf(mainfile, sizeof mainfile, "%s/main.c", dir);
    snprintf(tmp_out, sizeof tmp_out, "%s.tmp%ld", output, (long)getpid());
    snprintf(inc, sizeof inc, "-I%s", dir);
    bool ok = host->is_program(m, net);
    if (!ok)
        dlc_error(ctx, net->loc, "network '%s' cannot be a program yet: the program trains "
                  "and evaluates classifiers (one f32 input, one output, a train section "
                  "with loss cross_entropy); use --emit=c to embed it", net->name);
    /* the network in f32, and in f64 for the program's gradcheck */
    DlcEmitOptions f32 = *opt, f64 = *opt;
    f32.dtype = DLC_F32, f32.suffix = NULL;
    f64.dtype = DLC_F64, f64.suffix = "_f64";
    f64.cuda = false;
    ok = ok && host->emit(ctx, m, &f32, dir) && host->emit(ctx, m, &f64, dir);
    for (int i = 1; ok && i < o->ndevices; i++) /* the other devices' code beside it */
        ok = o->devices[i]->emit(ctx, m, &f32, dir);
    char hfile[300], cfile64[300], hfile64[300], cudafile[300];
    snprintf(cudafile, sizeof cudafile, "%s/%s_cuda.c", dir, net->name);
    snprintf(hfile, sizeof hfile, "%s/%s.h", dir, net->name);
    snprintf(cfile64, sizeof cfile64, "%s/%s_f64.c", dir, net->name);
    snprintf(hfile64, sizeof hfile64, "%s/%s_f64.h", dir, net->name);
    FILE *f = ok ? fopen(mainfile, "w") : NULL;
    if (f) {
        fprintf(f, "/* The program's main, written by dlc. */\n#include \"%s.h\"\n"
                   "#include \"%s_f64.h\"\n\n"
                   "int main(int argc, char **argv) {\n"
                   "    DlrtModel model = %s_model;\n"
                   "    model.check = &%s_f64_check;\n"
                   "    model.dlc = \"" DLC_BUILT_BY "\";\n"
                   "%s%s%s"
                   "    return dlrt_main(argc, argv, &model);\n}\n",
                net->name, net->name, net->name, net->name, opt->cuda ? "    model.cuda = " : "",
                opt->cuda ? net->name : "", opt->cuda ? "_cuda_model();\n" : "");
        ok = fclose(f) == 0;
    } else if (ok) {
        dlc_error(ctx, DLC_NOLOC, "cannot write '%s': %s", mainfile, strerror(errno));
        ok = false;
    }
    RuntimePaths rp;
    ok = ok && runtime_paths(ctx, &rp);
    if (ok) {
        char cflags[] = DLC_RUNTIME_CFLAGS, libs[] = DLC_RUNTIME_LIBS;
        char *argv[64];
        int n = compiler_argv(argv, cflags, &rp);
        const char *cc = argv[0];
        argv[n++] = inc;
        argv[n++] = cfile;
        argv[n++] = cfile64;
        if (opt->cuda)
            argv[n++] = cudafile;
        argv[n++] = mainfile;
        n = library_argv(argv, n, libs, &rp, rp.program_lib);
        argv[n++] = "-o";
        argv[n++] = tmp_out;
        argv[n] = NULL;
        ok = dlc_run(argv, NULL);
        if (!ok)
            dlc_error(ctx, DLC_NOLOC, "the C compiler '%s' failed on the generated code (%s)", cc,
                      cfile);
        else if (rename(tmp_out, output) != 0) {
            dlc_error(ctx, DLC_NOLOC, "cannot write '%s': %s", output, strerror(errno));
            ok = false;
        }
    }
    unlink(tmp_out);
    unlink(mainfile);
    unlink(cfile);
    unlink(hfile);
    unlink(cfile64);
    unlink(hfile64);
    unlink(cudafile);
    if (ok || !getenv("DLC_KEEP_TEMPS"))
        rmdir(dir);
    return ok;
}

/* Runs the named passes, verifying after each and printing as asked. */
static bool run_passes(DlcCtx *ctx, const Options *o, DlcModule *m, const char *const *names,
                       int errors) {
    for (int i = 0; names[i]; i++) {
        const DlcPass *pass = dlc_pass_lookup(names[i]);
        if (!pass->run(ctx, m, &o->pass) || ctx->nerrors > errors)
            return false;
        if (!dlc_verify(ctx, m))
            dlc_unreachable("pass '%s' produced IR that does not verify", pass->name);
        print_after(o, m, pass->name);
    }
    return true;
}

/* names less the passes -fno-PASS left out, into out (NULL-terminated). */
static void leave_out(const Options *o, const char *const *names, const char **out) {
    int n = 0;
    for (int i = 0; names[i] && n < MAX_LIST; i++) {
        bool left = false;
        for (int k = 0; k < o->nleft_out; k++)
            left |= strcmp(names[i], o->left_out[k]) == 0;
        if (!left)
            out[n++] = names[i];
    }
    out[n] = NULL;
}

/* The pipeline: read, verify, run passes (verifying after each), emit. */
static bool compile_one(DlcCtx *ctx, const Options *o, int file, FILE *out) {
    int errors = ctx->nerrors;
    DlcModule *m;
    if (o->kind == INPUT_DLIR) {
        m = dlc_parse_ir(ctx, file);
        if (m && !dlc_verify(ctx, m)) {
            dlc_module_free(m);
            m = NULL;
        }
    } else {
        DlcFrontendOptions fo = {.include_dirs = o->include_dirs, .ninclude = o->ninclude};
        m = dlc_frontend_compile(ctx, file, &fo);
    }
    if (!m)
        return false;
    print_after(o, m, "elaborate");

    const char *const *passes = o->passes_given ? o->passes
                                : o->kind == INPUT_DL ? dlc_default_pipeline
                                : (const char *const[]){NULL};
    /* the code's target: the host's for C and programs, the GPU's for PTX */
    const DlcTarget *target = o->emit == EMIT_C || o->emit == EMIT_EXE ? o->devices[0]
                              : o->emit == EMIT_PTX                    ? dlc_target_for_emit("ptx")
                                                                       : NULL;
    /* then the target's own passes (the training step), unless the user
       chose the passes; -fno-PASS leaves PASS out of both pipelines */
    const char *pipeline[MAX_LIST + 1], *target_passes[MAX_LIST + 1];
    leave_out(o, passes, pipeline);
    leave_out(o, target ? target->passes : (const char *const[]){NULL}, target_passes);
    if (!run_passes(ctx, o, m, pipeline, errors) ||
        (target && !o->passes_given && !run_passes(ctx, o, m, target_passes, errors))) {
        dlc_module_free(m);
        return false;
    }
    if (target) {
        /* --autotune: the tiles measured, after the passes chose theirs */
        bool ok = !o->autotune || !target->autotune || autotune(ctx, m, o, target);
        if (ok && o->emit == EMIT_EXE)
            ok = build_program(ctx, m, o, o->output);
        else if (ok && target->emit_file)
            ok = target->emit_file(ctx, m, &o->codegen, o->output ? o->output : "-");
        else if (ok) {
            ok = dlc_make_dir(ctx, o->output);
            for (int i = 0; ok && i < o->ndevices; i++)
                ok = o->devices[i]->emit(ctx, m, &o->codegen, o->output);
        }
        dlc_module_free(m);
        return ok && ctx->nerrors == errors;
    }
    if (o->emit == EMIT_DOT)
        dlc_print_dot(out, m);
    else
        dlc_print_module(out, m);
    dlc_module_free(m);
    return ctx->nerrors == errors;
}

/* With --split-input-file: part k of the text, with every other line blanked
 * so that line numbers in diagnostics stay those of the whole file. */
static char *split_part(const char *text, size_t size, int k, int *nparts, size_t *out_size) {
    char *part = malloc(size + 1);
    if (!part)
        dlc_unreachable("out of memory");
    int cur = 0;
    size_t n = 0;
    for (const char *p = text; p < text + size;) {
        const char *eol = memchr(p, '\n', (size_t)(text + size - p));
        const char *next = eol ? eol + 1 : text + size;
        bool marker = strncmp(p, "// -----", 8) == 0;
        if (marker)
            cur++;
        if (cur == k && !marker) {
            memcpy(part + n, p, (size_t)(next - p));
            n += (size_t)(next - p);
        } else if (eol) {
            part[n++] = '\n';
        }
        p = next;
    }
    part[n] = 0;
    *nparts = cur + 1;
    *out_size = n;
    return part;
}

/* Writes the output buffer to path (dlc_write_file: atomically); to
 * standard output without a path or for "-" (as --emit=ptx -o -). */
static bool write_output(DlcCtx *ctx, const char *path, const char *buf, size_t len) {
    if (!path || strcmp(path, "-") == 0) {
        fwrite(buf, 1, len, stdout);
        return fflush(stdout) == 0;
    }
    return dlc_write_file(ctx, path, buf, len);
}

int main(int argc, char **argv) {
    Options o;
    parse_options(argc, argv, &o);
    DlcCtx ctx;
    dlc_ctx_init(&ctx, stderr);
    for (int i = 1; i < argc; i++) {
        ctx.werror |= strcmp(argv[i], "-Werror") == 0 || strcmp(argv[i], "--Werror") == 0;
        ctx.no_warnings |= strcmp(argv[i], "-w") == 0;
    }
    size_t size;
    char *text = dlc_read_file(o.input, &size);
    if (!text) {
        fprintf(stderr, "dlc: error: cannot read '%s': %s\n", o.input, strerror(errno));
        dlc_ctx_free(&ctx);
        return 1;
    }

    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out)
        dlc_unreachable("open_memstream failed");
    bool ok = true;
    if (!o.split_input) {
        int file = dlc_ctx_add_source(&ctx, o.input, text, size, o.kind == INPUT_DLIR);
        ok = compile_one(&ctx, &o, file, out);
    } else {
        int nparts = 1, errors = 0;
        for (int k = 0; k < nparts; k++) {
            /* each part is a separate compilation, with its own error limit */
            errors += ctx.nerrors;
            ctx.nerrors = ctx.nwerrors = 0;
            size_t psize;
            char *part = split_part(text, size, k, &nparts, &psize);
            int file = dlc_ctx_add_source(&ctx, o.input, part, psize, o.kind == INPUT_DLIR);
            if (k)
                fputs("// -----\n", out);
            ok &= compile_one(&ctx, &o, file, out);
        }
        ctx.nerrors += errors;
        free(text);
    }
    fclose(out);
    if (ctx.nerrors)
        ok = false;
    if (!ok) {
        if (o.output)
            fprintf(stderr, "dlc: %s not written because of errors\n", o.output);
    } else if (o.emit != EMIT_C && o.emit != EMIT_EXE && o.emit != EMIT_PTX) { /* those write their own files */
        ok = write_output(&ctx, o.output, buf, len);
    }
    free(buf);
    dlc_ctx_free(&ctx);
    return ok ? 0 : 1;
}
