/* Classify one 28x28 image with a compiled LeNet-5 (docs/embedding.md). */
#include <stdio.h>

#include "lenet5.h"

int main(int argc, char **argv) {
    DlrtError err;
    Lenet5 *net;
    if (lenet5_create(&net, 1, 0, &err) != DLRT_OK ||
        (argc > 1 && lenet5_load(net, argv[1], &err) != DLRT_OK)) {
        fprintf(stderr, "lenet5: %s\n", err.message);
        return 1;
    }
    if (lenet5_freeze(net, &err) != DLRT_OK) /* the weights stay as loaded */
        fprintf(stderr, "lenet5: %s; inference packs the weights per call\n", err.message);
    float image[LENET5_image_SIZE] = {0}, logits[LENET5_OUTPUT0_SIZE];
    /* ... fill image with pixels scaled to [0, 1] ... */
    lenet5_forward(net, 1, image, logits, &err);
    int best = 0;
    for (int k = 1; k < LENET5_OUTPUT0_SIZE; k++)
        if (logits[k] > logits[best])
            best = k;
    printf("class %d\n", best);
    lenet5_free(net);
    return 0;
}
