/* program.c — the command line of a generated program.
 *
 *   ./lenet5 train [--data DIR] [--epochs N] [--batch N] [--lr X] [--clip X] [--seed N]
 *                  [--limit N] [--save FILE] [--resume FILE] [--log FILE.csv] [--workers N]
 *   ./lenet5 eval --weights FILE [--data DIR] [--batch N] [--workers N]
 *   ./lenet5 predict --weights FILE [--batch N] INPUT...
 *   ./lenet5 bench [--mode train|infer|step] [--batch N] [--iters N] [--warmup N] [--lr X] [--clip X]
 *                  [--data DIR] [--workers N]
 *   ./lenet5 gradcheck [--batch N] [--seed N] [--weights FILE] [--tolerance X]
 *   ./lenet5 check [--batch N] [--seed N] [--weights FILE] [--tolerance X] [--data DIR] [--mode train|infer]
 *                  [--lr X] [--clip X]
 *   ./lenet5 info [--batch N] [--ranks K]
 *   mpirun -np K ./lenet5 train ... [--timeout S]   (distributed.c)
 *   every command: [--device cpu|cuda] [--threads N] [--report FILE.json]
 *
 * The generated code hands dlrt_main a DlrtModel: what it knows of the
 * network, the train section's defaults, and its API.  This file parses
 * the command line (each flag belongs to the commands listed beside it in
 * `flags`, and is refused elsewhere rather than silently ignored), sets
 * the kernels' thread count, picks the table of the device (--device cuda
 * runs a command on model->cuda, the same network's GPU code, with the
 * same API), runs the command and writes the --report every command
 * shares; the commands themselves live in train.c, predict.c, bench.c,
 * gradcheck.c and check.c (program.h), except `info`, which is a few
 * printfs.  docs/program.md lists every flag and every key of the report.
 *
 * This is, with those files, libdlrt_program: the one part of the runtime
 * that prints and decides exit statuses, the program's main, which a
 * product that embeds a network does without. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "program.h"

/* The commands, as bits, so that a flag can name those it belongs to. */
enum {
    TRAIN = 1, EVAL = 2, PREDICT = 4, BENCH = 8, INFO = 16, GRADCHECK = 32, CHECK = 64,
    SAMPLE = 128, CALIBRATE = 256, EVERY = 511
};

/* More threads than this is a typing mistake, not a machine. */
#define MAX_THREADS 1024

/* ---- the commands ---------------------------------------------------------- */

/* An activation plan's size for a batch, in bytes of floats, and in MiB. */
static long long plan_bytes(DlrtPlanSize size, int64_t batch) {
    return (long long)(size.per_sample * batch + size.fixed) * (long long)sizeof(float);
}

static double plan_mib(DlrtPlanSize size, int64_t batch) {
    return (double)plan_bytes(size, batch) / (1 << 20);
}

/* info --ranks K: the gradient buckets of data-parallel training, and what
 * each rank sends of them per step (docs/distributed.md). */
static void bucket_plan(const DlrtModel *m, int64_t ranks) {
    printf("\ndata-parallel training on %lld ranks (mpirun -np %lld): ", (long long)ranks,
           (long long)ranks);
    if (!m->train_step_dist) {
        printf("this network has no distributed step\n");
        return;
    }
    printf("gradients of %.1f KiB in %d bucket%s, each summed as soon as the backward pass "
           "completes it\n", (double)m->grad_floats * 4 / 1024, m->nbuckets,
           m->nbuckets == 1 ? "" : "s");
    printf("  bucket        KiB  per rank KiB  complete after                               "
           "gradients\n");
    for (int b = 0; b < m->nbuckets; b++) {
        const DlrtBucket *k = &m->buckets[b];
        double kib = (double)k->count * 4 / 1024;
        printf("  %6d %10.1f %13.1f  %-44s %s\n", b, kib, kib / (double)ranks, k->after,
               k->tensors);
    }
    /* a reduce-scatter and an all-gather: 2 (K - 1) / K of the buffer out
       and in, in 2 (K - 1) messages per bucket */
    printf("per step, each rank sends and receives %.1f KiB in %lld messages%s\n",
           (double)m->grad_floats * 4 / 1024 * 2 * (double)(ranks - 1) / (double)ranks,
           (long long)(2 * (ranks - 1) * m->nbuckets),
           ranks > 1 ? "" : " (one rank: none)");
    /* the GPU's step: the same buckets, NCCL's sums (whether it loads here) */
    const DlrtModel *gpu = m->train_step_dist_cuda ? m : m->cuda;
    if (gpu && gpu->train_step_dist_cuda) {
        char why[512];
        DlrtNccl *n = dlrt_nccl_load(why, sizeof why);
        int v = n ? dlrt_nccl_version(n) : 0;
        printf("with --device cuda: one GPU per rank, each bucket summed by NCCL's ncclAllReduce "
               "on a stream of its own; ");
        if (n)
            printf("NCCL %d.%d.%d loads here (%s)\n", v / 10000, v / 100 % 100, v % 100,
                   dlrt_nccl_loaded(n));
        else
            printf("no NCCL here (%s): only --device cpu trains under mpirun\n", why);
        dlrt_nccl_close(n);
    }
}

