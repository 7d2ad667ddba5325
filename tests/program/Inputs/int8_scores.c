/* int8_scores.c — the scores of an int8 LeNet-5 (dlc --quantize=int8
 * --emit=c) for tests/program/quantize.test, to compare bit for bit with
 * int8_checkpoint.py's integer reference; another network of the same
 * input and 10 classes with -DNET=tinyres -DNET_T=Tinyres (its name, which
 * names its header, and its type's).
 *
 *   int8_scores WEIGHTS INPUTS N   INPUTS: N images of f32 [1,28,28], raw;
 *                                  prints each sample's 10 scores, %a */
#include <stdio.h>
#include <stdlib.h>

#ifndef NET
#define NET lenet5
#define NET_T Lenet5
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define API(f) CAT(NET, f)
#define STR_(x) #x
#define STR(x) STR_(x)

#include STR(NET.h)

int main(int argc, char **argv) {
    if (argc != 4)
        return 2;
    int n = atoi(argv[3]);
    float *x = malloc(sizeof *x * 784 * (size_t)n), *y = malloc(sizeof *y * 10 * (size_t)n);
    FILE *f = fopen(argv[2], "rb");
    if (!x || !y || !f || fread(x, sizeof *x * 784, (size_t)n, f) != (size_t)n)
        return 1;
    fclose(f);
    NET_T *net;
    DlrtError err;
    if (API(_create)(&net, n, 0, &err) != DLRT_OK || API(_load)(net, argv[1], &err) != DLRT_OK ||
        API(_forward)(net, n, x, y, &err) != DLRT_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 10; k++)
            printf("%a%c", (double)y[i * 10 + k], k == 9 ? '\n' : ' ');
    API(_free)(net);
    free(x);
    free(y);
    return 0;
}
