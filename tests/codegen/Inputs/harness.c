/* harness.c — drives a generated network through its API, for the parity
 * tests.  Compiled with the generated NAME.c and libdlrt, and with
 *   -DNET=name -DNET_H='"name.h"' -DIN_SIZE=... -DOUT_SIZE=...
 * for a network of one f32 input and one output, trained with labels; with
 * -DREAL=double also for the same network's f64 code (dlc --dtype=f64),
 * whose files of inputs and outputs then hold doubles.
 *
 *   harness forward WEIGHTS INPUT N OUTPUT
 *       load WEIGHTS, run inference on N samples of INPUT (raw values of
 *       REAL), write N * OUT_SIZE of them to OUTPUT
 *   harness train WEIGHTS INPUT LABELS N LR STEPS RESULT [CLIP]
 *       load WEIGHTS, take STEPS training steps on the same batch, print
 *       each loss, save every parameter and buffer to RESULT; CLIP sets
 *       the largest norm of gradient clipping (NET_set_clip: needs -DCLIP
 *       at compile time, for a network whose train section clips)
 *   harness gradients WEIGHTS INPUT LABELS N RESULT
 *       load WEIGHTS, compute the loss and every gradient on one batch
 *       without updating (NET_gradients), print the loss, save the gradient
 *       of every trainable tensor to RESULT under the tensor's name (needs
 *       -DNTENSORS=NAME_TENSORS, the header's macro, at compile time)
 *   harness steps WEIGHTS INPUT N OUTPUT
 *       as forward, a step at a time (NET_forward_step, from NET_reset_state's
 *       zero state: -DSTEPS at compile time, for a network with a step
 *       form), the steps' scores written where forward writes them
 *   harness fresh SEED RESULT
 *       create with fresh initialization from SEED and save it
 *   harness freeze SEED N SCRATCH
 *       NET_freeze's contract, on fresh weights from SEED and a random batch
 *       of N: a frozen forward gives the bits of a forward that packs its
 *       weights per call, and a train step, a write through NET_tensor and
 *       a load (of a checkpoint it writes to SCRATCH) each end the freeze
 *       (the next forward sees the new weights);
 *       prints a line "ok   ..." or "FAIL ..." per check, exits 1 on a
 *       failure (needs -DNTENSORS, as gradients does)
 *
 * -DTOKENS: the input is token ids (int32, for an embedding), whose files
 * hold int32; -DLABELS=T: T labels per sample (a label per step);
 * -DLENGTHS: a second input, each sequence's length (int32, one per
 * sample), read from INPUT.len. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include NET_H

#ifndef REAL
#define REAL float
#endif
#ifdef TOKENS
#define IN_T int32_t
#else
#define IN_T REAL
#endif
#ifndef LABELS
#define LABELS 1
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define API(f) CAT(NET, f)

static void *read_all(const char *path, size_t want) {
    FILE *f = fopen(path, "rb");
    char *buf = malloc(want ? want : 1);
    if (!f || !buf || fread(buf, 1, want, f) != want) {
        fprintf(stderr, "harness: cannot read %zu bytes from %s\n", want, path);
        exit(1);
    }
    fclose(f);
    return buf;
}

#ifdef LENGTHS
/* the lengths last read, freed at exit */
static int32_t *lengths;

static void free_lengths(void) { free(lengths); }

/* INPUT's lengths, from INPUT.len; the extra argument of the API's calls */
static int32_t *lengths_of(const char *input, long n) {
    char path[4096];
    snprintf(path, sizeof path, "%s.len", input);
    if (!lengths)
        atexit(free_lengths);
    free(lengths);
    lengths = read_all(path, sizeof(int32_t) * (size_t)n);
    return lengths;
}
#define LENGTHS_ARG(input, n) , lengths_of(input, n)
#else
#define LENGTHS_ARG(input, n)
#endif

static void check(DlrtStatus st, const DlrtError *err) {
    if (st != DLRT_OK) {
        fprintf(stderr, "harness: %s: %s\n", dlrt_status_name(st), err->message);
        exit(1);
    }
}

#if defined(NTENSORS) && !defined(TOKENS) && !defined(LENGTHS)
/* One of freeze_contract's checks: the outputs of a and b, bit for bit. */
static int same(const char *what, const REAL *a, const REAL *b, long count) {
    bool ok = memcmp(a, b, sizeof *a * (size_t)count) == 0;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    return ok ? 0 : 1;
}

