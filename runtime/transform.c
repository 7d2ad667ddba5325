/* transform.c — torchvision's preprocessing and augmentation of images.
 *
 * A transform is a chain of steps written as the train section writes it,
 * "random_resized_crop(224) -> hflip -> normalize(mean=[0.485, 0.456,
 * 0.406], std=[0.229, 0.224, 0.225])", each step torchvision's of the same
 * meaning, applied to an image of floats in [0, 1] (ToTensor's):
 *
 *   resize(S), resize(H, W)     Resize(S): the smaller side to S, the other
 *                               int(S * long / short); Resize((H, W));
 *                               bilinear, antialiased (antialias=True)
 *   center_crop(S), (H, W)      CenterCrop: offsets round((n - c) / 2),
 *                               halves to even as Python's round; a crop
 *                               larger than the image pads it with zeros
 *   random_resized_crop(S ...,  RandomResizedCrop: a box of a random area
 *     scale=[a, b],             (scale, of the image's) and aspect (ratio,
 *     ratio=[a, b])             log-uniform), ten tries, else the centre
 *                               box of the nearest allowed aspect; the box
 *                               resized to S x S (or H x W)
 *   hflip, hflip(p)             RandomHorizontalFlip(p), p = 0.5
 *   normalize(mean, std)        Normalize: (x - mean) / std per channel;
 *                               a number, or a list of one per channel
 *
 * Sizes may also be written as a list, resize([H, W]).  The resize is
 * separable, as PIL's and torch's antialiased kernels are: each output
 * pixel is a weighted mean of the inputs under a triangle filter
 * stretched by the scale when shrinking (support = scale), so that every
 * input contributes; weights are normalized to sum to 1.  It computes in
 * floats, not in 8 bits between the passes as PIL does, so it agrees with
 * torchvision's tensor path to float rounding and with its PIL path to
 * within 1/255.  Random steps draw from the generator they are given: the
 * caller seeds one per image, so that results do not depend on threads.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"

/* ---- parsing ------------------------------------------------------------ */

typedef struct Parser {
    const char *s;      /* the next character */
    const char *text;   /* all of it, for messages */
    DlrtError *err;
} Parser;

/* One argument: a number or a list of up to 4 numbers. */
typedef struct Arg {
    char key[16];       /* "" when positional */
    int n;              /* numbers; list marks a list */
    double v[4];
    bool list;
} Arg;

static void skip_space(Parser *p) {
    while (isspace((unsigned char)*p->s))
        p->s++;
}

static DlrtStatus syntax(Parser *p, const char *what) {
    return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": %s at column %d", p->text, what,
                     (int)(p->s - p->text) + 1);
}

static DlrtStatus parse_number(Parser *p, double *v) {
    skip_space(p);
    char *end;
    *v = strtod(p->s, &end);
    if (end == p->s || !isfinite(*v))
        return syntax(p, "expected a number");
    p->s = end;
    return DLRT_OK;
}

static DlrtStatus parse_arg(Parser *p, Arg *a) {
    *a = (Arg){0};
    skip_space(p);
    const char *start = p->s;
    if (isalpha((unsigned char)*p->s) || *p->s == '_')
        while (isalnum((unsigned char)*p->s) || *p->s == '_')
            p->s++;
    if (p->s > start) {
        if ((size_t)(p->s - start) >= sizeof a->key)
            return syntax(p, "argument name too long");
        memcpy(a->key, start, (size_t)(p->s - start));
        skip_space(p);
        if (*p->s != '=')
            return syntax(p, "expected '=' after the argument's name");
        p->s++;
        skip_space(p);
    }
    if (*p->s != '[') {
        a->n = 1;
        return parse_number(p, &a->v[0]);
    }
    a->list = true;
    p->s++;
    for (;;) {
        if (a->n == 4)
            return syntax(p, "a list of more than 4 numbers");
        DlrtStatus st = parse_number(p, &a->v[a->n++]);
        if (st != DLRT_OK)
            return st;
        skip_space(p);
        if (*p->s == ']') {
            p->s++;
            return DLRT_OK;
        }
        if (*p->s != ',')
            return syntax(p, "expected ',' or ']' in the list");
        p->s++;
    }
}

