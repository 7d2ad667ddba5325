/* train.c — the train section: a network's training defaults.
 *
 * A train section is a list of key = value entries whose values are small
 * configuration terms (numbers, strings, symbols, calls).  The schema below
 * says which keys exist, what each accepts and in what range, so that a typo
 * or an out-of-range value is reported at compile time with its location,
 * for .dl and .dlir input alike.  The generated program reads these values
 * as the defaults of its command-line flags. */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DlcTrain *dlc_train_new(DlcModule *m, const char *network, DlcLoc loc) {
    DlcTrain *t = dlc_arena_alloc(&m->arena, sizeof *t);
    t->network = dlc_arena_strdup(&m->arena, network);
    t->loc = loc;
    DLC_PUSH(&m->arena, m->trains, m->ntrains, m->captrains, t);
    return t;
}

void dlc_train_add(DlcModule *m, DlcTrain *t, const char *key, DlcCfg val,
                   DlcLoc loc) {
    DlcTrainEntry e = {dlc_arena_strdup(&m->arena, key), val, loc};
    DLC_PUSH(&m->arena, t->entries, t->nentries, t->capentries, e);
}

const DlcCfg *dlc_train_get(const DlcTrain *t, const char *key) {
    for (int i = 0; i < t->nentries; i++)
        if (strcmp(t->entries[i].key, key) == 0)
            return &t->entries[i].val;
    return NULL;
}

DlcTrain *dlc_module_find_train(const DlcModule *m, const char *network) {
    for (int i = 0; i < m->ntrains; i++)
        if (strcmp(m->trains[i]->network, network) == 0)
            return m->trains[i];
    return NULL;
}

const DlcCfg *dlc_cfg_arg(const DlcCfg *call, const char *key, int position) {
    for (int i = 0; i < call->nargs; i++)
        if (call->args[i].key && strcmp(call->args[i].key, key) == 0)
            return &call->args[i].val;
    int pos = 0;
    for (int i = 0; i < call->nargs; i++)
        if (!call->args[i].key && pos++ == position)
            return &call->args[i].val;
    return NULL;
}

/* ---- the schema --------------------------------------------------------- */

/* A scalar's expected type and range.  Numbers are checked against
 * [min, max], with either end open when its flag is set. */
typedef struct ArgSpec {
    const char *name;
    DlcCfgKind type;     /* DLC_CFG_INT, _FLOAT (ints accepted), _BOOL, _STR;
                            DLC_CFG_CALL: an image transform (check_transform) */
    bool required;
    double min, max;
    bool min_open, max_open;
} ArgSpec;

#define INF HUGE_VAL
#define MAX_ARGS 6

/* A call form such as sgd(lr=..., momentum=...). */
typedef struct CallSpec {
    const char *name;
    ArgSpec args[MAX_ARGS];
} CallSpec;

static const CallSpec data_calls[] = {
    {"idx", {{"path", DLC_CFG_STR, true, 0, 0, 0, 0}}},
    {"csv", {{"path", DLC_CFG_STR, true, 0, 0, 0, 0},
             {"label_column", DLC_CFG_INT, false, 0, 1e6, 0, 0},
             {"header", DLC_CFG_BOOL, false, 0, 0, 0, 0}}},
    {"npy", {{"images", DLC_CFG_STR, true, 0, 0, 0, 0},
             {"labels", DLC_CFG_STR, true, 0, 0, 0, 0}}},
    /* UTF-8 text for a character-level language model; val: the held-out
       fraction at its end */
    {"text", {{"path", DLC_CFG_STR, true, 0, 0, 0, 0},
              {"val", DLC_CFG_FLOAT, false, 0, 1, false, true}}},
    /* PNG and JPEG images, a folder per class (torchvision's ImageFolder);
       val: the held-out fraction where there are no train/ and val/
       folders; train_transform, eval_transform: the transforms of
       training and of eval and predict (runtime/transform.c) */
    {"images", {{"path", DLC_CFG_STR, true, 0, 0, 0, 0},
                {"val", DLC_CFG_FLOAT, false, 0, 1, false, true},
                {"train_transform", DLC_CFG_CALL, false, 0, 0, 0, 0},
                {"eval_transform", DLC_CFG_CALL, false, 0, 0, 0, 0}}},
    {NULL, {{0}}},
};