/* Scales every parameter of net by 1.5 through NET_tensor's pointers. */
static void scale_weights(NET_T *net, int ntensors) {
    for (int i = 0; i < ntensors; i++) {
        DlrtTensor t = API(_tensor)(net, i);
        int64_t count = 1;
        for (int d = 0; d < t.rank; d++)
            count *= t.dims[d];
        for (int64_t k = 0; k < count; k++)
            ((REAL *)t.data)[k] *= (REAL)1.5;
    }
}

/* `harness freeze SEED N`: a is frozen, b never is; both start from the
 * same weights and see the same changes, so their outputs must agree. */
static int freeze_contract(uint64_t seed, long n, const char *scratch) {
    DlrtError err = {0};
    NET_T *a, *b;
    check(API(_create)(&a, n, seed, &err), &err);
    check(API(_create)(&b, n, seed, &err), &err);
    REAL *x = malloc(sizeof(REAL) * (size_t)(n * IN_SIZE));
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)n);
    REAL *ya = malloc(sizeof(REAL) * (size_t)(n * OUT_SIZE));
    REAL *yb = malloc(sizeof(REAL) * (size_t)(n * OUT_SIZE));
    DlrtRng rng;
    dlrt_rng_seed(&rng, seed);
    for (long i = 0; i < n * IN_SIZE; i++)
        x[i] = (REAL)dlrt_rng_uniform(&rng);
    for (long i = 0; i < n; i++)
        labels[i] = (int32_t)dlrt_rng_below(&rng, OUT_SIZE);
    long out = n * OUT_SIZE;
    int failed = 0;
    REAL loss;

    check(API(_forward)(b, n, x, yb, &err), &err);
    check(API(_freeze)(a, &err), &err);
    check(API(_forward)(a, n, x, ya, &err), &err);
    failed += same("a frozen forward gives the bits of a forward that packs per call", ya, yb, out);
    check(API(_forward)(a, n, x, ya, &err), &err);
    failed += same("so does a second frozen forward", ya, yb, out);

    check(API(_train_step)(a, n, x, labels, (REAL)0.1, &loss, &err), &err);
    check(API(_train_step)(b, n, x, labels, (REAL)0.1, &loss, &err), &err);
    check(API(_forward)(a, n, x, ya, &err), &err);
    check(API(_forward)(b, n, x, yb, &err), &err);
    failed += same("a train step ends the freeze", ya, yb, out);

    check(API(_freeze)(a, &err), &err);
    check(API(_forward)(a, n, x, ya, &err), &err);
    scale_weights(a, NTENSORS);
    scale_weights(b, NTENSORS);
    check(API(_forward)(a, n, x, ya, &err), &err);
    check(API(_forward)(b, n, x, yb, &err), &err);
    failed += same("a write through a tensor pointer taken after the freeze ends it", ya, yb, out);

    NET_T *fresh;
    check(API(_create)(&fresh, n, seed + 1, &err), &err);
    check(API(_save)(fresh, scratch, &err), &err);
    check(API(_freeze)(a, &err), &err);
    check(API(_load)(a, scratch, &err), &err);
    check(API(_load)(b, scratch, &err), &err);
    check(API(_forward)(a, n, x, ya, &err), &err);
    check(API(_forward)(b, n, x, yb, &err), &err);
    failed += same("a load ends the freeze", ya, yb, out);

    API(_free)(fresh);
    API(_free)(a);
    API(_free)(b);
    free(x);
    free(labels);
    free(ya);
    free(yb);
    return failed ? 1 : 0;
}
#endif

int main(int argc, char **argv) {
    DlrtError err = {0};
    if (argc == 4 && strcmp(argv[1], "fresh") == 0) {
        NET_T *net;
        check(API(_create)(&net, 1, strtoull(argv[2], NULL, 10), &err), &err);
        check(API(_save)(net, argv[3], &err), &err);
        API(_free)(net);
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "forward") == 0) {
        long n = atol(argv[4]);
        NET_T *net;
        check(API(_create)(&net, n, 0, &err), &err);
        check(API(_load)(net, argv[2], &err), &err);
        IN_T *x = read_all(argv[3], sizeof(IN_T) * (size_t)(n * IN_SIZE));
        REAL *y = malloc(sizeof(REAL) * (size_t)(n * OUT_SIZE));
        check(API(_forward)(net, n, x LENGTHS_ARG(argv[3], n), y, &err), &err);
        FILE *f = fopen(argv[5], "wb");
        fwrite(y, sizeof(REAL), (size_t)(n * OUT_SIZE), f);
        fclose(f);
        free(x);
        free(y);
        API(_free)(net);
        return 0;
    }
