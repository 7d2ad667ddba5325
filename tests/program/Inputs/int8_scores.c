/* int8_scores.c — the scores of an int8 LeNet-5 (dlc --quantize=int8
 * --emit=c) for tests/program/quantize.test, to compare bit for bit with
 * int8_checkpoint.py's integer reference.
 *
 *   int8_scores WEIGHTS INPUTS N   INPUTS: N images of f32 [1,28,28], raw;
 *                                  prints each sample's 10 scores, %a */
#include <stdio.h>
#include <stdlib.h>

#include "lenet5.h"

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    int n = atoi(argv[3]);
    float *x = malloc(sizeof *x * 784 * (size_t)n), *y = malloc(sizeof *y * 10 * (size_t)n);
    FILE *f = fopen(argv[2], "rb");
    if (!x || !y || !f || fread(x, sizeof *x * 784, (size_t)n, f) != (size_t)n)
        return 1;
    fclose(f);
    Lenet5 *net;
    DlrtError err;
    if (lenet5_create(&net, n, 0, &err) != DLRT_OK || lenet5_load(net, argv[1], &err) != DLRT_OK ||
        lenet5_forward(net, n, x, y, &err) != DLRT_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 10; k++)
            printf("%a%c", (double)y[i * 10 + k], k == 9 ? '\n' : ' ');
    lenet5_free(net);
    free(x);
    free(y);
    return 0;
}