static const CallSpec optimizer_calls[] = {
    {"sgd", {{"lr", DLC_CFG_FLOAT, true, 0, INF, true, false},
             {"momentum", DLC_CFG_FLOAT, false, 0, 1, false, true},
             {"nesterov", DLC_CFG_BOOL, false, 0, 0, 0, 0},
             {"weight_decay", DLC_CFG_FLOAT, false, 0, INF, false, false}}},
    {"adam", {{"lr", DLC_CFG_FLOAT, false, 0, INF, true, false},
              {"beta1", DLC_CFG_FLOAT, false, 0, 1, false, true},
              {"beta2", DLC_CFG_FLOAT, false, 0, 1, false, true},
              {"eps", DLC_CFG_FLOAT, false, 0, INF, true, false},
              {"weight_decay", DLC_CFG_FLOAT, false, 0, INF, false, false}}},
    {NULL, {{0}}},
};

static const CallSpec schedule_calls[] = {
    {"constant", {{0}}},
    {"step", {{"every", DLC_CFG_INT, true, 1, 1e9, 0, 0},
              {"gamma", DLC_CFG_FLOAT, false, 0, 1, true, false}}},
    {"cosine", {{"min_lr", DLC_CFG_FLOAT, false, 0, INF, false, false}}},
    {NULL, {{0}}},
};

static const CallSpec loss_calls[] = {
    {"cross_entropy", {{0}}},
    {"mse", {{0}}},
    {NULL, {{0}}},
};

/* A key: either a scalar (scalar.name set) or one of several call forms,
 * where a form without arguments may be written as a bare symbol. */
typedef struct KeySpec {
    const char *key;
    ArgSpec scalar;
    const CallSpec *calls;
    const char *what; /* for messages */
} KeySpec;

static const KeySpec keys[] = {
    {"data", {0}, data_calls, "a data source"},
    {"loss", {0}, loss_calls, "a loss"},
    {"optimizer", {0}, optimizer_calls, "an optimizer"},
    {"schedule", {0}, schedule_calls, "a learning-rate schedule"},
    {"batch", {"batch", DLC_CFG_INT, false, 1, 1 << 20, 0, 0}, NULL, NULL},
    {"epochs", {"epochs", DLC_CFG_INT, false, 1, 1e6, 0, 0}, NULL, NULL},
    {"warmup", {"warmup", DLC_CFG_INT, false, 0, 1e6, 0, 0}, NULL, NULL},
    {"seed", {"seed", DLC_CFG_INT, false, 0, 4294967295.0, 0, 0}, NULL, NULL},
    /* the largest total norm of the gradients (0: no clipping) */
    {"clip", {"clip", DLC_CFG_FLOAT, false, 0, INF, false, false}, NULL, NULL},
};
#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

static const char *kind_name(DlcCfgKind k) {
    static const char *const names[] = {"an integer", "a number", "a boolean",
                                        "a string", "a name", "a call", "a list"};
    return names[k];
}

/* ---- image transforms ------------------------------------------------------- */

/* The steps of a transform chain, first to last: `a -> f(x)` is f(a, x),
 * so a step whose first argument is a call or a name is the step before
 * it.  At most 16; *n = 17 when there are more. */
static int transform_steps(const DlcCfg *v, const DlcCfg *steps[16]) {
    const DlcCfg *rev[17];
    int n = 0;
    while (v && (v->kind == DLC_CFG_CALL || v->kind == DLC_CFG_SYM) && n < 17) {
        rev[n++] = v;
        v = v->kind == DLC_CFG_CALL && v->nargs > 0 && !v->args[0].key &&
                    (v->args[0].val.kind == DLC_CFG_CALL || v->args[0].val.kind == DLC_CFG_SYM)
                ? &v->args[0].val
                : NULL;
    }
    for (int i = 0; i < n && i < 16; i++)
        steps[i] = rev[n - 1 - i];
    return n;
}

static bool is_number(const DlcCfg *v) { return v->kind == DLC_CFG_INT || v->kind == DLC_CFG_FLOAT; }
static double number(const DlcCfg *v) { return v->kind == DLC_CFG_INT ? (double)v->i : v->f; }

/* A list of 1 to max numbers (or, with max 0, a number) each in [lo, hi]
 * (lo excluded when open). */
