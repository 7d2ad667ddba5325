/* imagefolder.c — folders of images, a subfolder per class, and the loader
 * that decodes their batches on worker threads while the network trains.
 *
 * Listing follows torchvision's ImageFolder: the classes are root's
 * subfolders, sorted; a class's images are the files with an image
 * extension in its folder and the folders below it (symbolic links
 * followed, as os.walk(followlinks=True) does), folder after folder in the
 * sorted order of their paths, names sorted within one.  Only names are
 * read: a folder of 100,000 images lists in the time readdir takes.
 *
 * The loader keeps `prefetch` slots of a batch each.  Batch k of an epoch
 * goes to slot k % prefetch; a worker claims the next batch once the slot
 * it needs has been handed out, fills it (reading, decoding, transforming
 * each image) without holding the lock, and marks it ready.  The caller
 * takes batches in order, waiting only for one that is not ready yet.  A
 * failure is kept in the slot and reported when that batch is taken, so
 * the batches before it are still used, as a PyTorch DataLoader raises at
 * the batch whose image failed.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "dlrt.h"

/* ---- listing -------------------------------------------------------------- */

/* A growing array of strings. */
typedef struct Names {
    char **v;
    int64_t n, cap;
} Names;

static bool names_push(Names *s, char *name) {
    if (!name)
        return false;
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 16;
        char **v = realloc(s->v, sizeof *v * (size_t)cap);
        if (!v) {
            free(name);
            return false;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = name;
    return true;
}

static void names_free(Names *s) {
    for (int64_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    *s = (Names){0};
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *s = malloc(a + b + 2);
    if (s) {
        memcpy(s, dir, a);
        s[a] = '/';
        memcpy(s + a + 1, name, b + 1);
    }
    return s;
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool has_image_extension(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".png") == 0 || strcasecmp(dot, ".jpg") == 0 ||
                   strcasecmp(dot, ".jpeg") == 0);
}

/* The entries of dir (not "." and ".."), split into subfolders and image
 * files, full paths, unsorted. */
static DlrtStatus list_dir(const char *dir, Names *dirs, Names *files, DlrtError *err) {
    errno = 0;
    DIR *d = opendir(dir);
    if (!d)
        return dlrt_fail(err, DLRT_E_IO, "%s: cannot open the folder: %s", dir,
                         strerror(errno ? errno : ENOENT));
    struct dirent *e;
    bool ok = true;
    while (ok && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        bool want_file = files && has_image_extension(e->d_name);
        if (!want_file && !dirs)
            continue;
        char *path = join(dir, e->d_name);
        if (!path) {
            ok = false;
            break;
        }
        /* d_type spares a stat per file; links and unknown types need one */
        bool folder = e->d_type == DT_DIR || ((e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) &&
                                              is_dir(path));
        if (folder && dirs)
            ok = names_push(dirs, path);
        else if (!folder && want_file)
            ok = names_push(files, path);
        else
            free(path);
    }
    closedir(d);
    return ok ? DLRT_OK : dlrt_fail(err, DLRT_E_NOMEM, "%s: out of memory listing", dir);
}

/* Appends the images of a class folder and the folders below it, in
 * ImageFolder's order, to paths; depth bounds link cycles. */
static DlrtStatus list_class(const char *dir, Names *paths, DlrtError *err) {
    Names todo = {0}, all = {0};
    DlrtStatus st = names_push(&todo, strdup(dir)) ? DLRT_OK
                                                   : dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    /* every folder below dir, then sorted by path as sorted(os.walk()) */
    while (st == DLRT_OK && todo.n > 0) {
        char *d = todo.v[--todo.n];
        if (!names_push(&all, d))
            st = dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
        else if (all.n > 100000)
            st = dlrt_fail(err, DLRT_E_RANGE, "%s: more than 100000 folders below it (a loop "
                           "of links?)", dir);
        else
            st = list_dir(d, &todo, NULL, err);
    }
    if (st == DLRT_OK)
        qsort(all.v, (size_t)all.n, sizeof *all.v, by_name);
    for (int64_t i = 0; st == DLRT_OK && i < all.n; i++) {
        int64_t first = paths->n;
        st = list_dir(all.v[i], NULL, paths, err);
        if (st == DLRT_OK)
            qsort(paths->v + first, (size_t)(paths->n - first), sizeof *paths->v, by_name);
    }
    names_free(&todo);
    names_free(&all);
    return st;
}

void dlrt_image_folder_free(DlrtImageFolder *f) {
    for (int32_t i = 0; i < f->num_classes; i++)
        free(f->classes[i]);
    for (int64_t i = 0; i < f->count; i++)
        free(f->paths[i]);
    free(f->classes);
    free(f->paths);
    free(f->labels);
    *f = (DlrtImageFolder){0};
}

/* The classes of root (or, with known, root's subfolders as labels of
 * known's classes) and their images. */
static DlrtStatus list_folder(DlrtImageFolder *f, const char *root, const DlrtImageFolder *known,
                              DlrtError *err) {
    *f = (DlrtImageFolder){0};
    Names classes = {0}, paths = {0};
    int32_t *labels = NULL;
    DlrtStatus st = list_dir(root, &classes, NULL, err);
    if (st == DLRT_OK && classes.n == 0)
        st = dlrt_fail(err, DLRT_E_FORMAT, "%s: no class folders in it (ImageFolder's layout: "
                       "ROOT/CLASS/IMAGE.png)", root);
    if (st == DLRT_OK && classes.n > INT32_MAX / 2)
        st = dlrt_fail(err, DLRT_E_RANGE, "%s: too many class folders", root);
    if (st == DLRT_OK)
        qsort(classes.v, (size_t)classes.n, sizeof *classes.v, by_name);
    for (int64_t c = 0; st == DLRT_OK && c < classes.n; c++) {
        const char *name = strrchr(classes.v[c], '/') + 1;
        int32_t label = (int32_t)c;
        if (strchr(name, '\n'))
            st = dlrt_fail(err, DLRT_E_FORMAT, "%s: a class name with a newline", classes.v[c]);
        if (st == DLRT_OK && known) {
            label = -1;
            for (int32_t k = 0; k < known->num_classes; k++)
                if (strcmp(known->classes[k], name) == 0)
                    label = k;
            if (label < 0)
                st = dlrt_fail(err, DLRT_E_FORMAT, "%s: a class that the training folder does "
                               "not have", classes.v[c]);
        }
        int64_t first = paths.n;
        if (st == DLRT_OK)
            st = list_class(classes.v[c], &paths, err);
        if (st == DLRT_OK && paths.n == first && !known)
            st = dlrt_fail(err, DLRT_E_FORMAT, "%s: no images in this class folder (*.png, "
                           "*.jpg, *.jpeg)", classes.v[c]);
        if (st == DLRT_OK && paths.n > first) {
            int32_t *nl = realloc(labels, sizeof *nl * (size_t)paths.n);
            if (!nl) {
                st = dlrt_fail(err, DLRT_E_NOMEM, "out of memory listing %s", root);
                break;
            }
            labels = nl;
            for (int64_t i = first; i < paths.n; i++)
                labels[i] = label;
        }
    }
    if (st != DLRT_OK) {
        names_free(&classes);
        names_free(&paths);
        free(labels);
        return st;
    }
    if (known) { /* the training folder's classes */
        names_free(&classes);
        f->classes = calloc((size_t)known->num_classes, sizeof *f->classes);
        for (int32_t k = 0; f->classes && k < known->num_classes; k++)
            f->classes[k] = strdup(known->classes[k]);
        f->num_classes = f->classes ? known->num_classes : 0;
    } else {
        for (int64_t c = 0; c < classes.n; c++) { /* the names alone */
            char *name = strdup(strrchr(classes.v[c], '/') + 1);
            free(classes.v[c]);
            classes.v[c] = name;
        }
        f->classes = classes.v;
        f->num_classes = (int32_t)classes.n;
    }
    f->count = paths.n;
    f->paths = paths.v;
    f->labels = labels;
    return DLRT_OK;
}

DlrtStatus dlrt_image_folders(DlrtImageFolder *train, DlrtImageFolder *val, const char *root,
                              double val_fraction, DlrtError *err) {
    DlrtImageFolder tr = {0}, va = {0};
    if (train)
        *train = tr;
    if (val)
        *val = va;
    if (!(val_fraction >= 0 && val_fraction < 1))
        return dlrt_fail(err, DLRT_E_ARG, "a validation fraction of %g (from 0 to 1)",
                         val_fraction);
    char *tdir = join(root, "train"), *vdir = join(root, "val");
    if (!tdir || !vdir) {
        free(tdir);
        free(vdir);
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    }
    DlrtStatus st;
    if (!is_dir(root))
        st = dlrt_fail(err, DLRT_E_IO, "%s: not a folder of images", root);
    else if (is_dir(tdir) && is_dir(vdir)) {
        st = list_folder(&tr, tdir, NULL, err);
        if (st == DLRT_OK && val)
            st = list_folder(&va, vdir, &tr, err);
    } else {
        st = list_folder(&tr, root, NULL, err);
        int64_t nval = (int64_t)((double)tr.count * val_fraction + 0.5);
        if (st == DLRT_OK && val_fraction > 0 && (nval == 0 || nval == tr.count))
            st = dlrt_fail(err, DLRT_E_SHAPE, "%s: %lld images, too few to hold out %g of them "
                           "for validation", root, (long long)tr.count, val_fraction);
        if (st == DLRT_OK && nval > 0) {
            /* a fixed shuffle, whatever the run's seed, so that a resumed
               run and eval hold out the same images; the sets keep the
               folder's order */
            int64_t *order = malloc(sizeof *order * (size_t)tr.count);
            bool *held = calloc((size_t)tr.count, sizeof *held);
            va.paths = malloc(sizeof *va.paths * (size_t)nval);
            va.labels = malloc(sizeof *va.labels * (size_t)nval);
            va.classes = calloc((size_t)tr.num_classes, sizeof *va.classes);
            if (!order || !held || !va.paths || !va.labels || !va.classes) {
                st = dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
            } else {
                DlrtRng rng;
                dlrt_rng_seed(&rng, 0x76616c);
                for (int64_t i = 0; i < tr.count; i++)
                    order[i] = i;
                for (int64_t i = tr.count - 1; i > 0; i--) {
                    int64_t j = (int64_t)dlrt_rng_below(&rng, (uint64_t)i + 1), t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
                for (int64_t i = 0; i < nval; i++)
                    held[order[i]] = true;
                int64_t kept = 0;
                for (int64_t i = 0; i < tr.count; i++) {
                    if (held[i]) {
                        va.paths[va.count] = tr.paths[i];
                        va.labels[va.count++] = tr.labels[i];
                    } else {
                        tr.paths[kept] = tr.paths[i];
                        tr.labels[kept++] = tr.labels[i];
                    }
                }
                tr.count = kept;
                for (int32_t k = 0; k < tr.num_classes; k++)
                    va.classes[k] = strdup(tr.classes[k]);
                va.num_classes = tr.num_classes;
            }
            free(order);
            free(held);
        }
    }
    free(tdir);
    free(vdir);
    if (st != DLRT_OK) {
        dlrt_image_folder_free(&tr);
        dlrt_image_folder_free(&va);
        return st;
    }
    if (train)
        *train = tr;
    else
        dlrt_image_folder_free(&tr);
    if (val)
        *val = va;
    else
        dlrt_image_folder_free(&va);
    return DLRT_OK;
}

char *dlrt_image_classes_text(const DlrtImageFolder *f) {
    size_t len = 1;
    for (int32_t k = 0; k < f->num_classes; k++)
        len += strlen(f->classes[k]) + 1;
    char *s = malloc(len), *p = s;
    for (int32_t k = 0; s && k < f->num_classes; k++) {
        size_t n = strlen(f->classes[k]);
        memcpy(p, f->classes[k], n);
        p += n;
        *p++ = '\n';
    }
    if (s) {
        if (p > s)
            p--;
        *p = 0;
    }
    return s;
}

/* ---- the loader ----------------------------------------------------------- */

/* A batch being filled or waiting to be taken. */
typedef struct Slot {
    float *x;
    int32_t *y;
    int64_t batch;      /* the batch it holds, -1 for none */
    int64_t n;          /* samples */
    bool ready;
    DlrtError err;      /* the first image that failed, if any */
} Slot;

struct DlrtLoader {
    const DlrtImageFolder *f;
    DlrtTransform t;
    int64_t channels, height, width, sample, batch;
    bool shuffle;
    uint64_t seed;
    int nworkers, nslots;
    pthread_t *threads;
    Slot *slots;
    int64_t *order;      /* this epoch's */
    int64_t epoch, nbatches;
    int64_t next_job;    /* the next batch to fill */
    int64_t taken;       /* the next batch to hand out */
    int busy;            /* workers filling a slot */
    bool stop;
    double seconds;      /* spent loading, all workers */
    int64_t images;
    pthread_mutex_t mu;
    pthread_cond_t work; /* a batch may be claimed, or stop */
    pthread_cond_t done; /* a batch is ready, or a worker idle */
};

/* Loads image `index` of the folder into x, transformed; a message naming
 * the file on failure. */
static DlrtStatus load_one(DlrtLoader *l, int64_t index, int64_t epoch, float *x,
                           DlrtError *err) {
    const char *path = l->f->paths[index];
    DlrtImage img;
    DlrtStatus st = dlrt_image_read(&img, path, (int)l->channels, err);
    if (st != DLRT_OK)
        return st;
    DlrtRng rng;
    dlrt_rng_seed(&rng, dlrt_rng_derive(l->seed ^ 0x696d67, (uint64_t)epoch, (uint64_t)index));
    st = dlrt_transform_apply(&l->t, &img, &rng, err);
    if (st != DLRT_OK) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s", err ? err->message : "");
        st = dlrt_fail(err, st, "%s: %s", path, msg);
    } else if (img.height != l->height || img.width != l->width) {
        st = dlrt_fail(err, DLRT_E_SHAPE, "%s: an image of %lldx%lld pixels after the "
                       "transform, but the network takes %lldx%lld: give images(...) a "
                       "transform that resizes or crops to it", path, (long long)img.width,
                       (long long)img.height, (long long)l->width, (long long)l->height);
    } else {
        memcpy(x, img.data, sizeof *x * (size_t)l->sample);
    }
    dlrt_image_free(&img);
    return st;
}

static void *worker(void *arg) {
    DlrtLoader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && !(l->next_job < l->nbatches && l->next_job < l->taken + l->nslots))
            pthread_cond_wait(&l->work, &l->mu);
        if (l->stop)
            break;
        int64_t k = l->next_job++, epoch = l->epoch;
        Slot *s = &l->slots[k % l->nslots];
        const int64_t *order = l->order;
        l->busy++;
        pthread_mutex_unlock(&l->mu);

        double t0 = dlrt_clock();
        int64_t first = k * l->batch;
        int64_t n = l->f->count - first < l->batch ? l->f->count - first : l->batch;
        s->err = (DlrtError){0};
        DlrtStatus st = DLRT_OK;
        for (int64_t i = 0; i < n && st == DLRT_OK; i++) {
            int64_t index = order[first + i];
            s->y[i] = l->f->labels[index];
            st = load_one(l, index, epoch, s->x + i * l->sample, &s->err);
        }
        double spent = dlrt_clock() - t0;

        pthread_mutex_lock(&l->mu);
        s->n = n;
        s->batch = k;
        s->ready = true;
        l->busy--;
        l->seconds += spent;
        l->images += n;
        pthread_cond_broadcast(&l->done);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

void dlrt_loader_close(DlrtLoader *l) {
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nworkers; i++)
        pthread_join(l->threads[i], NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->work);
    pthread_cond_destroy(&l->done);
    for (int i = 0; l->slots && i < l->nslots; i++) {
        free(l->slots[i].x);
        free(l->slots[i].y);
    }
    free(l->slots);
    free(l->threads);
    free(l->order);
    free(l);
}