/* info --weights of an int8 program: each layer's scales in the
 * checkpoint, and the SQNRs calibrate recorded in it; false after a
 * message. */
static bool quant_info(const DlrtModel *m, const Options *o) {
    const DlrtQuant *q = m->quant;
    void *net = NULL;
    DlrtMeta *meta = NULL;
    int nmeta = 0;
    DlrtError err;
    if (m->create(&net, 1, 0, &err) != DLRT_OK ||
        m->load(net, o->weights, &meta, &nmeta, &err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, err.message);
        if (net)
            m->free(net);
        return false;
    }
    const char *wsqnr = "", *asqnr = "", *scores = NULL, *calib = NULL;
    for (int i = 0; i < nmeta; i++) {
        if (strcmp(meta[i].key, "sqnr_weights") == 0)
            wsqnr = meta[i].value;
        else if (strcmp(meta[i].key, "sqnr_activations") == 0)
            asqnr = meta[i].value;
        else if (strcmp(meta[i].key, "sqnr_scores") == 0)
            scores = meta[i].value;
        else if (strcmp(meta[i].key, "calibration") == 0)
            calib = meta[i].value;
    }
    int64_t bytes = 0;
    for (int i = 0; i < q->ninfer; i++) {
        DlrtTensor t = m->tensor(net, i);
        int64_t count = 1;
        for (int d = 0; d < t.rank; d++)
            count *= t.dims[d];
        bytes += count * (t.dtype == DLRT_I8 ? 1 : 4);
    }
    printf("\nint8 weights %s (calibration: %s): %.1f KiB of tensors\n", o->weights,
           calib ? calib : "not recorded", (double)bytes / 1024);
    printf("  %-24s weight scales          input scale  output scale  weight SQNR\n", "layer");
    for (int l = 0; l < q->nlayers; l++) {
        const int *ls = q->layer_scales + 3 * l;
        DlrtTensor w = m->tensor(net, ls[0]);
        float lo = INFINITY, hi = 0;
        for (int64_t i = 0; i < w.dims[0]; i++) {
            float v = ((const float *)w.data)[i];
            lo = v < lo ? v : lo, hi = v > hi ? v : hi;
        }
        char out[32] = "f32 scores";
        if (ls[2] >= 0)
            snprintf(out, sizeof out, "%.6g", (double)*(const float *)m->tensor(net, ls[2]).data);
        /* the layer's figure in "name=value ..." */
        char key[160], sq[32] = "-";
        snprintf(key, sizeof key, "%s=", q->layers[l]);
        for (const char *p = wsqnr; (p = strstr(p, key)); p++)
            if (p == wsqnr || p[-1] == ' ') {
                snprintf(sq, sizeof sq, "%.*s dB", (int)strcspn(p + strlen(key), " "),
                         p + strlen(key));
                break;
            }
        printf("  %-24s %.4g to %-12.4g %11.6g  %12s  %11s\n", q->layers[l], (double)lo,
               (double)hi, (double)*(const float *)m->tensor(net, ls[1]).data, out, sq);
    }
    if (*asqnr)
        printf("activations' SQNR (dB): %s\n", asqnr);
    if (scores)
        printf("scores against the f32 network's: SQNR %s\n", scores);
    dlrt_meta_free(meta, nmeta);
    m->free(net);
    return true;
}

