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
 *   harness train WEIGHTS INPUT LABELS N LR STEPS RESULT
 *       load WEIGHTS, take STEPS training steps on the same batch, print
 *       each loss, save every parameter and buffer to RESULT
 *   harness gradients WEIGHTS INPUT LABELS N RESULT
 *       load WEIGHTS, compute the loss and every gradient on one batch
 *       without updating (NET_gradients), print the loss, save the gradient
 *       of every trainable tensor to RESULT under the tensor's name (needs
 *       -DNTENSORS=NAME_TENSORS, the header's macro, at compile time)
 *   harness fresh SEED RESULT
 *       create with fresh initialization from SEED and save it */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include NET_H

#ifndef REAL
#define REAL float
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

static void check(DlrtStatus st, const DlrtError *err) {
    if (st != DLRT_OK) {
        fprintf(stderr, "harness: %s: %s\n", dlrt_status_name(st), err->message);
        exit(1);
    }
}

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
        REAL *x = read_all(argv[3], sizeof(REAL) * (size_t)(n * IN_SIZE));
        REAL *y = malloc(sizeof(REAL) * (size_t)(n * OUT_SIZE));
        check(API(_forward)(net, n, x, y, &err), &err);
        FILE *f = fopen(argv[5], "wb");
        fwrite(y, sizeof(REAL), (size_t)(n * OUT_SIZE), f);
        fclose(f);
        free(x);
        free(y);
        API(_free)(net);
        return 0;
    }
    if (argc == 9 && strcmp(argv[1], "train") == 0) {
        long n = atol(argv[5]), steps = atol(argv[7]);
        REAL lr = (REAL)strtod(argv[6], NULL);
        NET_T *net;
        check(API(_create)(&net, n, 0, &err), &err);
        check(API(_load)(net, argv[2], &err), &err);
        REAL *x = read_all(argv[3], sizeof(REAL) * (size_t)(n * IN_SIZE));
        int32_t *labels = read_all(argv[4], sizeof(int32_t) * (size_t)n);
        for (long s = 0; s < steps; s++) {
            REAL loss;
            check(API(_train_step)(net, n, x, labels, lr, &loss, &err), &err);
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
        REAL *x = read_all(argv[3], sizeof(REAL) * (size_t)(n * IN_SIZE));
        int32_t *labels = read_all(argv[4], sizeof(int32_t) * (size_t)n);
        REAL loss;
        check(API(_gradients)(net, n, x, labels, &loss, &err), &err);
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
    fprintf(stderr, "harness: bad arguments (see the comment at the top of harness.c)\n");
    return 2;
}
