/* program.c — the command line of a generated program.
 *
 *   ./lenet5 train [--data DIR] [--epochs N] [--batch N] [--lr X] [--seed N]
 *                  [--save FILE] [--resume FILE] [--log FILE.csv] [--report FILE.json]
 *   ./lenet5 eval --weights FILE [--data DIR] [--batch N] [--report FILE.json]
 *   ./lenet5 info [--batch N]
 *
 * The generated code hands dlrt_main a DlrtModel: what it knows of the
 * network, the train section's defaults, and its API.  Training loads an
 * IDX folder (train and test splits), checks the data against the network,
 * runs the epochs with the learning-rate schedule, evaluates on the test
 * split after each, and stops with a clear message if the loss stops being
 * finite.  Progress goes to standard error (a bar on a terminal, a line
 * per epoch otherwise); results to standard output, --log and --report.
 * docs/program.md lists every flag and every key of the report.
 *
 * This is the one part of libdlrt that prints and decides exit statuses:
 * it is the program's main. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "dlrt.h"

typedef struct Options {
    const char *data, *save, *resume, *log, *report, *weights;
    int64_t epochs, batch;
    double lr;
    uint64_t seed;
} Options;

/* ---- parsing ------------------------------------------------------------- */

static int usage(const DlrtModel *m, FILE *out) {
    fprintf(out,
            "usage: %s COMMAND [options]\n"
            "\n"
            "The network '%s' (compiled from %s by dlc).\n"
            "\n"
            "commands:\n"
            "  train   train on an IDX folder's train split, evaluating on its test split\n"
            "  eval    evaluate saved weights on the test split\n"
            "  info    the network's layers, parameters and memory\n"
            "\n"
            "options (defaults from the network's train section):\n"
            "  --data DIR         IDX folder (train-images-idx3-ubyte[.gz], ...)%s%s%s\n"
            "  --epochs N         passes over the training data (%lld)\n"
            "  --batch N          samples per step (%lld)\n"
            "  --lr X             learning rate (%g)\n"
            "  --seed N           seed of initialization and shuffling (%llu)\n"
            "  --save FILE        write the trained weights and optimizer state (safetensors)\n"
            "  --resume FILE      start from a checkpoint\n"
            "  --weights FILE     eval: the weights to evaluate\n"
            "  --log FILE.csv     one line per epoch: losses, accuracy, speed\n"
            "  --report FILE.json the final figures as one JSON object\n"
            "  --help\n",
            m->name, m->name, m->source, m->data ? " (" : "", m->data ? m->data : "",
            m->data ? ")" : "", (long long)m->epochs, (long long)m->batch, m->lr,
            (unsigned long long)m->seed);
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

static bool parse_options(const DlrtModel *m, int argc, char **argv, Options *o) {
    *o = (Options){.data = m->data, .epochs = m->epochs, .batch = m->batch, .lr = m->lr,
                   .seed = m->seed};
    for (int i = 2; i < argc; i++) {
        const char *flag = argv[i], *value = NULL;
        char name[32];
        const char *eq = strchr(flag, '=');
        if (eq && (size_t)(eq - flag) < sizeof name) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - flag), flag);
            flag = name;
            value = eq + 1;
        }
        if (strcmp(flag, "--help") == 0) {
            usage(m, stdout);
            exit(0);
        }
        static const char *const known[] = {"--data", "--epochs", "--batch", "--lr", "--seed",
                                            "--save", "--resume", "--log", "--report",
                                            "--weights"};
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++)
            ok |= strcmp(flag, known[k]) == 0;
        if (!ok) {
            fprintf(stderr, "%s: unknown option '%s' (see %s --help)\n", m->name, argv[i], m->name);
            return false;
        }
        if (!value) {
            if (i + 1 == argc) {
                fprintf(stderr, "%s: %s needs a value\n", m->name, flag);
                return false;
            }
            value = argv[++i];
        }
        int64_t v;
        if (strcmp(flag, "--data") == 0) o->data = value;
        else if (strcmp(flag, "--save") == 0) o->save = value;
        else if (strcmp(flag, "--resume") == 0) o->resume = value;
        else if (strcmp(flag, "--log") == 0) o->log = value;
        else if (strcmp(flag, "--report") == 0) o->report = value;
        else if (strcmp(flag, "--weights") == 0) o->weights = value;
        else if (strcmp(flag, "--epochs") == 0) {
            if (!parse_int(m, flag, value, 1, 1000000, &o->epochs))
                return false;
        } else if (strcmp(flag, "--batch") == 0) {
            if (!parse_int(m, flag, value, 1, 1 << 20, &o->batch))
                return false;
        } else if (strcmp(flag, "--seed") == 0) {
            if (!parse_int(m, flag, value, 0, INT64_MAX, &v))
                return false;
            o->seed = (uint64_t)v;
        } else if (strcmp(flag, "--lr") == 0) {
            char *end;
            o->lr = strtod(value, &end);
            if (*end || end == value || !(o->lr > 0) || !isfinite(o->lr)) {
                fprintf(stderr, "%s: --lr must be a positive number, not '%s'\n", m->name, value);
                return false;
            }
        }
    }
    return true;
}

