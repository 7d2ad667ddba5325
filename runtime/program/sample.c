/* sample.c — `sample`: text from a character-level language model.
 *
 * The checkpoint (--weights) holds the weights and the vocabulary of the
 * text they were trained on.  The output starts with --prime, whose
 * characters must all be in the vocabulary; each next character is drawn
 * (with the generator seeded by --seed) from the softmax of the network's
 * scores at the last character of the context, divided by --temperature
 * (below 1 the likeliest characters gain, above 1 the others), among the
 * vocabulary's characters.
 *
 * With a step form (NAME_forward_step: the network at one step, its recurrent
 * layers carrying their state), the prime is read a character at a time
 * from the zero state, and each new character costs one step: the context
 * is everything read so far.  Without one, the network reads its T steps
 * from a zero state, as it was trained, so the context is the last T
 * characters.  A shorter one (at the start) fills the first steps of the
 * window, the rest being id 0: in a causal network (no recurrent layer
 * runs backwards) the scores at the context's last step do not depend on
 * what follows it.  Each character then costs one inference over the
 * window. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

/* Draws an id from the softmax of scores / temperature. */
static int32_t draw(const float *scores, int64_t classes, double temperature, DlrtRng *rng) {
    double top = scores[0], sum = 0;
    for (int64_t i = 1; i < classes; i++)
        top = scores[i] > top ? scores[i] : top;
    for (int64_t i = 0; i < classes; i++)
        sum += exp((scores[i] - top) / temperature);
    double u = (double)dlrt_rng_uniform(rng) * sum;
    for (int64_t i = 0; i < classes; i++) {
        u -= exp((scores[i] - top) / temperature);
        if (u < 0)
            return (int32_t)i;
    }
    return (int32_t)(classes - 1);
}

/* The id's character to standard output. */
static DlrtStatus put_char(const DlrtVocab *v, int32_t id, DlrtError *err) {
    char *text;
    DlrtStatus st = dlrt_vocab_decode(v, &id, 1, &text, NULL, err);
    if (st == DLRT_OK) {
        fputs(text, stdout);
        free(text);
    }
    return st;
}

int dlrt_sample_command(const DlrtModel *m, const Options *o) {
    if (m->vocab < 1 || m->steps < 2 || !m->causal) {
        fprintf(stderr, "%s: sample needs a language model: token ids in, scores at every "
                "step out, no recurrent layer run backwards\n", m->name);
        return 2;
    }
    if (!o->weights) {
        fprintf(stderr, "%s: sample needs --weights FILE (a checkpoint of train, which keeps "
                "the vocabulary)\n", m->name);
        return 2;
    }
    double begin = dlrt_clock();
    int64_t steps = m->steps, classes = m->classes;
    DlrtError err = {0};
    DlrtVocab vocab = {0};
    DlrtMeta *meta = NULL;
    int nmeta = 0;
    void *net = NULL;
    int32_t *ids = NULL;
    int64_t n = 0;
    float *window = malloc(sizeof *window * (size_t)steps);
    float *scores = malloc(sizeof *scores * (size_t)(steps * classes));
    int status = 1;
    DlrtStatus st = window && scores ? DLRT_OK : dlrt_fail(&err, DLRT_E_NOMEM, "out of memory");
    if (st == DLRT_OK && (st = m->create(&net, 1, o->seed, &err)) == DLRT_OK &&
        (st = m->load(net, o->weights, &meta, &nmeta, &err)) == DLRT_OK &&
        (st = dlrt_vocab_from_meta(&vocab, meta, nmeta, o->weights, &err)) == DLRT_OK)
        st = dlrt_vocab_encode(&vocab, o->prime, (int64_t)strlen(o->prime), &ids, &n, &err);
    if (st == DLRT_OK && n == 0)
        st = dlrt_fail(&err, DLRT_E_ARG, "--prime is empty: give the text to start from");
    int32_t *grown = st == DLRT_OK ? realloc(ids, sizeof *ids * (size_t)(n + o->length)) : NULL;
    if (st == DLRT_OK && !grown)
        st = dlrt_fail(&err, DLRT_E_NOMEM, "out of memory");
    if (grown)
        ids = grown;
    DlrtRng rng;
    dlrt_rng_seed(&rng, o->seed);
    /* among the vocabulary's characters: an embedding may take more ids
       than the text had characters, which no label ever named */
    int64_t choices = vocab.size < classes ? vocab.size : classes;
    if (st == DLRT_OK && m->forward_step) {
        fputs(o->prime, stdout);
        m->reset_state(net);
        for (int64_t k = 0; k < n && st == DLRT_OK; k++) { /* the prime */
            float id = (float)ids[k];
            st = m->forward_step(net, 1, &id, scores, &err);
        }
        for (int64_t k = 0; k < o->length && st == DLRT_OK; k++) {
            ids[n] = draw(scores, choices, o->temperature, &rng);
            float id = (float)ids[n];
            if ((st = put_char(&vocab, ids[n++], &err)) == DLRT_OK)
                st = m->forward_step(net, 1, &id, scores, &err);
        }
        fputc('\n', stdout);
        fflush(stdout);
    } else if (st == DLRT_OK) {
        fputs(o->prime, stdout);
        for (int64_t k = 0; k < o->length && st == DLRT_OK; k++) {
            int64_t context = n < steps ? n : steps;
            for (int64_t t = 0; t < steps; t++)
                window[t] = t < context ? (float)ids[n - context + t] : 0.0f;
            if (m->reset_state) /* the window, from the zero state */
                m->reset_state(net);
            if ((st = m->forward(net, 1, window, scores, &err)) != DLRT_OK)
                break;
            ids[n] = draw(scores + (context - 1) * classes, choices, o->temperature, &rng);
            st = put_char(&vocab, ids[n++], &err);
        }
        fputc('\n', stdout);
        fflush(stdout);
    }
    if (st != DLRT_OK) {
        fprintf(stderr, "%s: %s\n", m->name, err.message);
    } else {
        Report r = dlrt_report_new("sample");
        r.images = o->length;
        r.seconds = dlrt_clock() - begin;
        r.images_per_second = (double)o->length / (r.seconds > 0 ? r.seconds : 1e-9);
        status = dlrt_report_write(m, o, &r) ? 0 : 1;
    }
    dlrt_meta_free(meta, nmeta);
    dlrt_vocab_free(&vocab);
    if (net)
        m->free(net);
    free(ids);
    free(window);
    free(scores);
    return status;
}