static int info(const DlrtModel *m, const Options *o) {
    double start = dlrt_clock();
    if (o->weights && !m->quant) {
        fprintf(stderr, "%s: info --weights is for an int8 program (dlc --quantize=int8)\n",
                m->name);
        return 2;
    }
    printf("network %s (from %s)\ninput [", m->name, m->source);
    for (int i = 0; i < m->rank; i++)
        printf("%s%lld", i ? ", " : "", (long long)m->dims[i]);
    if (m->vocab > 0)
        printf("] token ids below %lld, ", (long long)m->vocab);
    else
        printf("], ");
    if (m->steps > 1)
        printf("%lld classes at each of %lld steps\n\nlayers:\n%s\n", (long long)m->classes,
               (long long)m->steps, m->layers);
    else
        printf("%lld classes\n\nlayers:\n%s\n", (long long)m->classes, m->layers);
    printf("trainable parameters: %lld\n", (long long)m->trainable);
    printf("optimizer: %s\n", m->optimizer);
    if (m->set_clip)
        printf("gradient clipping: to a total norm of %g (--clip)\n", m->clip);
    if (m->reset_state)
        printf("stateful: each chunk of %lld steps starts from the state the last ended in; "
               "data read as --batch streams, gradients truncated at the chunk\n",
               (long long)m->dims[0]);
    /* what the table says, without opening the GPU */
    if (strcmp(dlrt_device_name(m), "cpu") != 0)
        printf("device: %s\n", dlrt_device_name(m));
    else
        printf("device: cpu (%s)\n", m->cuda
                   ? "this program runs on an NVIDIA GPU too: --device cuda"
                   : "this program was built for the CPU only");
    const char *forced = getenv("OPENBLAS_CORETYPE");
    printf("threads: %d; OpenBLAS kernels: %s%s%s\n", dlrt_threads(), dlrt_blas_core(),
           forced ? ", from OPENBLAS_CORETYPE=" : "", forced ? forced : "");
    printf("memory for batches of %lld: %.1f MiB (parameters, optimizer state, activations, "
           "scratch)\n", (long long)o->batch, (double)m->memory(o->batch) / (1 << 20));
    printf("activations: %.1f MiB planned; %.1f MiB with a slot for every value; "
           "%.1f MiB live at once at most\n", plan_mib(m->arena, o->batch),
           plan_mib(m->naive, o->batch), plan_mib(m->lower_bound, o->batch));
    printf("compiled by: %s\n", m->dlc ? m->dlc : "dlc (version not recorded)");
    if (o->ranks > 0)
        bucket_plan(m, o->ranks);
    if (m->quant)
        printf("int8: %d layers in int8 (dlc --quantize=int8); calibrate sets their scales\n",
               m->quant->nlayers);
    if (o->weights && !quant_info(m, o))
        return 1;
    Report r = dlrt_report_new("info");
    r.seconds = dlrt_clock() - start;
    return dlrt_report_write(m, o, &r) ? 0 : 1;
}

typedef struct Command {
    const char *name;
    unsigned bit;
    int (*run)(const DlrtModel *m, const Options *o);
} Command;

static const Command commands[] = {
    {"train", TRAIN, dlrt_train_command},
    {"eval", EVAL, dlrt_eval_command},
    {"predict", PREDICT, dlrt_predict_command},
    {"bench", BENCH, dlrt_bench_command},
    {"gradcheck", GRADCHECK, dlrt_gradcheck_command},
    {"check", CHECK, dlrt_check_command},
    {"info", INFO, info},
    {"sample", SAMPLE, dlrt_sample_command},
    {"calibrate", CALIBRATE, dlrt_calibrate_command},
};

/* ---- parsing ------------------------------------------------------------- */

/* Every flag takes a value, and belongs to the commands in its mask. */
static const struct {
    const char *name;
    unsigned commands;
} flags[] = {
    {"--batch", EVERY}, {"--threads", EVERY}, {"--report", EVERY}, {"--device", EVERY},
    {"--data", TRAIN | EVAL | CHECK | BENCH | CALIBRATE}, {"--epochs", TRAIN}, {"--limit", TRAIN},
    {"--lr", TRAIN | BENCH | CHECK}, {"--clip", TRAIN | BENCH | CHECK},
    {"--seed", TRAIN | BENCH | GRADCHECK | CHECK | SAMPLE},
    {"--save", TRAIN | CALIBRATE}, {"--resume", TRAIN}, {"--log", TRAIN},
    {"--weights", EVAL | PREDICT | GRADCHECK | CHECK | SAMPLE | CALIBRATE | INFO},
    {"--mode", BENCH | CHECK}, {"--samples", CALIBRATE}, {"--method", CALIBRATE},
    {"--iters", BENCH}, {"--warmup", BENCH}, {"--tolerance", GRADCHECK | CHECK},
    {"--prime", SAMPLE}, {"--length", SAMPLE}, {"--temperature", SAMPLE},
    {"--workers", TRAIN | EVAL | BENCH}, {"--timeout", TRAIN}, {"--ranks", INFO},
};

