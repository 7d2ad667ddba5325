/* calibrate.c — `calibrate`: an int8 program's scales and weights from the
 * f32 weights and data (dlc --quantize=int8; docs/quantization.md).
 *
 *   ./net8 calibrate --weights net.safetensors [--data DIR] [--samples N]
 *                    [--method minmax|percentile|entropy] [--batch N] --save net8.safetensors
 *
 * It loads the f32 weights into the program's f32 network (DlrtQuant),
 * folds each int8 layer's batchnorm into its weights and quantizes them per
 * filter, runs the f32 network on the first N samples of the IDX folder's
 * train split, and sets each activation's scale from the values it saw:
 *   - minmax: the largest |x| / 127;
 *   - percentile: the 99.99th percentile of |x| / 127, from a histogram of
 *     2048 bins up to the largest |x| (a second pass), which leaves out the
 *     zeros (a ReLU's half of its values, exact at any scale: with them the
 *     entropy method below clips ReLU outputs at a sixteenth of their
 *     range, the KL divergence of its merged bins dominated by the spike);
 *   - entropy: TensorRT's calibrator: of the thresholds at bins 128 to 2048
 *     of that histogram, the one whose 128-level quantization of the
 *     clipped distribution is nearest it in Kullback-Leibler divergence.
 * A last pass measures, on the same samples, each scale's SQNR (its
 * tensor against itself quantized and dequantized) and the int8
 * network's scores against the f32 network's (SQNR and top-1 agreement).
 * It prints them and saves the int8 network's tensors with them in the
 * checkpoint's metadata, where `info --weights` finds them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

#define BINS 2048
#define LEVELS 128 /* the int8 magnitudes a symmetric scale has, 0 to 127 */

/* One activation scale's statistics. */
typedef struct Stat {
    double amax;         /* the largest |x| seen */
    double *hist;        /* BINS counts of |x| up to amax (percentile, entropy) */
    double signal, noise; /* for its SQNR once its scale is set */
    float scale;
} Stat;

static double sqnr_db(double signal, double noise) {
    return noise > 0 ? 10 * log10(signal / noise) : INFINITY;
}

/* The threshold whose share of |x| at or below it is at least `share`. */
static double percentile(const Stat *s, double share) {
    double total = 0, seen = 0;
    for (int b = 0; b < BINS; b++)
        total += s->hist[b];
    for (int b = 0; b < BINS; b++) {
        seen += s->hist[b];
        if (seen >= share * total)
            return (b + 1) * s->amax / BINS;
    }
    return s->amax;
}

/* TensorRT's entropy calibration over the histogram. */
static double entropy_threshold(const Stat *s) {
    double best = INFINITY;
    int best_i = BINS;
    double p[BINS], q[BINS];
    for (int i = LEVELS; i <= BINS; i++) {
        double outliers = 0, total = 0;
        for (int b = i; b < BINS; b++)
            outliers += s->hist[b];
        for (int b = 0; b < i; b++)
            p[b] = s->hist[b];
        p[i - 1] += outliers;
        /* q: hist[0, i) merged into LEVELS bins, each spread evenly over the
           bins it merged that were not empty */
        for (int j = 0; j < LEVELS; j++) {
            int start = j * i / LEVELS, end = (j + 1) * i / LEVELS;
            double sum = 0;
            int nonzero = 0;
            for (int b = start; b < end; b++) {
                sum += s->hist[b];
                nonzero += s->hist[b] > 0;
            }
            for (int b = start; b < end; b++)
                q[b] = s->hist[b] > 0 ? sum / nonzero : 0;
        }
        double qtotal = 0;
        for (int b = 0; b < i; b++)
            total += p[b], qtotal += q[b];
        if (total <= 0 || qtotal <= 0)
            continue;
        double kl = 0;
        for (int b = 0; b < i; b++) {
            if (p[b] <= 0)
                continue;
            double pb = p[b] / total, qb = q[b] / qtotal;
            kl += qb > 0 ? pb * log(pb / qb) : pb * 30; /* a bin q misses: a large penalty */
        }
        if (kl < best)
            best = kl, best_i = i;
    }
    return (best_i + 0.5) * s->amax / BINS;
}

typedef struct Calib {
    const DlrtModel *m;
    const DlrtQuant *q;
    void *net;
    DlrtDataset data;
    int64_t samples, batch;
    float *scores, *scores8, **observed;
    Stat *stats;
    DlrtError err;
} Calib;

/* One pass over the samples: pass 0 finds each tensor's largest |x|,
 * pass 1 its histogram, pass 2 the SQNRs (of the scales, and of the int8
 * scores against the f32 ones, with their top-1 agreement). */
