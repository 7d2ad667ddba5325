/* qconv_shapes.h — the convolution shapes of ResNet-18, GoogLeNet and
 * LeNet-5 that the int8 convolution benchmarks time: qconv_shapes.c
 * (libdlrt's kernel) and qconv_onednn.c (oneDNN's, on the same shapes). */
#ifndef BENCH_QCONV_SHAPES_H
#define BENCH_QCONV_SHAPES_H

#include <stdint.h>

/* c channels of h x h, f filters of k x k, stride s, padding p */
typedef struct {
    const char *name;
    int64_t c, h, f, k, s, p;
} Shape;

static const Shape shapes[] = {
    {"resnet18 stem 7x7/2", 3, 224, 64, 7, 2, 3},
    {"resnet18 layer1 3x3", 64, 56, 64, 3, 1, 1},
    {"resnet18 layer2 3x3/2", 64, 56, 128, 3, 2, 1},
    {"resnet18 layer2 1x1/2", 64, 56, 128, 1, 2, 0},
    {"resnet18 layer2 3x3", 128, 28, 128, 3, 1, 1},
    {"resnet18 layer3 3x3", 256, 14, 256, 3, 1, 1},
    {"resnet18 layer4 3x3", 512, 7, 512, 3, 1, 1},
    {"googlenet conv3 3x3", 64, 56, 192, 3, 1, 1},
    {"googlenet 3a 1x1 to 64", 192, 28, 64, 1, 1, 0},
    {"googlenet 3a 1x1 to 16", 192, 28, 16, 1, 1, 0},
    {"googlenet 4a 3x3", 96, 14, 208, 3, 1, 1},
    {"googlenet 4e 1x1", 528, 14, 256, 1, 1, 0},
    {"googlenet 5b 1x1", 832, 7, 384, 1, 1, 0},
    {"lenet c1 5x5", 1, 28, 6, 5, 1, 2},
    {"lenet c3 5x5", 6, 14, 16, 5, 1, 0},
};

#endif