/* The train section's data: an IDX folder, a folder of images, a text. */
static const char *default_data(const DlrtModel *m) {
    return m->data ? m->data : m->images ? m->images->path : m->text;
}

/* The threads to use without --threads: one per online CPU. */
static int64_t default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
}

static int usage(const DlrtModel *m, FILE *out) {
    char clip[96] = "; this network was compiled without clipping";
    if (m->set_clip)
        snprintf(clip, sizeof clip, " (%g; 0: none)", m->clip);
    fprintf(out,
            "usage: %s COMMAND [options]\n"
            "\n"
            "The network '%s' (compiled from %s by dlc).\n"
            "\n"
            "commands:\n"
            "  train             train on an IDX folder's train split, evaluating on its test\n"
            "                    split after every epoch\n"
            "  eval              evaluate saved weights on the test split\n"
            "  predict INPUT...  classify the images of IDX, .npy or PGM files with saved weights\n"
            "  bench             time training or inference steps on random data\n"
            "  gradcheck         compare the gradients with finite differences (in f64) on a\n"
            "                    small random batch, and the f32 gradients with the f64 ones\n"
            "  check             run one training step on the CPU and on the GPU from the same\n"
            "                    weights and compare the gradients and the updated tensors\n"
            "  info              the network's layers, parameters and memory\n"
            "  sample            write text with a language model's saved weights\n"
            "  calibrate         an int8 program (dlc --quantize=int8): its scales and\n"
            "                    weights from f32 weights and data, as an int8 checkpoint\n"
            "\n"
            "options of every command:\n"
            "  --device DEVICE    cpu or cuda (an NVIDIA GPU): where the network runs (cpu)%s\n"
            "  --batch N          samples per step (%lld)\n"
            "  --threads N        threads of the kernels, 1 to %d (%lld: the online CPUs)\n"
            "  --report FILE.json what the command measured, as one JSON object\n"
            "  --help\n"
            "  --version          the network, its source and the dlc that compiled it\n"
            "\n"
            "train and eval (defaults from the network's train section):\n"
            "  --data DIR         IDX folder (train-images-idx3-ubyte[.gz], ...), a folder\n"
            "                     of images per class (images(...) in the train section), or\n"
            "                     a language model's UTF-8 text file or folder%s%s%s\n"
            "  --epochs N         passes over the training data (%lld); with --resume, more\n"
            "  --limit N          train on the first N samples of the train split only\n"
            "  --lr X             learning rate (%g)\n"
            "  --clip X           scale the gradients down to a total norm of X before each\n"
            "                     update%s\n"
            "  --seed N           seed of initialization and shuffling (%llu)\n"
            "  --save FILE        write the weights and optimizer state after every epoch\n"
            "  --resume FILE      go on from a checkpoint, at the epoch it records\n"
            "  --log FILE.csv     one line per epoch: losses, accuracy, speed\n"
            "  --weights FILE     eval: the weights to evaluate\n"
            "  --workers N        images(...): threads decoding images (the CPUs, up to 8)\n",
            m->name, m->name, m->source,
            m->cuda ? "" : ";\n                     this program was built for the CPU only",
            (long long)m->batch, MAX_THREADS,
            (long long)default_threads(), default_data(m) ? " (" : "",
            default_data(m) ? default_data(m) : "", default_data(m) ? ")" : "",
            (long long)m->epochs, m->lr, clip, (unsigned long long)m->seed);
    /* a second literal: ISO C's compilers need take no longer one */
    fprintf(out,
            "  --timeout S        under mpirun (mpirun -np K %s train: data-parallel\n"
            "                     training), the seconds a rank waits for the others\n"
            "                     before it stops the job (%d)\n"
            "\n"
            "info:\n"
            "  --ranks K          also the gradient buckets of data-parallel training on K\n"
            "                     ranks\n"
            "  --weights FILE     an int8 program: each layer's scales and SQNR in this\n"
            "                     checkpoint of calibrate\n"
            "\n"
            "calibrate (an int8 program):\n"
            "  --weights FILE     the f32 weights (a checkpoint of the f32 program)\n"
            "  --data DIR         the IDX folder whose train split it runs on\n"
            "  --samples N        the first N samples of it (1000), at least 2\n"
            "  --method M         minmax, percentile (99.99%%) or entropy (TensorRT's KL\n"
            "                     divergence) (minmax)\n"
            "  --save FILE        the int8 checkpoint to write\n"
            "\n"
            "predict:\n"
            "  --weights FILE     the weights to classify with\n"
            "\n"
            "bench:\n"
            "  --mode MODE        train (a training step), infer (inference only) or step\n"
            "                     (one step of a sequence network's step form) (train)\n"
            "  --iters N          timed iterations (100)\n"
            "  --warmup N         untimed iterations before them (10)\n"
            "  --lr X, --seed N   as for train; the seed also draws the random data\n"
            "  --clip X           as for train\n"
            "  --data DIR         images(...): also time the loader alone on this folder\n"
            "  --workers N        its threads\n"
            "\n"
            "gradcheck:\n"
            "  --batch N          samples in the random batch (%d)\n"
            "  --seed N           seed of the weights, the batch and the entries checked\n"
            "  --weights FILE     check at these weights instead of fresh ones\n"
            "  --tolerance X      the largest relative error that passes (1e-3)\n"
            "\n"
            "check (always the CPU against the GPU; --device may be left out):\n"
            "  --batch N          samples in the batch (the train section's batch)\n"
            "  --data DIR         take the batch from this IDX folder's train split, shuffled\n"
            "                     with the seed (without a dataset: random data)\n"
            "  --seed N           seed of the weights, the shuffle or the random data\n"
            "  --weights FILE     start from these weights instead of fresh ones\n"
            "  --lr X, --clip X   the learning rate and gradient clipping of the training step\n"
            "  --tolerance X      the largest relative error that passes (%g)\n"
            "  --mode MODE        train (the training step: gradients and update; the\n"
            "                     default) or infer (the forward pass alone: the outputs,\n"
            "                     and how many are the same bits on both devices)\n"
            "\n"
            "sample (a language model):\n"
            "  --weights FILE     a checkpoint of train (weights and vocabulary)\n"
            "  --prime TEXT       the text to start from (a newline)\n"
            "  --length N         characters to write after it (400)\n"
            "  --temperature X    divides the scores before the softmax, above 0 (1)\n"
            "  --seed N           seed of the draws\n",
            m->name, DLRT_DIST_TIMEOUT, DLRT_GRADCHECK_BATCH, DLRT_CHECK_TOLERANCE);
    return out == stdout ? 0 : 2;
}