DlrtStatus dlrt_loader_open(DlrtLoader **out, const DlrtImageFolder *f, const DlrtTransform *t,
                            int64_t channels, int64_t height, int64_t width, int64_t batch,
                            bool shuffle, uint64_t seed, int workers, int prefetch,
                            DlrtError *err) {
    *out = NULL;
    if ((channels != 1 && channels != 3) || height < 1 || width < 1 || batch < 1 ||
        workers < 1 || workers > 1024 || prefetch < 1 || prefetch > 1024)
        return dlrt_fail(err, DLRT_E_ARG, "a loader of %lld channels, %lldx%lld, batch %lld, "
                         "%d workers, %d batches ahead", (long long)channels, (long long)width,
                         (long long)height, (long long)batch, workers, prefetch);
    DlrtLoader *l = calloc(1, sizeof *l);
    if (!l)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for the loader");
    *l = (DlrtLoader){.f = f, .t = t ? *t : (DlrtTransform){0}, .channels = channels,
                      .height = height, .width = width, .sample = channels * height * width,
                      .batch = batch, .shuffle = shuffle, .seed = seed, .nslots = prefetch,
                      .epoch = -1};
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->done, NULL);
    l->order = malloc(sizeof *l->order * (size_t)(f->count > 0 ? f->count : 1));
    l->slots = calloc((size_t)prefetch, sizeof *l->slots);
    l->threads = calloc((size_t)workers, sizeof *l->threads);
    bool ok = l->order && l->slots && l->threads;
    for (int i = 0; ok && i < prefetch; i++) {
        l->slots[i].x = malloc(sizeof(float) * (size_t)(batch * l->sample));
        l->slots[i].y = malloc(sizeof(int32_t) * (size_t)batch);
        ok = l->slots[i].x && l->slots[i].y;
    }
    if (!ok) {
        dlrt_loader_close(l);
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for %d batches of %lld images",
                         prefetch, (long long)batch);
    }
    for (int i = 0; i < workers; i++) {
        if (pthread_create(&l->threads[i], NULL, worker, l) != 0) {
            dlrt_loader_close(l);
            return dlrt_fail(err, DLRT_E_NOMEM, "cannot start loader thread %d of %d", i + 1,
                             workers);
        }
        l->nworkers++;
    }
    *out = l;
    return DLRT_OK;
}