/* ---- evaluation ---------------------------------------------------------- */

typedef struct Scores {
    double loss;      /* mean cross-entropy */
    double accuracy;  /* 0 to 1 */
    int64_t correct, count;
} Scores;

static DlrtStatus evaluate(const DlrtModel *m, void *net, const DlrtDataset *ds, int64_t batch,
                           float *x, int32_t *y, float *logits, Scores *s, DlrtError *err) {
    DlrtBatcher b;
    DlrtStatus st = dlrt_batcher_init(&b, ds, batch, false, 0, err);
    if (st != DLRT_OK)
        return st;
    double total = 0;
    *s = (Scores){0};
    int64_t n;
    while ((n = dlrt_batcher_next(&b, x, y)) > 0) {
        if ((st = m->forward(net, n, x, logits, err)) != DLRT_OK)
            break;
        total += dlrt_cross_entropy(logits, y, n, m->classes, NULL) * (double)n;
        s->correct += dlrt_count_correct(logits, y, n, m->classes);
        s->count += n;
    }
    dlrt_batcher_free(&b);
    s->loss = s->count ? total / (double)s->count : 0;
    s->accuracy = s->count ? (double)s->correct / (double)s->count : 0;
    return st;
}

/* ---- reports --------------------------------------------------------------- */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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

typedef struct Report {
    const char *command;
    int64_t epochs;
    double train_loss, test_loss, test_accuracy, images_per_second, seconds;
    bool trained, tested;
} Report;

static bool write_report(const DlrtModel *m, const char *path, const Report *r) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write the report '%s': %s\n", m->name, path, strerror(errno));
        return false;
    }
    fprintf(f, "{\"network\": ");
    json_string(f, m->name);
    fprintf(f, ", \"command\": \"%s\"", r->command);
    if (r->trained)
        fprintf(f, ", \"epochs\": %lld, \"train_loss\": %.9g, \"images_per_second\": %.6g",
                (long long)r->epochs, r->train_loss, r->images_per_second);
    if (r->tested)
        fprintf(f, ", \"test_loss\": %.9g, \"test_accuracy\": %.9g", r->test_loss,
                r->test_accuracy);
    fprintf(f, ", \"seconds\": %.6g, \"parameters\": %lld, \"peak_memory_bytes\": %lld}\n",
            r->seconds, (long long)m->trainable, peak_rss_bytes());
    return fclose(f) == 0;
}

/* ---- training ------------------------------------------------------------ */

/* The learning rate for step `step` (0-based) of epoch `epoch`. */
static double schedule(const DlrtModel *m, const Options *o, int64_t epoch, int64_t step,
                       int64_t steps) {
    double lr = o->lr, t = (double)epoch + (double)step / (double)(steps ? steps : 1);
    if (m->schedule && strcmp(m->schedule, "step") == 0 && m->step_every > 0)
        lr *= pow(m->gamma, (double)(epoch / m->step_every));
    else if (m->schedule && strcmp(m->schedule, "cosine") == 0)
        lr = m->min_lr + (lr - m->min_lr) * 0.5 * (1 + cos(3.14159265358979323846 * t / (double)o->epochs));
    if (m->warmup > 0 && t < (double)m->warmup)
        lr *= (t + 1.0 / (double)(steps ? steps : 1)) / (double)m->warmup;
    return lr;
}

static void progress(const DlrtModel *m, int64_t epoch, int64_t epochs, int64_t step,
                     int64_t steps, double loss, double ips, double left) {
    int width = 24, done = (int)((double)width * (double)step / (double)steps);
    fprintf(stderr, "\r%s: epoch %lld/%lld [%.*s%*s] %3d%% loss %.4f  %.0f images/s  %d:%02d left ",
            m->name, (long long)epoch, (long long)epochs, done, "========================",
            width - done, "", (int)(100 * step / steps), loss, ips, (int)left / 60,
            (int)left % 60);
    fflush(stderr);
}