static bool parse_int(const DlrtModel *m, const char *flag, const char *text, int64_t lo,
                      int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || *end || end == text || v < lo || v > hi) {
        fprintf(stderr, "%s: %s must be an integer from %lld to %lld, not '%s'\n", m->name,
                flag, (long long)lo, (long long)hi, text);
        return false;
    }
    *out = v;
    return true;
}

/* Stores the value of one known flag in o; false after a message. */
static bool set_flag(const DlrtModel *m, Options *o, const char *flag, const char *value) {
    const struct {
        const char *name;
        int64_t lo, hi;
        int64_t *field;
    } counts[] = {
        {"--epochs", 1, 1000000, &o->epochs}, {"--batch", 1, 1 << 20, &o->batch},
        {"--limit", 1, INT64_MAX, &o->limit}, {"--iters", 1, 1000000, &o->iters},
        {"--warmup", 0, 1000000, &o->warmup}, {"--threads", 1, MAX_THREADS, &o->threads},
        {"--length", 0, 100000000, &o->length}, {"--workers", 1, 1024, &o->workers},
        {"--ranks", 1, 1 << 20, &o->ranks}, {"--samples", 1, INT64_MAX, &o->samples},
    };
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
        if (strcmp(flag, counts[k].name) == 0)
            return parse_int(m, flag, value, counts[k].lo, counts[k].hi, counts[k].field);
    int64_t v;
    o->batch_given |= strcmp(flag, "--batch") == 0;
    o->data_given |= strcmp(flag, "--data") == 0;
    if (strcmp(flag, "--data") == 0) o->data = value;
    else if (strcmp(flag, "--save") == 0) o->save = value;
    else if (strcmp(flag, "--resume") == 0) o->resume = value;
    else if (strcmp(flag, "--log") == 0) o->log = value;
    else if (strcmp(flag, "--report") == 0) o->report = value;
    else if (strcmp(flag, "--weights") == 0) o->weights = value;
    else if (strcmp(flag, "--prime") == 0) o->prime = value;
    else if (strcmp(flag, "--temperature") == 0) {
        char *end;
        o->temperature = strtod(value, &end);
        if (*end || end == value || !(o->temperature > 0) || !isfinite(o->temperature)) {
            fprintf(stderr, "%s: --temperature must be a positive number, not '%s'\n", m->name,
                    value);
            return false;
        }
    }
    else if (strcmp(flag, "--seed") == 0) {
        if (!parse_int(m, flag, value, 0, INT64_MAX, &v))
            return false;
        o->seed = (uint64_t)v;
        o->seed_given = true;
    } else if (strcmp(flag, "--mode") == 0) {
        if (strcmp(value, "train") != 0 && strcmp(value, "infer") != 0 &&
            strcmp(value, "step") != 0) {
            fprintf(stderr, "%s: --mode must be train, infer or step, not '%s'\n", m->name,
                    value);
            return false;
        }
        o->mode = value;
    } else if (strcmp(flag, "--method") == 0) {
        if (strcmp(value, "minmax") != 0 && strcmp(value, "percentile") != 0 &&
            strcmp(value, "entropy") != 0) {
            fprintf(stderr, "%s: --method must be minmax, percentile or entropy, not '%s'\n",
                    m->name, value);
            return false;
        }
        o->method = value;
    } else if (strcmp(flag, "--device") == 0) {
        if (strcmp(value, "cpu") != 0 && strcmp(value, "cuda") != 0) {
            fprintf(stderr, "%s: --device must be cpu or cuda, not '%s'\n", m->name, value);
            return false;
        }
        o->device = value;
    } else if (strcmp(flag, "--timeout") == 0) {
        char *end;
        o->timeout = strtod(value, &end);
        if (*end || end == value || !(o->timeout > 0) || !(o->timeout <= 1e6)) {
            fprintf(stderr, "%s: --timeout must be a number of seconds above 0, up to 1e6, not "
                    "'%s'\n", m->name, value);
            return false;
        }
    } else if (strcmp(flag, "--tolerance") == 0) {
        char *end;
        o->tolerance = strtod(value, &end);
        if (*end || end == value || !(o->tolerance > 0) || !isfinite(o->tolerance)) {
            fprintf(stderr, "%s: --tolerance must be a positive number, not '%s'\n", m->name,
                    value);
            return false;
        }
    } else if (strcmp(flag, "--lr") == 0) {
        char *end;
        o->lr = strtod(value, &end);
        if (*end || end == value || !(o->lr > 0) || !isfinite(o->lr)) {
            fprintf(stderr, "%s: --lr must be a positive number, not '%s'\n", m->name, value);
            return false;
        }
    } else if (strcmp(flag, "--clip") == 0) {
        char *end;
        o->clip = strtod(value, &end);
        if (*end || end == value || !(o->clip >= 0) || !isfinite(o->clip)) {
            fprintf(stderr, "%s: --clip must be a number of 0 or more (0: no clipping), not '%s'\n",
                    m->name, value);
            return false;
        }
        if (o->clip > 0 && !m->set_clip) {
            fprintf(stderr, "%s: --clip: this network was compiled without gradient clipping; give "
                    "its train section a clip (clip = %s) to clip at run time\n", m->name, value);
            return false;
        }
    }
    return true;
}