static bool run_pass(Calib *c, int pass, double *sig, double *noise, int64_t *agree) {
    const DlrtQuant *q = c->q;
    for (int64_t at = 0; at < c->samples; at += c->batch) {
        int64_t n = c->samples - at < c->batch ? c->samples - at : c->batch;
        const float *x = c->data.x + at * c->data.sample_size;
        if (q->calib_forward(c->net, n, x, c->scores, c->observed, &c->err) != DLRT_OK)
            return false;
        for (int j = 0; j < q->nscales; j++) {
            Stat *s = &c->stats[j];
            const float *v = c->observed[j];
            int64_t count = n * q->observed[j];
            for (int64_t i = 0; i < count; i++) {
                double a = fabs((double)v[i]);
                if (pass == 0)
                    s->amax = a > s->amax ? a : s->amax;
                else if (pass == 1 && s->amax > 0 && a > 0) { /* zeros: exact at any scale */
                    int b = (int)(a / s->amax * BINS);
                    s->hist[b < BINS ? b : BINS - 1]++;
                } else if (pass == 2) {
                    double t = rint((double)v[i] / s->scale);
                    t = t > 127 ? 127 : t < -128 ? -128 : t;
                    s->signal += (double)v[i] * v[i];
                    s->noise += ((double)v[i] - t * s->scale) * ((double)v[i] - t * s->scale);
                }
            }
        }
        if (pass != 2)
            continue;
        if (c->m->forward(c->net, n, x, c->scores8, &c->err) != DLRT_OK)
            return false;
        for (int64_t i = 0; i < n; i++) {
            const float *f = c->scores + i * c->m->classes, *g = c->scores8 + i * c->m->classes;
            int64_t bf = 0, bg = 0;
            for (int64_t k = 0; k < c->m->classes; k++) {
                *sig += (double)f[k] * f[k];
                *noise += ((double)f[k] - g[k]) * ((double)f[k] - g[k]);
                bf = f[k] > f[bf] ? k : bf;
                bg = g[k] > g[bg] ? k : bg;
            }
            *agree += bf == bg;
        }
    }
    return true;
}

/* "name=value name=value ..." of the text after each name in names */
static char *meta_list(const char *const *names, const double *values, int n) {
    size_t size = 1;
    for (int i = 0; i < n; i++)
        size += strlen(names[i]) + 32;
    char *s = malloc(size), *p = s;
    if (!s)
        return NULL;
    *p = 0;
    for (int i = 0; i < n; i++)
        p += sprintf(p, "%s%s=%.2f", i ? " " : "", names[i], values[i]);
    return s;
}