/* The step named `name` from its arguments; messages name the step. */
static DlrtStatus make_step(Parser *p, const char *name, const Arg *args, int nargs,
                            DlrtTransformStep *t) {
    static const char *const names[] = {"resize", "center_crop", "random_resized_crop", "hflip",
                                        "normalize"};
    int kind = -1;
    for (int k = 0; k < 5; k++)
        if (strcmp(name, names[k]) == 0)
            kind = k;
    if (kind < 0)
        return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": unknown step '%s' (known: resize, "
                         "center_crop, random_resized_crop, hflip, normalize)", p->text, name);
    *t = (DlrtTransformStep){.kind = (DlrtTransformKind)kind, .scale = {0.08, 1},
                             .ratio = {3.0 / 4, 4.0 / 3}, .p = 0.5};
    int positional = 0;
    double pos[4];
    for (int i = 0; i < nargs; i++) {
        const Arg *a = &args[i];
        bool sized = kind <= DLRT_TF_RANDOM_RESIZED_CROP;
        if (!a->key[0]) {
            if (sized && a->list && a->n == 2 && positional == 0) {
                pos[positional++] = a->v[0];
                pos[positional++] = a->v[1];
            } else if (!a->list && positional < 2) {
                pos[positional++] = a->v[0];
            } else {
                return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": %s() takes a size "
                                 "(S, or H, W)%s", p->text, name,
                                 kind == DLRT_TF_NORMALIZE ? " or mean and std" : "");
            }
            continue;
        }
        bool pair = a->list && a->n == 2;
        if (kind == DLRT_TF_RANDOM_RESIZED_CROP && strcmp(a->key, "scale") == 0 && pair) {
            t->scale[0] = a->v[0];
            t->scale[1] = a->v[1];
        } else if (kind == DLRT_TF_RANDOM_RESIZED_CROP && strcmp(a->key, "ratio") == 0 && pair) {
            t->ratio[0] = a->v[0];
            t->ratio[1] = a->v[1];
        } else if (kind == DLRT_TF_HFLIP && strcmp(a->key, "p") == 0 && !a->list) {
            t->p = a->v[0];
        } else if (kind == DLRT_TF_NORMALIZE &&
                   (strcmp(a->key, "mean") == 0 || strcmp(a->key, "std") == 0)) {
            float *dst = a->key[0] == 'm' ? t->mean : t->std;
            int *cnt = a->key[0] == 'm' ? &t->nmean : &t->nstd;
            for (int k = 0; k < a->n; k++)
                dst[k] = (float)a->v[k];
            *cnt = a->n;
        } else {
            return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": %s() has no argument "
                             "'%s' of this form", p->text, name, a->key);
        }
    }
    if (kind <= DLRT_TF_RANDOM_RESIZED_CROP) {
        if (positional < 1)
            return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": %s() needs a size",
                             p->text, name);
        for (int k = 0; k < positional; k++)
            if (pos[k] < 1 || pos[k] > 65536 || pos[k] != floor(pos[k]))
                return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": %s()'s size must be "
                                 "a whole number from 1 to 65536, got %g", p->text, name, pos[k]);
        t->height = (int64_t)pos[0];
        t->width = positional == 2 ? (int64_t)pos[1] : 0;
        if (kind != DLRT_TF_RESIZE && t->width == 0)
            t->width = t->height;
        if (!(t->scale[0] > 0 && t->scale[0] <= t->scale[1] && t->scale[1] <= 1) ||
            !(t->ratio[0] > 0 && t->ratio[0] <= t->ratio[1]))
            return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": %s() needs 0 < scale[0] "
                             "<= scale[1] <= 1 and 0 < ratio[0] <= ratio[1]", p->text, name);
    } else if (kind == DLRT_TF_HFLIP) {
        if (positional == 1)
            t->p = pos[0];
        if (positional > 1 || !(t->p >= 0 && t->p <= 1))
            return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": hflip()'s p must be from "
                             "0 to 1", p->text);
    } else if (kind == DLRT_TF_NORMALIZE) {
        if (positional == 2) {
            t->mean[0] = (float)pos[0];
            t->std[0] = (float)pos[1];
            t->nmean = t->nstd = 1;
        }
        if (t->nmean == 0 || t->nstd == 0 || (positional != 0 && positional != 2))
            return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": normalize() needs mean "
                             "and std", p->text);
        for (int k = 0; k < t->nstd; k++)
            if (!(t->std[k] > 0))
                return dlrt_fail(p->err, DLRT_E_ARG, "transform \"%s\": normalize()'s std "
                                 "must be positive", p->text);
    }
    return DLRT_OK;
}