/* Checks that flag is one of cmd's; false after a message. */
static bool known_flag(const DlrtModel *m, const Command *cmd, const char *flag, const char *arg) {
    for (size_t k = 0; k < sizeof flags / sizeof *flags; k++) {
        if (strcmp(flag, flags[k].name) != 0)
            continue;
        if (flags[k].commands & cmd->bit)
            return true;
        fprintf(stderr, "%s: %s is not an option of %s (see %s --help)\n", m->name, flag,
                cmd->name, m->name);
        return false;
    }
    fprintf(stderr, "%s: unknown option '%s' (see %s --help)\n", m->name, arg, m->name);
    return false;
}

/* Parses argv[2...] into o (o->inputs, an array the caller frees, gets the
 * arguments that are not flags).  Returns -1 to go on, else the exit
 * status: 0 after --help, 2 after a message. */
static int parse_options(const DlrtModel *m, const Command *cmd, int argc, char **argv,
                         Options *o) {
    *o = (Options){.device = "cpu", .data = default_data(m), .epochs = m->epochs,
                   .prime = "\n", .length = 400, .temperature = 1,
                   .batch = m->batch, .lr = m->lr, .clip = m->clip, .seed = m->seed, .mode = "train",
                   .iters = 100, .warmup = 10, .threads = default_threads(),
                   .timeout = DLRT_DIST_TIMEOUT, .samples = 1000, .method = "minmax",
                   .tolerance = cmd->bit == CHECK ? DLRT_CHECK_TOLERANCE : 1e-3};
    o->inputs = malloc((size_t)argc * sizeof *o->inputs);
    if (!o->inputs) {
        fprintf(stderr, "%s: out of memory\n", m->name);
        return 2;
    }
    bool flags_over = false;  /* after "--", every argument is an input */
    for (int i = 2; i < argc; i++) {
        const char *flag = argv[i], *value = NULL;
        if (flags_over || flag[0] != '-' || strcmp(flag, "-") == 0) {
            if (cmd->bit != PREDICT) {
                fprintf(stderr, "%s: unexpected argument '%s' (see %s --help)\n", m->name,
                        argv[i], m->name);
                return 2;
            }
            o->inputs[o->ninputs++] = argv[i];
            continue;
        }
        if (strcmp(flag, "--") == 0) {
            flags_over = true;
            continue;
        }
        if (strcmp(flag, "--help") == 0)
            return usage(m, stdout);
        char name[32];
        const char *eq = strchr(flag, '=');
        if (eq && (size_t)(eq - flag) < sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - flag), flag);
            flag = name;
            value = eq + 1;
        }
        if (!known_flag(m, cmd, flag, argv[i]))
            return 2;
        if (!value) {
            if (i + 1 == argc) {
                fprintf(stderr, "%s: %s needs a value\n", m->name, flag);
                return 2;
            }
            value = argv[++i];
        }
        if (!set_flag(m, o, flag, value))
            return 2;
    }
    if (cmd->bit == GRADCHECK && !o->batch_given)
        o->batch = DLRT_GRADCHECK_BATCH;
    return -1;
}

