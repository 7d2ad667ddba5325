/* predict.c — `predict`: classifying the images of IDX, .npy, PGM, PNG and
 * JPEG files.
 *
 *   ./lenet5 predict --weights lenet5.safetensors boot.pgm t10k-images-idx3-ubyte.gz
 *   boot.pgm[0]: class 9, probability 0.8472
 *   t10k-images-idx3-ubyte.gz[0]: class 9, probability 0.8472
 *   ...
 *
 * An input's format is told by its content, not its name, and any of them
 * may be gzip-compressed: "\x93NUMPY" starts a .npy file, 'P' and a digit
 * a Netpbm image (PGM; the color and bitmap kinds are refused by name), two
 * zero bytes an IDX file; PNG's signature and JPEG's FF D8 FF its images
 * (not compressed), which become the network's channels (1: grayscale, 3:
 * RGB) scaled by 1/255 and go through the train section's eval transform
 * (images(eval=...)), as torchvision's evaluation transform would.  Values scale as training data does: unsigned
 * bytes (IDX, .npy uint8) by 1/255, PGM by its maxval, other .npy dtypes
 * not at all.  The samples must have the network's input shape exactly: an
 * IDX file or a .npy array [count, ...] holds count of them, a .npy array
 * of the input's own shape one, a PGM file one ({1, height, width}).
 *
 * Each line names the file and the image's index in it, the class with the
 * highest score (the first, on ties) and its softmax probability; with
 * the class's name too where the checkpoint keeps names (a network
 * trained on a folder of images: "photo.png[0]: class 2 (cat), ...").  A file
 * that cannot be read or does not fit the network is reported, naming it,
 * and skipped; the others are still classified, and the exit status is 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "program.h"

typedef enum Format { FORMAT_IDX, FORMAT_NPY, FORMAT_PGM, FORMAT_IMAGE } Format;

/* The format of path, from its first bytes (inflated if gzip). */
static DlrtStatus sniff(const char *path, Format *format, DlrtError *err) {
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return dlrt_fail(err, DLRT_E_IO, "%s: cannot open: %s", path,
                         strerror(errno ? errno : ENOMEM));
    unsigned char head[8];
    int n = gzread(f, head, sizeof head);
    int errnum = Z_OK;
    const char *msg = n < 0 ? gzerror(f, &errnum) : "";
    DlrtStatus st = DLRT_OK;
    if (n < 0)
        st = errnum == Z_ERRNO
                 ? dlrt_fail(err, DLRT_E_IO, "%s: cannot read: %s", path, strerror(errno))
                 : dlrt_fail(err, DLRT_E_FORMAT, "%s: bad gzip data: %s", path, msg);
    else if (n == 0)
        st = dlrt_fail(err, DLRT_E_FORMAT, "%s: the file is empty", path);
    else if (gzdirect(f) && dlrt_image_sniff(head, (size_t)n) != DLRT_IMAGE_UNKNOWN)
        *format = FORMAT_IMAGE;
    else if (n >= 6 && memcmp(head, "\x93NUMPY", 6) == 0)
        *format = FORMAT_NPY;
    else if (n >= 2 && head[0] == 'P' && head[1] >= '1' && head[1] <= '7')
        *format = FORMAT_PGM;
    else if (n >= 2 && head[0] == 0 && head[1] == 0)
        *format = FORMAT_IDX;
    else
        st = dlrt_fail(err, DLRT_E_FORMAT, "%s: not an IDX, .npy, PGM, PNG or JPEG file", path);
    gzclose(f);
    return st;
}

/* Whether dims are the network's input shape without its leading 1. */
static bool lacks_channel(const DlrtModel *m, const int64_t *dims, int rank) {
    return rank + 1 == m->rank && m->dims[0] == 1 &&
           memcmp(dims, m->dims + 1, (size_t)rank * sizeof *dims) == 0;
}

/* Fails unless the samples of ds (read from path) have the network's
 * input shape, or are grayscale images [1, H, W] for a network that reads
 * their rows as a sequence [H, W], saying what the file held. */
static DlrtStatus check_shape(const DlrtModel *m, const char *path, Format format,
                              const DlrtDataset *ds, DlrtError *err) {
    if (ds->rank == m->rank &&
        memcmp(ds->dims, m->dims, (size_t)m->rank * sizeof *m->dims) == 0)
        return DLRT_OK;
    if (format != FORMAT_NPY && ds->rank == m->rank + 1 && ds->dims[0] == 1 &&
        memcmp(ds->dims + 1, m->dims, (size_t)m->rank * sizeof *m->dims) == 0)
        return DLRT_OK;
    char have[128], want[128];
    dlrt_shape_text(want, sizeof want, m->dims, m->rank);
    if (format == FORMAT_NPY) {
        /* the array as it was saved: the count, then a sample's shape */
        int64_t whole[DLRT_MAX_SAMPLE_RANK + 1] = {ds->count};
        memcpy(whole + 1, ds->dims, (size_t)ds->rank * sizeof *whole);
        bool hint = lacks_channel(m, whole, ds->rank + 1) || lacks_channel(m, ds->dims, ds->rank);
        return dlrt_fail(err, DLRT_E_SHAPE, "%s: an array of shape %s, but the network takes "
                         "one input of shape %s, or [count, %.*s] for several%s", path,
                         dlrt_shape_text(have, sizeof have, whole, ds->rank + 1), want,
                         (int)strlen(want) - 2, want + 1,
                         hint ? " (the array lacks a channel dimension of 1)" : "");
    }
    return dlrt_fail(err, DLRT_E_SHAPE, "%s: %s of shape %s, but the network takes %s", path,
                     format == FORMAT_PGM ? "an image" : "images",
                     dlrt_shape_text(have, sizeof have, ds->dims, ds->rank), want);
}

