/* two_steps.c: the GPU table's training step in two halves
 * (train_step_start, train_step_finish) misused through the C API, on the
 * emulated driver (emulated_graphs.test): a finish with no step started,
 * a third start, and other calls while steps are unfinished are refused
 * with a message, and the table works again once they are finished. */
#include <stdio.h>
#include <stdlib.h>

#include "distnet.h"

static void said(const char *what, DlrtStatus st, const DlrtError *err) {
    printf("%s: %s\n", what, st == DLRT_OK ? "ok" : err->message);
}

int main(void) {
    const DlrtModel *m = distnet_cuda_model();
    enum { N = 4 };
    static float x[N * 784];
    int32_t y[N];
    for (int i = 0; i < N * 784; i++)
        x[i] = (float)(i % 29) / 29.0f;
    for (int i = 0; i < N; i++)
        y[i] = i % 10;
    void *net = NULL;
    DlrtError err;
    DlrtStatus st = m->create(&net, N, 1, &err);
    if (st != DLRT_OK) {
        printf("create: %s\n", err.message);
        return 1;
    }
    float loss, out[N * 10];
    said("finish, none started", m->train_step_finish(net, &loss, &err), &err);
    said("start 1", m->train_step_start(net, N, x, y, 0.01f, &err), &err);
    said("start 2", m->train_step_start(net, N, x, y, 0.01f, &err), &err);
    said("start 3", m->train_step_start(net, N, x, y, 0.01f, &err), &err);
    said("train_step", m->train_step(net, N, x, y, 0.01f, &loss, &err), &err);
    said("forward", m->forward(net, N, x, out, &err), &err);
    said("finish 1", m->train_step_finish(net, &loss, &err), &err);
    said("finish 2", m->train_step_finish(net, &loss, &err), &err);
    said("train_step", m->train_step(net, N, x, y, 0.01f, &loss, &err), &err);
    m->free(net);
    return 0;
}