#ifdef STEPS
    if (argc == 6 && strcmp(argv[1], "steps") == 0) {
        long n = atol(argv[4]), per = OUT_SIZE / IN_SIZE; /* scores per step */
        NET_T *net;
        check(API(_create)(&net, n, 0, &err), &err);
        check(API(_load)(net, argv[2], &err), &err);
        IN_T *x = read_all(argv[3], sizeof(IN_T) * (size_t)(n * IN_SIZE));
        IN_T *column = malloc(sizeof(IN_T) * (size_t)n);
        REAL *step = malloc(sizeof(REAL) * (size_t)(n * per));
        REAL *y = malloc(sizeof(REAL) * (size_t)(n * OUT_SIZE));
        API(_reset_state)(net);
        for (long t = 0; t < IN_SIZE; t++) {
            for (long i = 0; i < n; i++)
                column[i] = x[i * IN_SIZE + t];
            check(API(_forward_step)(net, n, column, step, &err), &err);
            for (long i = 0; i < n; i++)
                memcpy(y + i * OUT_SIZE + t * per, step + i * per, sizeof(REAL) * (size_t)per);
        }
        FILE *f = fopen(argv[5], "wb");
        fwrite(y, sizeof(REAL), (size_t)(n * OUT_SIZE), f);
        fclose(f);
        free(x);
        free(column);
        free(step);
        free(y);
        API(_free)(net);
        return 0;
    }
#endif
    if ((argc == 9 || argc == 10) && strcmp(argv[1], "train") == 0) {
        long n = atol(argv[5]), steps = atol(argv[7]);
        REAL lr = (REAL)strtod(argv[6], NULL);
        NET_T *net;
        check(API(_create)(&net, n, 0, &err), &err);
        check(API(_load)(net, argv[2], &err), &err);
        if (argc == 10) {
#ifdef CLIP
            API(_set_clip)(net, (REAL)strtod(argv[9], NULL));
#else
            fprintf(stderr, "harness: CLIP needs a harness compiled with -DCLIP\n");
            return 2;
#endif
        }
        IN_T *x = read_all(argv[3], sizeof(IN_T) * (size_t)(n * IN_SIZE));
        int32_t *labels = read_all(argv[4], sizeof(int32_t) * (size_t)(n * LABELS));
        for (long s = 0; s < steps; s++) {
            REAL loss;
            check(API(_train_step)(net, n, x LENGTHS_ARG(argv[3], n), labels, lr, &loss, &err),
                  &err);
            printf("loss %.17g\n", (double)loss);
        }
        check(API(_save)(net, argv[8], &err), &err);
        free(x);
        free(labels);
        API(_free)(net);
        return 0;
    }
#ifdef NTENSORS
    if (argc == 7 && strcmp(argv[1], "gradients") == 0) {
        long n = atol(argv[5]);
        NET_T *net;
        check(API(_create)(&net, n, 0, &err), &err);
        check(API(_load)(net, argv[2], &err), &err);
        IN_T *x = read_all(argv[3], sizeof(IN_T) * (size_t)(n * IN_SIZE));
        int32_t *labels = read_all(argv[4], sizeof(int32_t) * (size_t)(n * LABELS));
        REAL loss;
        check(API(_gradients)(net, n, x LENGTHS_ARG(argv[3], n), labels, &loss, &err), &err);
        printf("loss %.17g\n", (double)loss);
        DlrtTensor grads[NTENSORS];
        int ngrads = 0;
        for (int i = 0; i < NTENSORS; i++) {
            DlrtTensor g = API(_gradient)(net, i);
            if (g.data)
                grads[ngrads++] = g;
        }
        check(dlrt_save_safetensors(argv[6], grads, ngrads, NULL, 0, &err), &err);
        free(x);
        free(labels);
        API(_free)(net);
        return 0;
    }
#endif
#if defined(NTENSORS) && !defined(TOKENS) && !defined(LENGTHS)
    if (argc == 5 && strcmp(argv[1], "freeze") == 0)
        return freeze_contract(strtoull(argv[2], NULL, 10), atol(argv[3]), argv[4]);
#endif
    fprintf(stderr, "harness: bad arguments (see the comment at the top of harness.c)\n");
    return 2;
}
