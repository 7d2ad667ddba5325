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
    DlcCfgKind type;     /* DLC_CFG_INT, _FLOAT (ints accepted), _BOOL, _STR */
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
                                        "a string", "a name", "a call"};
    return names[k];
}

static bool check_scalar(DlcCtx *ctx, const char *what, const ArgSpec *spec,
                         const DlcCfg *v) {
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