DlrtStatus dlrt_transform_parse(DlrtTransform *t, const char *text, DlrtError *err) {
    *t = (DlrtTransform){0};
    Parser p = {text ? text : "", text ? text : "", err};
    skip_space(&p);
    if (!*p.s)
        return DLRT_OK; /* no steps */
    for (;;) {
        skip_space(&p);
        char name[32];
        int len = 0;
        while ((isalnum((unsigned char)*p.s) || *p.s == '_') && len < 31)
            name[len++] = *p.s++;
        name[len] = 0;
        if (!len)
            return syntax(&p, "expected a step's name");
        Arg args[6];
        int nargs = 0;
        skip_space(&p);
        if (*p.s == '(') {
            p.s++;
            skip_space(&p);
            while (*p.s != ')') {
                if (nargs == 6)
                    return syntax(&p, "too many arguments");
                DlrtStatus st = parse_arg(&p, &args[nargs++]);
                if (st != DLRT_OK)
                    return st;
                skip_space(&p);
                if (*p.s == ',')
                    p.s++;
                else if (*p.s != ')')
                    return syntax(&p, "expected ',' or ')'");
                skip_space(&p);
            }
            p.s++;
        }
        if (t->n == DLRT_MAX_TRANSFORMS)
            return dlrt_fail(err, DLRT_E_ARG, "transform \"%s\": more than %d steps", text,
                             DLRT_MAX_TRANSFORMS);
        DlrtStatus st = make_step(&p, name, args, nargs, &t->step[t->n]);
        if (st != DLRT_OK)
            return st;
        t->n++;
        skip_space(&p);
        if (!*p.s)
            return DLRT_OK;
        if (p.s[0] != '-' || p.s[1] != '>')
            return syntax(&p, "expected '->' between steps");
        p.s += 2;
    }
}

/* ---- the steps ---------------------------------------------------------- */

/* The weights of an antialiased linear resize of n inputs to m outputs:
 * output i is the sum over k < size[i] of w[i * span + k] *
 * input[first[i] + k]. */
typedef struct Weights {
    int64_t span;
    int64_t *first, *size;
    float *w;
} Weights;

static void weights_free(Weights *w) {
    free(w->first);
    free(w->size);
    free(w->w);
}

static bool weights_make(Weights *wt, int64_t n, int64_t m) {
    double scale = (double)n / (double)m;
    double support = scale >= 1 ? scale : 1.0;
    double inv = scale >= 1 ? 1 / scale : 1.0;
    wt->span = (int64_t)ceil(support) * 2 + 1;
    wt->first = malloc(sizeof *wt->first * (size_t)m);
    wt->size = malloc(sizeof *wt->size * (size_t)m);
    wt->w = malloc(sizeof *wt->w * (size_t)(m * wt->span));
    if (!wt->first || !wt->size || !wt->w)
        return false;
    for (int64_t i = 0; i < m; i++) {
        double center = scale * ((double)i + 0.5);
        int64_t lo = (int64_t)(center - support + 0.5);
        int64_t hi = (int64_t)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = hi > n ? n : hi;
        int64_t size = hi - lo < wt->span ? hi - lo : wt->span;
        float *out = wt->w + i * wt->span;
        double total = 0;
        for (int64_t k = 0; k < size; k++) {
            double x = fabs(((double)(k + lo) - center + 0.5) * inv);
            total += x < 1 ? 1 - x : 0;
        }
        for (int64_t k = 0; k < size; k++) {
            double x = fabs(((double)(k + lo) - center + 0.5) * inv);
            out[k] = total != 0 ? (float)((x < 1 ? 1 - x : 0) / total) : 0;
        }
        wt->first[i] = lo;
        wt->size[i] = size;
    }
    return true;
}

