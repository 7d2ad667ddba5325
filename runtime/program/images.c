/* images.c — the train section's images(...): folders of PNG and JPEG
 * images for `train`, `eval`, `predict` and `bench`.
 *
 * The network's input must be [C, H, W] with C = 1 (images become
 * grayscale, PIL's "L") or C = 3 (RGB).  Training reads the folder's train
 * split through a loader with the training transform (images(train=...),
 * else the eval one), shuffled; validation and `eval` read the validation
 * split with the eval transform, in order; `predict` applies the eval
 * transform to each file.  The class names, the training folder's, go into
 * every checkpoint (metadata "classes"), so that `predict` prints names.
 *
 * A network whose train section names no images(...) still reads a folder
 * of images given as --data (a folder of subfolders, without IDX files),
 * with the transform resize(H) -> center_crop(H, W) for training and
 * evaluation alike: the identity for images of the input's size already,
 * and a photo's centre for others.  predict applies that transform to PNG and
 * JPEG files whose size is not the input's.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "program.h"

/* Batches decoded ahead of the one in use, per worker, in at most
 * PREFETCH_BYTES for each loader (2 batches at least). */
#define PREFETCH_PER_WORKER 2
#define PREFETCH_BYTES (INT64_C(256) << 20)

bool dlrt_images_shape(const DlrtModel *m, int64_t *c, int64_t *h, int64_t *w) {
    if (m->rank != 3 || (m->dims[0] != 1 && m->dims[0] != 3))
        return false;
    *c = m->dims[0];
    *h = m->dims[1];
    *w = m->dims[2];
    return true;
}

/* Whether path is a folder that holds subfolders and no IDX training or
 * test images (an empty folder keeps the IDX loader's message). */
static bool image_folder(const char *path) {
    DIR *d = opendir(path);
    if (!d)
        return false;
    bool idx = false, sub = false;
    struct dirent *e;
    while (!idx && (e = readdir(d)) != NULL) {
        idx = strncmp(e->d_name, "train-images-idx", 16) == 0 ||
              strncmp(e->d_name, "t10k-images-idx", 15) == 0;
        sub |= e->d_type == DT_DIR && e->d_name[0] != '.';
    }
    closedir(d);
    return !idx && sub;
}

bool dlrt_images_wanted(const DlrtModel *m, const Options *o) {
    int64_t c, h, w;
    if (m->images)
        return o->data != NULL;
    return o->data && m->vocab == 0 && dlrt_images_shape(m, &c, &h, &w) && image_folder(o->data);
}

/* The train section's images(...), or the default for a folder given as
 * --data alone (its transform's text in buf). */
static DlrtImageSource source(const DlrtModel *m, char *buf, size_t size) {
    if (m->images)
        return *m->images;
    snprintf(buf, size, "resize(%lld) -> center_crop(%lld, %lld)", (long long)m->dims[1],
             (long long)m->dims[1], (long long)m->dims[2]);
    return (DlrtImageSource){.path = NULL, .val_fraction = 0.1, .train = NULL, .eval = buf};
}

int dlrt_images_workers(const Options *o) {
    if (o->workers > 0)
        return (int)o->workers;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

/* The first `keep` images of f in a fixed shuffle, in f's order: --limit. */
static void limit_folder(DlrtImageFolder *f, int64_t keep) {
    if (keep <= 0 || keep >= f->count)
        return;
    int64_t *order = malloc(sizeof *order * (size_t)f->count);
    bool *kept = calloc((size_t)f->count, sizeof *kept);
    if (order && kept) {
        DlrtRng rng;
        dlrt_rng_seed(&rng, 0x6c696d);
        for (int64_t i = 0; i < f->count; i++)
            order[i] = i;
        for (int64_t i = f->count - 1; i > 0; i--) {
            int64_t j = (int64_t)dlrt_rng_below(&rng, (uint64_t)i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int64_t i = 0; i < keep; i++)
            kept[order[i]] = true;
        int64_t n = 0;
        for (int64_t i = 0; i < f->count; i++) {
            if (kept[i]) {
                f->paths[n] = f->paths[i];
                f->labels[n++] = f->labels[i];
            } else {
                free(f->paths[i]);
            }
        }
        f->count = n;
    }
    free(order);
    free(kept);
}

bool dlrt_images_open(ImageData *d, const DlrtModel *m, const Options *o, bool train,
                      uint64_t seed) {
    char text[128];
    DlrtImageSource own = source(m, text, sizeof text);
    const DlrtImageSource *src = &own;
    DlrtError err = {0};
    int64_t c, h, w;
    if (!dlrt_images_shape(m, &c, &h, &w)) {
        char have[128];
        fprintf(stderr, "%s: images(...) needs a network whose input is [1, H, W] or [3, H, W], "
                "not %s\n", m->name, dlrt_shape_text(have, sizeof have, m->dims, m->rank));
        return false;
    }
    DlrtStatus st = dlrt_transform_parse(&d->eval_tf, src->eval, &err);
    if (st == DLRT_OK)
        st = dlrt_transform_parse(&d->train_tf, src->train ? src->train : src->eval, &err);
    if (st == DLRT_OK)
        st = dlrt_image_folders(train ? &d->train : NULL, &d->val, o->data, src->val_fraction,
                                &err);
    if (st != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, err.message);
        return false;
    }
    const DlrtImageFolder *named = train ? &d->train : &d->val;
    if (named->num_classes != m->classes) {
        fprintf(stderr, "%s: %s has %d classes, but the network has %lld outputs: make its last "
                "layer %d wide\n", m->name, o->data, (int)named->num_classes,
                (long long)m->classes, (int)named->num_classes);
        return false;
    }
    if (train)
        limit_folder(&d->train, o->limit);
    if (!train && d->val.count == 0) {
        fprintf(stderr, "%s: %s: no validation images (a val/ folder beside train/, or "
                "images(val=...))\n", m->name, o->data);
        return false;
    }
    int workers = dlrt_images_workers(o);
    int64_t bytes = o->batch * c * h * w * (int64_t)sizeof(float);
    int64_t fit = PREFETCH_BYTES / (bytes > 0 ? bytes : 1);
    int prefetch = workers * PREFETCH_PER_WORKER;
    prefetch = fit < prefetch ? (fit > 2 ? (int)fit : 2) : prefetch;
    if (train)
        st = dlrt_loader_open(&d->train_loader, &d->train, &d->train_tf, c, h, w, o->batch, true,
                              seed, workers, prefetch, &err);
    if (st == DLRT_OK && d->val.count > 0)
        st = dlrt_loader_open(&d->val_loader, &d->val, &d->eval_tf, c, h, w, o->batch, false,
                              seed, workers, prefetch, &err);
    if (st != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, err.message);
        return false;
    }
    d->classes = dlrt_image_classes_text(named);
    return d->classes != NULL;
}