static bool check_numbers(DlcCtx *ctx, const char *what, const DlcCfg *v, int min, int max,
                          double lo, double hi, bool open) {
    int n = v->kind == DLC_CFG_LIST ? v->nargs : 1;
    bool ok = v->kind == DLC_CFG_LIST ? n >= min && n <= max : is_number(v) && min <= 1;
    for (int i = 0; ok && i < n; i++) {
        const DlcCfg *x = v->kind == DLC_CFG_LIST ? &v->args[i].val : v;
        ok = is_number(x) && (open ? number(x) > lo : number(x) >= lo) && number(x) <= hi;
    }
    if (!ok) {
        char range[80] = "";
        if (lo > -1e30 && hi < 1e30)
            snprintf(range, sizeof range, ", %s %g %s %g", open ? "above" : "from", lo,
                     open ? "and at most" : "to", hi);
        else if (lo > -1e30)
            snprintf(range, sizeof range, ", %s %g", open ? "above" : "at least", lo);
        dlc_error(ctx, v->loc, "%s must be %s%s%s", what,
                  min == max ? "a list of 2 numbers"
                  : max > 1  ? "a number or a list of up to 4 numbers"
                             : "a number",
                  *range && (min == max || max > 1) ? ", each" : "", *range ? range + 1 : "");
    }
    return ok;
}

static bool check_transform(DlcCtx *ctx, const char *what, const DlcCfg *v) {
    static const char *const known[] = {"resize", "center_crop", "random_resized_crop", "hflip",
                                        "normalize"};
    const DlcCfg *steps[16];
    int n = transform_steps(v, steps);
    if (n == 0) {
        dlc_error(ctx, v->loc, "%s must be a transform such as resize(256) -> center_crop(224), "
                  "not %s", what, kind_name(v->kind));
        return false;
    }
    if (n > 8) {
        dlc_error(ctx, v->loc, "%s has more than 8 steps", what);
        return false;
    }
    bool ok = true;
    for (int s = 0; s < n; s++) {
        const DlcCfg *st = steps[s];
        int kind = -1;
        for (int k = 0; k < 5; k++)
            if (strcmp(st->s, known[k]) == 0)
                kind = k;
        if (kind < 0) {
            const char *guess = dlc_closest(st->s, known, 5);
            if (guess)
                dlc_error(ctx, st->loc, "unknown image transform '%s'; did you mean '%s'?", st->s,
                          guess);
            else
                dlc_error(ctx, st->loc, "unknown image transform '%s' (known: resize, "
                          "center_crop, random_resized_crop, hflip, normalize)", st->s);
            ok = false;
            continue;
        }
        int sizes = 0;
        bool mean = false, std = false;
        char where[64];
        for (int i = st->kind == DLC_CFG_CALL ? (s > 0) /* past the step before */ : 0;
             st->kind == DLC_CFG_CALL && i < st->nargs; i++) {
            const DlcCfgArg *a = &st->args[i];
            const char *key = a->key ? a->key : "";
            snprintf(where, sizeof where, "%s() argument%s%s", st->s, *key ? " " : "", key);
            if (kind <= 2 && !*key) { /* a size: S, or H, W, or [H, W] */
                int k = a->val.kind == DLC_CFG_LIST ? a->val.nargs : 1;
                bool fine = sizes + k <= 2 && (a->val.kind != DLC_CFG_LIST || (k == 2 && !sizes));
                for (int j = 0; fine && j < k; j++) {
                    const DlcCfg *x = a->val.kind == DLC_CFG_LIST ? &a->val.args[j].val : &a->val;
                    fine = x->kind == DLC_CFG_INT && x->i >= 1 && x->i <= 65536;
                }
                if (!fine) {
                    dlc_error(ctx, a->val.loc, "%s() takes a size: S, or H, W, or [H, W], each "
                              "a whole number from 1 to 65536", st->s);
                    ok = false;
                }
                sizes += k;
            } else if (kind == 2 && (strcmp(key, "scale") == 0 || strcmp(key, "ratio") == 0)) {
                ok &= check_numbers(ctx, where, &a->val, 2, 2, 0, key[0] == 's' ? 1 : 1e6, true);
            } else if (kind == 3 && (strcmp(key, "p") == 0 || !*key)) {
                ok &= check_numbers(ctx, "hflip()'s p", &a->val, 1, 0, 0, 1, false);
            } else if (kind == 4 && (strcmp(key, "mean") == 0 || strcmp(key, "std") == 0)) {
                bool m = key[0] == 'm';
                ok &= check_numbers(ctx, where, &a->val, 1, 4, m ? -2e30 : 0, 2e30, !m);
                mean |= m;
                std |= !m;
            } else {
                dlc_error(ctx, a->key && a->keyloc.line > 0 ? a->keyloc : a->val.loc,
                          "%s() has no argument %s%s%s", st->s, *key ? "'" : "of this form",
                          key, *key ? "'" : "");
                ok = false;
            }
        }
        if (kind <= 2 && sizes == 0) {
            dlc_error(ctx, st->loc, "%s() needs a size", st->s);
            ok = false;
        }
        if (kind == 4 && (!mean || !std)) {
            dlc_error(ctx, st->loc, "normalize() needs mean and std");
            ok = false;
        }
    }
    return ok;
}