static int calibrate(Calib *c, const Options *o) {
    const DlrtModel *m = c->m;
    const DlrtQuant *q = c->q;
    if (m->create(&c->net, c->batch, 0, &c->err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, c->err.message);
        return 1;
    }
    if (q->load_f32(c->net, o->weights, &c->err) != DLRT_OK) {
        DlrtError int8;
        if (m->load(c->net, o->weights, NULL, NULL, &int8) == DLRT_OK)
            fprintf(stderr, "%s: %s is an int8 checkpoint (of calibrate); calibrate reads the "
                    "f32 weights (of train)\n", m->name, o->weights);
        else
            fprintf(stderr, "%s: %s\n", m->name, c->err.message);
        return 1;
    }
    double *wsqnr = calloc((size_t)q->nlayers + 1, sizeof *wsqnr);
    c->stats = calloc((size_t)q->nscales + 1, sizeof *c->stats);
    c->observed = calloc((size_t)q->nscales + 1, sizeof *c->observed);
    c->scores = malloc(sizeof(float) * (size_t)(c->batch * m->classes));
    c->scores8 = malloc(sizeof(float) * (size_t)(c->batch * m->classes));
    bool ok = wsqnr && c->stats && c->observed && c->scores && c->scores8;
    for (int j = 0; ok && j < q->nscales; j++) {
        c->observed[j] = malloc(sizeof(float) * (size_t)(c->batch * q->observed[j]));
        c->stats[j].hist = calloc(BINS, sizeof(double));
        ok = c->observed[j] && c->stats[j].hist;
    }
    if (!ok) {
        fprintf(stderr, "%s: out of memory\n", m->name);
        return 1;
    }
    q->quantize_weights(c->net, wsqnr);
    double sig = 0, noise = 0;
    int64_t agree = 0;
    bool hist = strcmp(o->method, "minmax") != 0;
    ok = run_pass(c, 0, NULL, NULL, NULL) && (!hist || run_pass(c, 1, NULL, NULL, NULL));
    for (int j = 0; ok && j < q->nscales; j++) {
        Stat *s = &c->stats[j];
        double t = s->amax;
        if (t > 0 && strcmp(o->method, "percentile") == 0)
            t = percentile(s, 0.9999);
        else if (t > 0 && strcmp(o->method, "entropy") == 0)
            t = entropy_threshold(s);
        s->scale = t > 0 ? (float)(t / 127) : 1.0f; /* a tensor of zeros: any scale */
        DlrtTensor st = m->tensor(c->net, q->scales[j]);
        *(float *)st.data = s->scale;
    }
    ok = ok && run_pass(c, 2, &sig, &noise, &agree);
    if (!ok) {
        fprintf(stderr, "%s: %s\n", m->name, c->err.message);
        return 1;
    }
    /* the report: per layer, then the scores */
    printf("calibrated %s on %lld samples of %s (%s)\n", m->name, (long long)c->samples, o->data,
           o->method);
    printf("  %-24s weight SQNR  input scale  output scale\n", "layer");
    for (int l = 0; l < q->nlayers; l++) {
        const int *ls = q->layer_scales + 3 * l;
        DlrtTensor in = m->tensor(c->net, ls[1]);
        printf("  %-24s %8.2f dB  %11.6g  ", q->layers[l], wsqnr[l], (double)*(float *)in.data);
        if (ls[2] >= 0)
            printf("%12.6g\n", (double)*(float *)m->tensor(c->net, ls[2]).data);
        else
            printf("%12s\n", "f32 scores");
    }
    printf("  %-32s value      SQNR\n", "activation scale");
    const char **names = calloc((size_t)q->nscales + 1, sizeof *names);
    double *asqnr = calloc((size_t)q->nscales + 1, sizeof *asqnr);
    if (!names || !asqnr) {
        fprintf(stderr, "%s: out of memory\n", m->name);
        return 1;
    }
    for (int j = 0; j < q->nscales; j++) {
        names[j] = m->tensor(c->net, q->scales[j]).name;
        asqnr[j] = sqnr_db(c->stats[j].signal, c->stats[j].noise);
        printf("  %-32s %11.6g %6.2f dB\n", names[j], (double)c->stats[j].scale, asqnr[j]);
    }
    double out_sqnr = sqnr_db(sig, noise);
    printf("scores: SQNR %.2f dB against the f32 network's; the same top-1 class for %lld of "
           "%lld samples (%.2f%%)\n", out_sqnr, (long long)agree, (long long)c->samples,
           100.0 * (double)agree / (double)c->samples);
    /* the checkpoint, the figures in its metadata */
    char calib[512], scores[96];
    snprintf(calib, sizeof calib, "%s, %lld samples of %s", o->method, (long long)c->samples,
             o->data);
    snprintf(scores, sizeof scores, "%.2f dB, top-1 agreement %.4f", out_sqnr,
             (double)agree / (double)c->samples);
    char *a = meta_list(names, asqnr, q->nscales), *w = meta_list(q->layers, wsqnr, q->nlayers);
    DlrtMeta meta[] = {{"calibration", calib}, {"sqnr_scores", scores},
                       {"sqnr_activations", a ? a : ""}, {"sqnr_weights", w ? w : ""}};
    int status = 0;
    if (q->save(c->net, o->save, meta, 4, &c->err) != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, c->err.message);
        status = 1;
    } else
        printf("saved %s\n", o->save);
    free(a), free(w), free(names), free(asqnr), free(wsqnr);
    Report r = dlrt_report_new("calibrate");
    r.images = c->samples;
    if (status == 0 && !dlrt_report_write(m, o, &r))
        status = 1;
    return status;
}

int dlrt_calibrate_command(const DlrtModel *m, const Options *o) {
    if (!m->quant) {
        fprintf(stderr, "%s: calibrate is for an int8 program: compile the network with dlc "
                "--quantize=int8\n", m->name);
        return 2;
    }
    if (!o->weights || !o->save) {
        fprintf(stderr, "%s: calibrate needs --weights FILE (the f32 weights) and --save FILE "
                "(the int8 checkpoint it writes)\n", m->name);
        return 2;
    }
    if (o->samples < 2) {
        fprintf(stderr, "%s: calibrate on 1 sample: the scales need at least 2 (--samples N)\n",
                m->name);
        return 2;
    }
    if (!o->data) {
        fprintf(stderr, "%s: no data to calibrate on: give --data DIR (the train section names "
                "none)\n", m->name);
        return 2;
    }
    Calib c = {.m = m, .q = m->quant};
    int status = 1;
    if (dlrt_load_idx_dir(&c.data, NULL, o->data, NULL, &c.err) != DLRT_OK)
        fprintf(stderr, "%s: no data to calibrate on: %s\n", m->name, c.err.message);
    else if (dlrt_dataset_check(&c.data, m->rank, m->dims, (int32_t)m->classes, &c.err) != DLRT_OK)
        fprintf(stderr, "%s: the train split of %s does not fit the network: %s\n", m->name,
                o->data, c.err.message);
    else if (c.data.count < 2)
        fprintf(stderr, "%s: %s has %lld sample%s in its train split: calibrating needs at least "
                "2\n", m->name, o->data, (long long)c.data.count, c.data.count == 1 ? "" : "s");
    else {
        c.samples = o->samples < c.data.count ? o->samples : c.data.count;
        c.batch = o->batch < c.samples ? o->batch : c.samples;
        status = calibrate(&c, o);
    }
    if (c.net)
        m->free(c.net);
    for (int j = 0; c.observed && j < c.q->nscales; j++) {
        free(c.observed[j]);
        free(c.stats[j].hist);
    }
    free(c.observed);
    free(c.stats);
    free(c.scores);
    free(c.scores8);
    dlrt_dataset_free(&c.data);
    return status;
}