bool dlrt_images_bench(const DlrtModel *m, const Options *o, int64_t batches, double *ips) {
    ImageData d = {0};
    bool ok = dlrt_images_open(&d, m, o, true, o->seed);
    float *x = ok ? malloc(sizeof *x * (size_t)(o->batch * m->input_size)) : NULL;
    int32_t *y = ok ? malloc(sizeof *y * (size_t)o->batch) : NULL;
    if (ok && (!x || !y)) {
        fprintf(stderr, "%s: out of memory\n", m->name);
        ok = false;
    }
    if (ok) {
        DlrtError err = {0};
        int64_t n = 0, images = 0;
        double t0 = dlrt_clock();
        dlrt_loader_start_epoch(d.train_loader, 0);
        for (int64_t b = 0; b < batches; b++) {
            if (dlrt_loader_next(d.train_loader, x, y, &n, &err) != DLRT_OK) {
                fprintf(stderr, "%s: %s\n", m->name, err.message);
                ok = false;
            }
            if (!ok || n == 0)
                break;
            images += n;
        }
        double seconds = dlrt_clock() - t0;
        *ips = (double)images / (seconds > 0 ? seconds : 1e-9);
    }
    free(x);
    free(y);
    dlrt_images_close(&d);
    return ok;
}

void dlrt_images_close(ImageData *d) {
    dlrt_loader_close(d->train_loader);
    dlrt_loader_close(d->val_loader);
    dlrt_image_folder_free(&d->train);
    dlrt_image_folder_free(&d->val);
    free(d->classes);
    *d = (ImageData){0};
}

DlrtStatus dlrt_images_load_file(const DlrtModel *m, const char *path, DlrtDataset *ds,
                                 DlrtError *err) {
    int64_t c, h, w;
    *ds = (DlrtDataset){0};
    if (!dlrt_images_shape(m, &c, &h, &w)) {
        char have[128];
        return dlrt_fail(err, DLRT_E_SHAPE, "%s: an image, but the network takes %s", path,
                         dlrt_shape_text(have, sizeof have, m->dims, m->rank));
    }
    DlrtTransform t = {0};
    char text[128];
    DlrtImageSource src = source(m, text, sizeof text);
    DlrtImage img;
    DlrtStatus st = dlrt_image_read(&img, path, (int)c, err);
    if (st != DLRT_OK)
        return st;
    /* the eval transform, or the default for an image not of the size */
    if (m->images || img.height != h || img.width != w)
        st = dlrt_transform_parse(&t, src.eval, err);
    DlrtRng rng;
    dlrt_rng_seed(&rng, 0);
    if (st == DLRT_OK)
        st = dlrt_transform_apply(&t, &img, &rng, err);
    if (st == DLRT_OK && (img.height != h || img.width != w))
        st = dlrt_fail(err, DLRT_E_SHAPE, "%s: an image of %lldx%lld pixels%s, but the network "
                       "takes %lldx%lld", path, (long long)img.width, (long long)img.height,
                       t.n ? " after the eval transform" : "", (long long)w, (long long)h);
    if (st == DLRT_OK) {
        ds->count = 1;
        ds->rank = 3;
        ds->dims[0] = c;
        ds->dims[1] = h;
        ds->dims[2] = w;
        ds->sample_size = c * h * w;
        ds->x = img.data; /* taken over */
        return DLRT_OK;
    }
    dlrt_image_free(&img);
    return st;
}

char **dlrt_images_class_names(const DlrtMeta *meta, int nmeta, int32_t *n) {
    *n = 0;
    for (int i = 0; i < nmeta; i++) {
        if (strcmp(meta[i].key, DLRT_CLASSES_KEY) != 0)
            continue;
        int32_t count = 1;
        for (const char *s = meta[i].value; *s; s++)
            count += *s == '\n';
        char **names = calloc((size_t)count, sizeof *names);
        char *copy = strdup(meta[i].value);
        if (!names || !copy) {
            free(names);
            free(copy);
            return NULL;
        }
        /* names[0] owns the copy; the others point into it */
        char *s = copy;
        for (int32_t k = 0; k < count; k++) {
            names[k] = s;
            char *nl = strchr(s, '\n');
            if (nl) {
                *nl = 0;
                s = nl + 1;
            }
        }
        *n = count;
        return names;
    }
    return NULL;
}