static bool check_data(const DlrtModel *m, const DlrtDataset *ds, const char *what,
                       DlrtError *err) {
    if (dlrt_dataset_check(ds, m->rank, m->dims, (int32_t)m->classes, err) == DLRT_OK)
        return true;
    fprintf(stderr, "%s: the %s split does not fit the network: %s\n", m->name, what, err->message);
    return false;
}

static int train(const DlrtModel *m, const Options *o) {
    DlrtError err = {0};
    if (!o->data) {
        fprintf(stderr, "%s: no data: give --data DIR (the train section names none)\n", m->name);
        return 2;
    }
    DlrtDataset tr = {0}, te = {0};
    if (dlrt_load_idx_dir(&tr, &te, o->data, NULL, &err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, err.message);
        return 1;
    }
    int status = 1;
    void *net = NULL;
    DlrtBatcher b = {0};
    FILE *log = NULL;
    float *x = malloc(sizeof(float) * (size_t)(o->batch * m->input_size));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)o->batch);
    float *logits = malloc(sizeof(float) * (size_t)(o->batch * m->classes));
    if (!x || !y || !logits) {
        fprintf(stderr, "%s: out of memory\n", m->name);
        goto done;
    }
    if (!check_data(m, &tr, "train", &err) || !check_data(m, &te, "test", &err))
        goto done;
    if (m->create(&net, o->batch, o->seed, &err) != DLRT_OK ||
        (o->resume && m->load(net, o->resume, NULL, NULL, &err) != DLRT_OK) ||
        dlrt_batcher_init(&b, &tr, o->batch, true, o->seed, &err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, err.message);
        goto done;
    }
    if (o->log) {
        log = fopen(o->log, "w");
        if (!log) {
            fprintf(stderr, "%s: cannot write the log '%s': %s\n", m->name, o->log, strerror(errno));
            goto done;
        }
        fprintf(log, "epoch,train_loss,test_loss,test_accuracy,seconds,images_per_second\n");
    }
    bool tty = isatty(fileno(stderr));
    int64_t steps = (tr.count + o->batch - 1) / o->batch;
    double start = now(), images = 0;
    Report r = {.command = "train", .epochs = o->epochs, .trained = true, .tested = true};
    for (int64_t e = 0; e < o->epochs; e++) {
        double epoch_start = now(), sum = 0;
        int64_t n, step = 0, seen = 0;
        while ((n = dlrt_batcher_next(&b, x, y)) > 0) {
            float loss;
            double lr = schedule(m, o, e, step, steps);
            if (m->train_step(net, n, x, y, (float)lr, &loss, &err) != DLRT_OK) {
                fprintf(stderr, "%s: %s\n", m->name, err.message);
                goto done;
            }
            if (!isfinite(loss)) {
                fprintf(stderr, "%s%s: training diverged: the loss is %g at epoch %lld, step %lld "
                        "(learning rate %g); try a smaller --lr\n", tty ? "\n" : "", m->name,
                        (double)loss, (long long)e + 1, (long long)step + 1, lr);
                goto done;
            }
            sum += (double)loss * (double)n;
            seen += n;
            step++;
            if (tty && (step % 10 == 0 || step == steps)) {
                double el = now() - epoch_start, ips = (double)seen / (el > 0 ? el : 1e-9);
                double left = ((double)(tr.count - seen) + (double)tr.count * (double)(o->epochs - e - 1)) / (ips > 0 ? ips : 1);
                progress(m, e + 1, o->epochs, step, steps, sum / (double)seen, ips, left);
            }
        }
        dlrt_batcher_next_epoch(&b);
        double secs = now() - epoch_start;
        images += (double)seen;
        Scores s;
        if (evaluate(m, net, &te, o->batch, x, y, logits, &s, &err) != DLRT_OK) {
            fprintf(stderr, "%s: %s\n", m->name, err.message);
            goto done;
        }
        r.train_loss = sum / (double)(seen ? seen : 1);
        r.test_loss = s.loss;
        r.test_accuracy = s.accuracy;
        r.images_per_second = (double)seen / (secs > 0 ? secs : 1e-9);
        if (tty)
            fputc('\n', stderr);
        printf("epoch %lld/%lld: train loss %.4f, test loss %.4f, test accuracy %.4f, %.0f images/s\n",
               (long long)e + 1, (long long)o->epochs, r.train_loss, s.loss, s.accuracy,
               r.images_per_second);
        fflush(stdout);
        if (log)
            fprintf(log, "%lld,%.9g,%.9g,%.9g,%.6g,%.6g\n", (long long)e + 1, r.train_loss,
                    s.loss, s.accuracy, secs, r.images_per_second);
    }
    r.seconds = now() - start;
    r.images_per_second = images / (r.seconds > 0 ? r.seconds : 1e-9);
    if (o->save && m->save(net, o->save, NULL, 0, &err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, err.message);
        goto done;
    }
    status = o->report && !write_report(m, o->report, &r) ? 1 : 0;
