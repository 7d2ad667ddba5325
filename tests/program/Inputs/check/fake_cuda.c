/* fake_cuda.c — a program whose "GPU" table is the CPU's, wrapped, for
 * tests of `check` and `--device cuda` on machines without a GPU.
 *
 *   %cc -DMODEL=lenet5_model fake_cuda.c lenet5.c %dlrt_program -o fake
 *
 * The program's model->cuda is a copy of MODEL with device "cuda" whose
 * create, gradients and train_step call MODEL's and then, as FAKE_CUDA
 * says, do something a broken GPU table might:
 *   (unset)    nothing: the two tables compute the same
 *   nodevice   create fails with DLRT_E_DEVICE, as where there is no GPU
 *   start      create initializes the first tensor differently
 *   grad       gradients() returns a first gradient that is off by 1%
 *   nan        gradients() returns a NaN in the first gradient
 *   step       train_step() leaves the last tensor off by 1%
 *   nodata     tensor() gives no data for the last tensor, as when a copy
 *              from the device fails
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"

extern const DlrtModel MODEL;

static bool mode(const char *name) {
    const char *m = getenv("FAKE_CUDA");
    return m && strcmp(m, name) == 0;
}

/* Moves the first entry of an f32 tensor by 1% of its largest magnitude
 * (and a little more, for a tensor of zeros). */
static void nudge(DlrtTensor t) {
    float *v = t.data, top = 0;
    int64_t count = 1;
    for (int d = 0; d < t.rank; d++)
        count *= t.dims[d];
    for (int64_t j = 0; j < count; j++)
        top = fabsf(v[j]) > top ? fabsf(v[j]) : top;
    v[0] += 0.01f * top + 1e-3f;
}

static DlrtStatus fake_create(void **net, int64_t max_batch, uint64_t seed, DlrtError *err) {
    if (mode("nodevice"))
        return dlrt_fail(err, DLRT_E_DEVICE, "no CUDA device: cuInit failed: "
                         "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
    DlrtStatus st = MODEL.create(net, max_batch, seed, err);
    if (st == DLRT_OK && mode("start"))
        nudge(MODEL.tensor(*net, 0));
    return st;
}

/* The first tensor that has a gradient. */
static DlrtTensor first_gradient(void *net) {
    for (int i = 0; i < MODEL.ntensors; i++)
        if (MODEL.gradient(net, i).data)
            return MODEL.gradient(net, i);
    abort();
}

static DlrtStatus fake_gradients(void *net, int64_t n, const float *x, const int32_t *labels,
                                 float *loss, DlrtError *err) {
    DlrtStatus st = MODEL.gradients(net, n, x, labels, loss, err);
    if (st == DLRT_OK && mode("grad"))
        nudge(first_gradient(net));
    if (st == DLRT_OK && mode("nan"))
        ((float *)first_gradient(net).data)[0] = NAN;
    return st;
}

static DlrtStatus fake_train_step(void *net, int64_t n, const float *x, const int32_t *labels,
                                  float lr, float *loss, DlrtError *err) {
    DlrtStatus st = MODEL.train_step(net, n, x, labels, lr, loss, err);
    if (st == DLRT_OK && mode("step"))
        nudge(MODEL.tensor(net, MODEL.ntensors - 1));
    return st;
}

static DlrtTensor fake_tensor(void *net, int i) {
    DlrtTensor t = MODEL.tensor(net, i);
    if (mode("nodata") && i == MODEL.ntensors - 1)
        t.data = NULL;
    return t;
}

int main(int argc, char **argv) {
    DlrtModel gpu = MODEL;
    gpu.device = "cuda";
    gpu.create = fake_create;
    gpu.gradients = fake_gradients;
    gpu.train_step = fake_train_step;
    gpu.tensor = fake_tensor;
    DlrtModel cpu = MODEL;
    cpu.cuda = &gpu;
    return dlrt_main(argc, argv, &cpu);
}