/* ---- reports --------------------------------------------------------------- */

const char *dlrt_device_name(const DlrtModel *m) {
    return m->device ? m->device : "cpu";
}

void dlrt_apply_clip(const DlrtModel *m, void *net, const Options *o) {
    if (m->set_clip)
        m->set_clip(net, o->clip);
}

static long long peak_rss_bytes(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (long long)ru.ru_maxrss * 1024 : 0;
}

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* ", key: value" when the value was measured (not NAN). */
static void json_number(FILE *f, const char *key, double v, int digits) {
    if (!isnan(v))
        fprintf(f, ", \"%s\": %.*g", key, digits, v);
}

static void json_count(FILE *f, const char *key, long long v) {
    if (v >= 0)
        fprintf(f, ", \"%s\": %lld", key, v);
}

Report dlrt_report_new(const char *command) {
    return (Report){.command = command, .epochs = -1, .ranks = -1, .images = -1, .train_loss = NAN,
                    .test_loss = NAN, .test_accuracy = NAN, .images_per_second = NAN,
                    .loader_images_per_second = NAN,
                    .median_ms = NAN, .mean_ms = NAN, .min_ms = NAN, .max_ms = NAN,
                    .gradcheck_error = NAN, .gradcheck_f32_error = NAN,
                    .check_worst_error = NAN, .seconds = NAN};
}

bool dlrt_report_write(const DlrtModel *m, const Options *o, const Report *r) {
    if (!o->report)
        return true;
    FILE *f = fopen(o->report, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write the report '%s': %s\n", m->name, o->report,
                strerror(errno));
        return false;
    }
    fprintf(f, "{\"network\": ");
    json_string(f, m->name);
    fprintf(f, ", \"device\": ");
    json_string(f, r->device ? r->device : dlrt_device_name(m));
    fprintf(f, ", \"command\": \"%s\"", r->command);
    if (r->mode)
        fprintf(f, ", \"mode\": \"%s\"", r->mode);
    json_count(f, "threads", o->threads);
    json_count(f, "batch", o->batch);
    json_count(f, "epochs", r->epochs);
    json_count(f, "ranks", r->ranks);
    json_count(f, "images", r->images);
    json_number(f, "train_loss", r->train_loss, 9);
    json_number(f, "test_loss", r->test_loss, 9);
    json_number(f, "test_accuracy", r->test_accuracy, 9);
    json_number(f, "images_per_second", r->images_per_second, 6);
    json_number(f, "loader_images_per_second", r->loader_images_per_second, 6);
    json_number(f, "median_ms", r->median_ms, 6);
    json_number(f, "mean_ms", r->mean_ms, 6);
    json_number(f, "min_ms", r->min_ms, 6);
    json_number(f, "max_ms", r->max_ms, 6);
    json_number(f, "gradcheck_error", r->gradcheck_error, 6);
    json_number(f, "gradcheck_f32_error", r->gradcheck_f32_error, 6);
    if (r->check_worst_tensor) {
        /* JSON has no NaN or infinity: such an error is null */
        if (isfinite(r->check_worst_error))
            fprintf(f, ", \"check_worst_error\": %.6g", r->check_worst_error);
        else
            fprintf(f, ", \"check_worst_error\": null");
        fprintf(f, ", \"check_worst_tensor\": ");
        json_string(f, r->check_worst_tensor);
    }
    json_number(f, "seconds", r->seconds, 6);
    json_count(f, "parameters", m->trainable);
    json_count(f, "peak_memory_bytes", (long long)m->memory(o->batch));
    json_count(f, "activation_bytes", plan_bytes(m->arena, o->batch));
    json_count(f, "activation_naive_bytes", plan_bytes(m->naive, o->batch));
    json_count(f, "activation_lower_bound_bytes", plan_bytes(m->lower_bound, o->batch));
    json_count(f, "peak_rss_bytes", peak_rss_bytes());
    fprintf(f, "}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write the report '%s': %s\n", m->name, o->report,
                strerror(errno));
        return false;
    }
    return true;
}