done:
    if (log && fclose(log) != 0 && status == 0) {
        fprintf(stderr, "%s: cannot write the log '%s'\n", m->name, o->log);
        status = 1;
    }
    dlrt_batcher_free(&b);
    if (net)
        m->free(net);
    free(x);
    free(y);
    free(logits);
    dlrt_dataset_free(&tr);
    dlrt_dataset_free(&te);
    return status;
}

static int eval(const DlrtModel *m, const Options *o) {
    DlrtError err = {0};
    if (!o->weights) {
        fprintf(stderr, "%s: eval needs --weights FILE\n", m->name);
        return 2;
    }
    if (!o->data) {
        fprintf(stderr, "%s: no data: give --data DIR (the train section names none)\n", m->name);
        return 2;
    }
    DlrtDataset te = {0};
    if (dlrt_load_idx_dir(NULL, &te, o->data, NULL, &err) != DLRT_OK) { /* the test split */
        fprintf(stderr, "%s: %s\n", m->name, err.message);
        return 1;
    }
    int status = 1;
    void *net = NULL;
    double start = now();
    float *x = malloc(sizeof(float) * (size_t)(o->batch * m->input_size));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)o->batch);
    float *logits = malloc(sizeof(float) * (size_t)(o->batch * m->classes));
    Scores s;
    if (!x || !y || !logits)
        fprintf(stderr, "%s: out of memory\n", m->name);
    else if (check_data(m, &te, "test", &err)) {
        if (m->create(&net, o->batch, 0, &err) != DLRT_OK || m->load(net, o->weights, NULL, NULL, &err) != DLRT_OK ||
            evaluate(m, net, &te, o->batch, x, y, logits, &s, &err) != DLRT_OK) {
            fprintf(stderr, "%s: %s\n", m->name, err.message);
        } else {
            printf("test accuracy %.4f (%lld of %lld), test loss %.4f\n", s.accuracy,
                   (long long)s.correct, (long long)s.count, s.loss);
            Report r = {.command = "eval", .test_loss = s.loss, .test_accuracy = s.accuracy,
                        .tested = true, .seconds = now() - start};
            status = o->report && !write_report(m, o->report, &r) ? 1 : 0;
        }
    }
    if (net)
        m->free(net);
    free(x);
    free(y);
    free(logits);
    dlrt_dataset_free(&te);
    return status;
}

static int info(const DlrtModel *m, const Options *o) {
    printf("network %s (from %s)\ninput [", m->name, m->source);
    for (int i = 0; i < m->rank; i++)
        printf("%s%lld", i ? ", " : "", (long long)m->dims[i]);
    printf("], %lld classes\n\nlayers:\n%s\n", (long long)m->classes, m->layers);
    printf("trainable parameters: %lld\n", (long long)m->trainable);
    printf("optimizer: %s\n", m->optimizer);
    printf("memory for batches of %lld: %.1f MiB (parameters, optimizer state, activations, "
           "scratch)\n", (long long)o->batch, (double)m->memory(o->batch) / (1 << 20));
    return 0;
}

int dlrt_main(int argc, char **argv, const DlrtModel *m) {
    if (argc < 2)
        return usage(m, stderr);
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0)
        return usage(m, stdout);
    Options o;
    if (!parse_options(m, argc, argv, &o))
        return 2;
    if (strcmp(cmd, "train") == 0)
        return train(m, &o);
    if (strcmp(cmd, "eval") == 0)
        return eval(m, &o);
    if (strcmp(cmd, "info") == 0)
        return info(m, &o);
    fprintf(stderr, "%s: unknown command '%s' (train, eval or info; see %s --help)\n", m->name,
            cmd, m->name);
    return 2;
}