DlrtStatus dlrt_image_resize(const DlrtImage *in, DlrtImage *out, int64_t height, int64_t width,
                             DlrtError *err) {
    DlrtStatus st = dlrt_image_alloc(out, in->channels, height, width, err);
    if (st != DLRT_OK)
        return st;
    Weights wx = {0}, wy = {0};
    float *tmp = malloc(sizeof *tmp * (size_t)(in->height * width));
    if (!tmp || !weights_make(&wx, in->width, width) || !weights_make(&wy, in->height, height)) {
        free(tmp);
        weights_free(&wx);
        weights_free(&wy);
        dlrt_image_free(out);
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory resizing an image");
    }
    for (int64_t c = 0; c < in->channels; c++) {
        const float *src = in->data + c * in->height * in->width;
        for (int64_t y = 0; y < in->height; y++) /* across: rows of width outputs */
            for (int64_t x = 0; x < width; x++) {
                const float *w = wx.w + x * wx.span, *s = src + y * in->width + wx.first[x];
                float v = 0;
                for (int64_t k = 0; k < wx.size[x]; k++)
                    v += w[k] * s[k];
                tmp[y * width + x] = v;
            }
        float *dst = out->data + c * height * width;
        for (int64_t y = 0; y < height; y++) { /* down */
            const float *w = wy.w + y * wy.span;
            float *row = dst + y * width;
            for (int64_t x = 0; x < width; x++)
                row[x] = 0;
            for (int64_t k = 0; k < wy.size[y]; k++) {
                const float *s = tmp + (wy.first[y] + k) * width;
                for (int64_t x = 0; x < width; x++)
                    row[x] += w[k] * s[x];
            }
        }
    }
    free(tmp);
    weights_free(&wx);
    weights_free(&wy);
    return DLRT_OK;
}

DlrtStatus dlrt_image_crop(const DlrtImage *in, DlrtImage *out, int64_t top, int64_t left,
                           int64_t height, int64_t width, DlrtError *err) {
    DlrtStatus st = dlrt_image_alloc(out, in->channels, height, width, err);
    if (st != DLRT_OK)
        return st;
    for (int64_t c = 0; c < in->channels; c++)
        for (int64_t y = 0; y < height; y++) {
            float *row = out->data + (c * height + y) * width;
            int64_t sy = top + y;
            for (int64_t x = 0; x < width; x++) {
                int64_t sx = left + x;
                row[x] = sy >= 0 && sy < in->height && sx >= 0 && sx < in->width
                             ? in->data[(c * in->height + sy) * in->width + sx]
                             : 0.0f;
            }
        }
    return DLRT_OK;
}

/* CenterCrop's offset of a crop of c in n: padding (a negative offset)
 * when the crop is larger. */
static int64_t center_offset(int64_t n, int64_t c) {
    if (c > n)
        return -((c - n) / 2);
    return (int64_t)rint((double)(n - c) / 2.0);
}

/* Uniform in [a, b) from the generator, in double. */
static double uniform(DlrtRng *rng, double a, double b) {
    double u = (double)(dlrt_rng_next(rng) >> 11) * 0x1.0p-53;
    return a + (b - a) * u;
}