/* ---- memory -------------------------------------------------------------- */

/* Bytes of memory available to a new allocation (MemAvailable of
 * /proc/meminfo: free memory plus caches the kernel can drop), or -1 when
 * unknown. */
static long long available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return -1;
    char line[256];
    long long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
            break;
    fclose(f);
    return kib < 0 ? -1 : kib * 1024;
}

/* The network's memory for the command's batch is known before anything
 * runs: a batch that cannot fit is refused here, with both amounts, rather
 * than found out by the system's out-of-memory killer in the middle of
 * training (Linux lends memory it does not have, so calloc succeeds). */
static bool memory_fits(const DlrtModel *m, const Options *o) {
    int64_t batch = o->batch;
    double need = (double)m->memory(batch);
    long long have = available_bytes();
    if (have < 0 || need <= (double)have)
        return true;
    fprintf(stderr, "%s: batches of %lld need %.1f MiB of memory (parameters, optimizer state, "
            "activations, scratch for %lld threads), but only %.1f MiB are available; use a "
            "smaller --batch\n", m->name, (long long)batch, need / (1 << 20),
            (long long)o->threads, (double)have / (1 << 20));
    return false;
}

/* ---- the device ---------------------------------------------------------- */

/* The table a command runs on: the CPU's, or with --device cuda the GPU's
 * (check takes the CPU's and compares it with the GPU's itself).  NULL
 * after a message: the exit status is 2. */
static const DlrtModel *device_table(const DlrtModel *m, const Command *cmd, const Options *o) {
    bool cuda = strcmp(o->device, "cuda") == 0;
    if (cuda && cmd->bit == GRADCHECK) {
        fprintf(stderr, "%s: gradcheck runs on the CPU (its f64 network); use check --device "
                "cuda to compare the GPU with the CPU\n", m->name);
        return NULL;
    }
    if ((cuda || cmd->bit == CHECK) && !m->cuda) {
        fprintf(stderr, "%s: this program was built for the CPU only; build it with dlc "
                "--target=cpu,cuda to run it on a GPU\n", m->name);
        return NULL;
    }
    return cuda && cmd->bit != CHECK ? m->cuda : m;
}

/* ---- main -------------------------------------------------------------------- */

int dlrt_main(int argc, char **argv, const DlrtModel *m) {
    dlrt_fix_blas_core(argv);
    if (argc < 2)
        return usage(m, stderr);
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "help") == 0)
        return usage(m, stdout);
    if (strcmp(name, "--version") == 0) {
        printf("%s: the network '%s' from %s, compiled by %s\n", argv[0], m->name, m->source,
               m->dlc ? m->dlc : "dlc (version not recorded)");
        return 0;
    }
    const Command *cmd = NULL;
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(name, commands[i].name) == 0)
            cmd = &commands[i];
    if (!cmd) {
        fprintf(stderr, "%s: unknown command '%s' (train, eval, predict, bench, gradcheck or info; see %s "
                "--help)\n", m->name, name, m->name);
        return 2;
    }
    Options o;
    int status = parse_options(m, cmd, argc, argv, &o);
    const DlrtModel *table = status < 0 ? device_table(m, cmd, &o) : NULL;
    if (status < 0 && !table)
        status = 2;
    if (status < 0) {
        /* before any work, so that every kernel of the run sees one count
           and the run is reproducible */
        dlrt_set_threads((int)o.threads);
        /* the host's memory holds the network on the CPU only; on the GPU,
           its create checks the GPU's memory */
        bool host = table == m;
        status = cmd->bit != INFO && host && !memory_fits(m, &o) ? 1 : cmd->run(table, &o);
    }
    free(o.inputs);
    return status;
}