void dlrt_loader_start_epoch(DlrtLoader *l, int64_t epoch) {
    pthread_mutex_lock(&l->mu);
    l->nbatches = 0; /* no new claims while the old ones finish */
    while (l->busy > 0)
        pthread_cond_wait(&l->done, &l->mu);
    /* a batcher's order: an IDX file of the same images in the folder's
       order gives the same batches */
    dlrt_epoch_order(l->order, l->f->count, l->shuffle, l->seed, epoch);
    for (int i = 0; i < l->nslots; i++) {
        l->slots[i].ready = false;
        l->slots[i].batch = -1;
    }
    l->epoch = epoch;
    l->next_job = 0;
    l->taken = 0;
    l->nbatches = (l->f->count + l->batch - 1) / l->batch;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
}

DlrtStatus dlrt_loader_next(DlrtLoader *l, float *x, int32_t *y, int64_t *n, DlrtError *err) {
    *n = 0;
    pthread_mutex_lock(&l->mu);
    if (l->taken >= l->nbatches) {
        pthread_mutex_unlock(&l->mu);
        return DLRT_OK;
    }
    int64_t k = l->taken;
    Slot *s = &l->slots[k % l->nslots];
    while (!(s->ready && s->batch == k))
        pthread_cond_wait(&l->done, &l->mu);
    pthread_mutex_unlock(&l->mu);
    /* the slot is ours until taken moves past it */
    DlrtStatus st = s->err.status;
    if (st != DLRT_OK) {
        if (err)
            *err = s->err;
    } else {
        if (x)
            memcpy(x, s->x, sizeof *x * (size_t)(s->n * l->sample));
        if (y)
            memcpy(y, s->y, sizeof *y * (size_t)s->n);
        *n = s->n;
    }
    pthread_mutex_lock(&l->mu);
    s->ready = false;
    l->taken = k + 1;
    if (st != DLRT_OK) /* a failure ends the epoch */
        l->taken = l->next_job = l->nbatches;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
    return st;
}

void dlrt_loader_stats(const DlrtLoader *l, double *seconds, int64_t *images) {
    DlrtLoader *m = (DlrtLoader *)l; /* the lock, not the state, changes */
    pthread_mutex_lock(&m->mu);
    *seconds = l->seconds;
    *images = l->images;
    pthread_mutex_unlock(&m->mu);
}