/* RandomResizedCrop.get_params: the box (top, left, height, width). */
static void random_box(const DlrtTransformStep *t, int64_t h, int64_t w, DlrtRng *rng,
                       int64_t box[4]) {
    double area = (double)h * (double)w;
    double lr0 = log(t->ratio[0]), lr1 = log(t->ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform(rng, t->scale[0], t->scale[1]);
        double aspect = exp(uniform(rng, lr0, lr1));
        int64_t cw = (int64_t)nearbyint(sqrt(target * aspect));
        int64_t ch = (int64_t)nearbyint(sqrt(target / aspect));
        if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
            box[0] = (int64_t)dlrt_rng_below(rng, (uint64_t)(h - ch + 1));
            box[1] = (int64_t)dlrt_rng_below(rng, (uint64_t)(w - cw + 1));
            box[2] = ch;
            box[3] = cw;
            return;
        }
    }
    double in_ratio = (double)w / (double)h;
    int64_t cw = w, ch = h;
    if (in_ratio < t->ratio[0])
        ch = (int64_t)nearbyint((double)w / t->ratio[0]);
    else if (in_ratio > t->ratio[1])
        cw = (int64_t)nearbyint((double)h * t->ratio[1]);
    box[0] = (h - ch) / 2;
    box[1] = (w - cw) / 2;
    box[2] = ch;
    box[3] = cw;
}

/* Replaces *img by *next. */
static void take(DlrtImage *img, DlrtImage *next) {
    dlrt_image_free(img);
    *img = *next;
}

DlrtStatus dlrt_transform_apply(const DlrtTransform *t, DlrtImage *img, DlrtRng *rng,
                                DlrtError *err) {
    for (int i = 0; i < t->n; i++) {
        const DlrtTransformStep *s = &t->step[i];
        DlrtImage next = {0};
        DlrtStatus st = DLRT_OK;
        int64_t h = img->height, w = img->width;
        switch (s->kind) {
        case DLRT_TF_RESIZE: {
            int64_t oh = s->height, ow = s->width;
            if (ow == 0) { /* the smaller side to height */
                int64_t shortside = h < w ? h : w, longside = h < w ? w : h;
                int64_t other = (int64_t)((double)s->height * (double)longside / (double)shortside);
                oh = w <= h ? other : s->height;
                ow = w <= h ? s->height : other;
            }
            if (oh == h && ow == w)
                continue;
            st = dlrt_image_resize(img, &next, oh, ow, err);
            break;
        }
        case DLRT_TF_CENTER_CROP:
            st = dlrt_image_crop(img, &next, center_offset(h, s->height),
                                 center_offset(w, s->width), s->height, s->width, err);
            break;
        case DLRT_TF_RANDOM_RESIZED_CROP: {
            int64_t box[4];
            random_box(s, h, w, rng, box);
            DlrtImage crop;
            st = dlrt_image_crop(img, &crop, box[0], box[1], box[2], box[3], err);
            if (st == DLRT_OK) {
                st = dlrt_image_resize(&crop, &next, s->height, s->width, err);
                dlrt_image_free(&crop);
            }
            break;
        }
        case DLRT_TF_HFLIP:
            if (s->p <= 0 || uniform(rng, 0, 1) >= s->p)
                continue;
            for (int64_t r = 0; r < img->channels * h; r++) {
                float *row = img->data + r * w;
                for (int64_t x = 0; x < w / 2; x++) {
                    float v = row[x];
                    row[x] = row[w - 1 - x];
                    row[w - 1 - x] = v;
                }
            }
            continue;
        case DLRT_TF_NORMALIZE:
            if ((s->nmean != 1 && s->nmean != img->channels) ||
                (s->nstd != 1 && s->nstd != img->channels))
                return dlrt_fail(err, DLRT_E_SHAPE, "normalize() has %d means and %d standard "
                                 "deviations for an image of %lld channels", s->nmean, s->nstd,
                                 (long long)img->channels);
            for (int64_t c = 0; c < img->channels; c++) {
                float m = s->mean[s->nmean == 1 ? 0 : c], d = s->std[s->nstd == 1 ? 0 : c];
                float *plane = img->data + c * h * w;
                for (int64_t k = 0; k < h * w; k++)
                    plane[k] = (plane[k] - m) / d;
            }
            continue;
        }
        if (st != DLRT_OK)
            return st;
        take(img, &next);
    }
    return DLRT_OK;
}

bool dlrt_transform_random(const DlrtTransform *t) {
    for (int i = 0; i < t->n; i++)
        if (t->step[i].kind == DLRT_TF_RANDOM_RESIZED_CROP || t->step[i].kind == DLRT_TF_HFLIP)
            return true;
    return false;
}