static void put_cfg_value(FILE *f, const DlcCfg *v) {
    char num[64];
    if (v->kind == DLC_CFG_LIST) {
        fputc('[', f);
        for (int i = 0; i < v->nargs; i++) {
            fputs(i ? ", " : "", f);
            put_cfg_value(f, &v->args[i].val);
        }
        fputc(']', f);
    } else if (v->kind == DLC_CFG_INT) {
        fprintf(f, "%lld", (long long)v->i);
    } else if (v->kind == DLC_CFG_FLOAT) {
        dlc_format_double(num, sizeof num, v->f);
        fputs(num, f);
    }
}

char *dlc_train_transform_text(const DlcCfg *v) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    const DlcCfg *steps[16];
    int n = transform_steps(v, steps);
    for (int s = 0; s < n && s < 16; s++) {
        const DlcCfg *st = steps[s];
        fprintf(f, "%s%s", s ? " -> " : "", st->s);
        int first = st->kind == DLC_CFG_CALL ? (s > 0) /* past the step before */ : 0;
        if (st->kind == DLC_CFG_CALL && st->nargs > first) {
            fputc('(', f);
            for (int i = first; i < st->nargs; i++) {
                fputs(i > first ? ", " : "", f);
                if (st->args[i].key)
                    fprintf(f, "%s=", st->args[i].key);
                put_cfg_value(f, &st->args[i].val);
            }
            fputc(')', f);
        }
    }
    fclose(f);
    return buf;
}

static bool check_scalar(DlcCtx *ctx, const char *what, const ArgSpec *spec,
                         const DlcCfg *v) {
    if (spec->type == DLC_CFG_CALL)
        return check_transform(ctx, what, v);
    bool ok = v->kind == spec->type ||
              (spec->type == DLC_CFG_FLOAT && v->kind == DLC_CFG_INT);
    if (!ok) {
        dlc_error(ctx, v->loc, "%s must be %s, not %s", what,
                  kind_name(spec->type), kind_name(v->kind));
        return false;
    }
    if (spec->type != DLC_CFG_INT && spec->type != DLC_CFG_FLOAT)
        return true;
    double x = v->kind == DLC_CFG_INT ? (double)v->i : v->f;
    bool below = spec->min_open ? !(x > spec->min) : !(x >= spec->min);
    bool above = spec->max_open ? !(x < spec->max) : !(x <= spec->max);
    if (below || above) {
        char lo[32], hi[32], val[32];
        if (spec->type == DLC_CFG_INT) {
            snprintf(lo, sizeof lo, "%.0f", spec->min);
            snprintf(hi, sizeof hi, "%.0f", spec->max);
        } else {
            dlc_format_double(lo, sizeof lo, spec->min);
            dlc_format_double(hi, sizeof hi, spec->max);
        }
        if (v->kind == DLC_CFG_INT)
            snprintf(val, sizeof val, "%lld", (long long)v->i);
        else
            dlc_format_double(val, sizeof val, v->f);
        if (spec->max == INF)
            dlc_error(ctx, v->loc, "%s must be %s %s, got %s", what,
                      spec->min_open ? "greater than" : "at least", lo, val);
        else
            dlc_error(ctx, v->loc, "%s must be in %c%s, %s%c, got %s", what,
                      spec->min_open ? '(' : '[', lo, hi,
                      spec->max_open ? ')' : ']', val);
        return false;
    }
    return true;
}