/* Reads path, whatever its format, and checks it against the network. */
static DlrtStatus load_input(const DlrtModel *m, const char *path, DlrtDataset *ds,
                             DlrtError *err) {
    Format format = FORMAT_IDX;
    DlrtStatus st = sniff(path, &format, err);
    if (st != DLRT_OK)
        return st;
    if (format == FORMAT_IMAGE)
        return dlrt_images_load_file(m, path, ds, err);
    if (format == FORMAT_IDX)
        st = dlrt_load_idx_images(ds, path, NULL, err);
    else if (format == FORMAT_NPY)
        st = dlrt_load_npy_images(ds, path, m->rank, m->dims, NULL, err);
    else
        st = dlrt_load_pgm(ds, path, err);
    if (st == DLRT_OK)
        st = check_shape(m, path, format, ds, err);
    return st;
}

/* Buffers for one batch of outputs, and the checkpoint's class names. */
typedef struct Outputs {
    float *logits, *probs;
    char **names;      /* nnames of them, or NULL */
    int32_t nnames;
} Outputs;

/* Classifies every sample of ds, a batch at a time, printing a line each;
 * adds the time spent in the network to *seconds. */
static DlrtStatus classify(const DlrtModel *m, void *net, int64_t batch, const char *path,
                           const DlrtDataset *ds, Outputs *out, double *seconds,
                           DlrtError *err) {
    int64_t classes = m->classes;
    for (int64_t i = 0; i < ds->count; i += batch) {
        int64_t n = ds->count - i < batch ? ds->count - i : batch;
        double t0 = dlrt_clock();
        DlrtStatus st = m->forward(net, n, ds->x + i * ds->sample_size, out->logits, err);
        if (st != DLRT_OK)
            return st;
        *seconds += dlrt_clock() - t0;
        dlrt_softmax_forward(n, classes, 1, out->logits, out->probs);
        for (int64_t k = 0; k < n; k++) {
            const float *row = out->logits + k * classes;
            int64_t best = 0;
            for (int64_t c = 1; c < classes; c++)
                best = row[c] > row[best] ? c : best;
            if (best < out->nnames)
                printf("%s[%lld]: class %lld (%s), probability %.4f\n", path, (long long)(i + k),
                       (long long)best, out->names[best], (double)out->probs[k * classes + best]);
            else
                printf("%s[%lld]: class %lld, probability %.4f\n", path, (long long)(i + k),
                       (long long)best, (double)out->probs[k * classes + best]);
        }
    }
    return DLRT_OK;
}

int dlrt_predict_command(const DlrtModel *m, const Options *o) {
    if (m->vocab > 0) {
        fprintf(stderr, "%s: predict classifies images; a language model writes text with "
                "`%s sample`\n", m->name, m->name);
        return 2;
    }
    if (!o->weights) {
        fprintf(stderr, "%s: predict needs --weights FILE\n", m->name);
        return 2;
    }
    if (o->ninputs == 0) {
        fprintf(stderr, "%s: predict needs INPUT files to classify (IDX, .npy, PGM, PNG or "
                "JPEG)\n", m->name);
        return 2;
    }
    double begin = dlrt_clock(), seconds = 0;
    DlrtError err = {0};
    void *net = NULL;
    Outputs out = {malloc(sizeof(float) * (size_t)(o->batch * m->classes)),
                   malloc(sizeof(float) * (size_t)(o->batch * m->classes)), NULL, 0};
    DlrtMeta *meta = NULL;
    int nmeta = 0;
    int failed = -1;  /* files that failed; -1 while nothing can be classified */
    if (!out.logits || !out.probs)
        fprintf(stderr, "%s: out of memory for batches of %lld\n", m->name, (long long)o->batch);
    else if (m->create(&net, o->batch, 0, &err) != DLRT_OK ||
             m->load(net, o->weights, &meta, &nmeta, &err) != DLRT_OK ||
             (m->freeze && m->freeze(net, &err) != DLRT_OK))
        fprintf(stderr, "%s: %s\n", m->name, err.message);
    else
        failed = 0;
    out.names = dlrt_images_class_names(meta, nmeta, &out.nnames);
    dlrt_meta_free(meta, nmeta);
    int64_t images = 0;
    for (int i = 0; failed >= 0 && i < o->ninputs; i++) {
        DlrtDataset ds = {0};
        if (load_input(m, o->inputs[i], &ds, &err) != DLRT_OK ||
            classify(m, net, o->batch, o->inputs[i], &ds, &out, &seconds, &err) != DLRT_OK) {
            fflush(stdout);
            fprintf(stderr, "%s: %s\n", m->name, err.message);
            failed++;
        } else
            images += ds.count;
        dlrt_dataset_free(&ds);
    }
    int status = failed != 0;
    if (status == 0) {
        Report r = dlrt_report_new("predict");
        r.images = images;
        r.images_per_second = (double)images / (seconds > 0 ? seconds : 1e-9);
        r.seconds = dlrt_clock() - begin;
        status = dlrt_report_write(m, o, &r) ? 0 : 1;
    }
    if (net)
        m->free(net);
    free(out.logits);
    free(out.probs);
    if (out.names)
        free(out.names[0]);
    free(out.names);
    return status;
}