static bool check_call(DlcCtx *ctx, const char *key, const KeySpec *ks,
                       const DlcCfg *v) {
    const char *name = v->kind == DLC_CFG_SYM || v->kind == DLC_CFG_CALL ? v->s : NULL;
    const CallSpec *cs = NULL;
    const char *names[16];
    int n = 0;
    for (const CallSpec *c = ks->calls; c->name; c++) {
        names[n++] = c->name;
        if (name && strcmp(c->name, name) == 0)
            cs = c;
    }
    if (!cs) {
        char list[200] = "";
        for (int i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     i ? ", " : "", names[i]);
        const char *guess = name ? dlc_closest(name, names, n) : NULL;
        if (guess)
            dlc_error(ctx, v->loc, "unknown %s '%s'; did you mean '%s'?", key,
                      name, guess);
        else if (name)
            dlc_error(ctx, v->loc, "unknown %s '%s' (expected one of: %s)", key,
                      name, list);
        else
            dlc_error(ctx, v->loc, "%s must be one of: %s; got %s", key, list,
                      kind_name(v->kind));
        return false;
    }
    bool ok = true;
    int nspec = 0;
    while (nspec < MAX_ARGS && cs->args[nspec].name)
        nspec++;
    /* positional arguments fill the schema in order; keywords by name */
    int pos = 0;
    bool given[MAX_ARGS] = {0};
    for (int i = 0; v->kind == DLC_CFG_CALL && i < v->nargs; i++) {
        const DlcCfgArg *a = &v->args[i];
        DlcLoc keyloc = a->key && a->keyloc.line > 0 ? a->keyloc : a->val.loc;
        int slot = -1;
        if (a->key) {
            const char *argnames[MAX_ARGS];
            for (int j = 0; j < nspec; j++) {
                argnames[j] = cs->args[j].name;
                if (strcmp(a->key, cs->args[j].name) == 0)
                    slot = j;
            }
            if (slot < 0) {
                const char *guess = dlc_closest(a->key, argnames, nspec);
                if (guess)
                    dlc_error(ctx, keyloc, "%s() has no argument '%s'; did you mean '%s'?",
                              cs->name, a->key, guess);
                else
                    dlc_error(ctx, keyloc, "%s() has no argument '%s'", cs->name,
                              a->key);
                ok = false;
                continue;
            }
        } else {
            slot = pos++;
            if (slot >= nspec) {
                dlc_error(ctx, a->val.loc, "%s() takes %d argument%s, got more",
                          cs->name, nspec, nspec == 1 ? "" : "s");
                ok = false;
                continue;
            }
        }
        if (given[slot]) {
            dlc_error(ctx, keyloc, "%s() argument '%s' given twice", cs->name,
                      cs->args[slot].name);
            ok = false;
            continue;
        }
        given[slot] = true;
        char what[64];
        snprintf(what, sizeof what, "%s() argument '%s'", cs->name, cs->args[slot].name);
        ok &= check_scalar(ctx, what, &cs->args[slot], &a->val);
    }
    for (int j = 0; j < nspec; j++)
        if (cs->args[j].required && !given[j]) {
            dlc_error(ctx, v->loc, "%s() needs argument '%s'", cs->name,
                      cs->args[j].name);
            ok = false;
        }
    return ok;
}

bool dlc_train_check(DlcCtx *ctx, const DlcModule *m, const DlcTrain *t) {
    bool ok = true;
    if (!dlc_module_find_network(m, t->network)) {
        const char *names[64];
        int n = 0;
        for (int i = 0; i < m->nnetworks && n < 64; i++)
            names[n++] = m->networks[i]->name;
        const char *guess = dlc_closest(t->network, names, n);
        if (guess)
            dlc_error(ctx, t->loc, "train section for unknown network '%s'; did you mean '%s'?",
                      t->network, guess);
        else
            dlc_error(ctx, t->loc, "train section for unknown network '%s'", t->network);
        ok = false;
    }
    for (int i = 0; i < t->nentries; i++) {
        const DlcTrainEntry *e = &t->entries[i];
        const KeySpec *ks = NULL;
        const char *names[NKEYS];
        for (int k = 0; k < NKEYS; k++) {
            names[k] = keys[k].key;
            if (strcmp(keys[k].key, e->key) == 0)
                ks = &keys[k];
        }
        if (!ks) {
            const char *guess = dlc_closest(e->key, names, NKEYS);
            if (guess)
                dlc_error(ctx, e->loc, "unknown train setting '%s'; did you mean '%s'?",
                          e->key, guess);
            else
                dlc_error(ctx, e->loc,
                          "unknown train setting '%s' (known: data, loss, optimizer, "
                          "schedule, batch, epochs, warmup, seed, clip)", e->key);
            ok = false;
            continue;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(t->entries[j].key, e->key) == 0) {
                dlc_error(ctx, e->loc, "train setting '%s' given twice", e->key);
                dlc_note(ctx, t->entries[j].loc, "first given here");
                ok = false;
            }
        ok &= ks->calls ? check_call(ctx, e->key, ks, &e->val)
                        : check_scalar(ctx, e->key, &ks->scalar, &e->val);
    }
    return ok;
}
