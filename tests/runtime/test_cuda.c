/* test_cuda.c — tests of libdlrt's CUDA driver layer (cuda.c).
 *
 * With no arguments it runs the unit tests.  Everywhere: a driver library
 * that does not exist, and one that is not a CUDA driver, must fail to
 * open with DLRT_E_DEVICE and a message that says so.  Then it opens the
 * real driver with a small hand-written PTX module (add_one, below); on a
 * machine without a driver or a GPU that fails with DLRT_E_DEVICE, and it
 * prints "cuda: no GPU, skipping the device checks: MESSAGE" and stops.
 * With a GPU it checks memory, copies, a launch and its result, the errors
 * of a bad launch, of an allocation too large, of PTX that does not
 * compile and of a bad DLRT_CUDA_DEVICE, and two objects open at once.
 * It prints "N passed, N failed" last and exits 1 on any failure.
 *
 * With a mode it is a tool for the lit test (tests/runtime/cuda.test):
 *   test_cuda open [PTX]   opens the driver (and loads the PTX file) and
 *                          prints the device, or "error: STATUS: MESSAGE"
 *                          on stderr and exits 1
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HARNESS_FILE "test_cuda.c"
#include "harness.h"


/* ======================================================================== */
/* The kernels                                                              */
/* ======================================================================== */

/* x[i] += 1 for i < n, one thread per element: what nvcc makes of
 *   __global__ void add_one(float *x, int n) {
 *       int i = blockIdx.x * blockDim.x + threadIdx.x;
 *       if (i < n) x[i] += 1.0f;
 *   }
 * targeting sm_52: the driver compiles PTX for its own GPU's newer
 * architecture, so every GPU a current driver supports runs it. */
static const char ADD_ONE_PTX[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry add_one(\n"
    "    .param .u64 add_one_x,\n"
    "    .param .u32 add_one_n\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .f32 %f<3>;\n"
    "    .reg .b32 %r<6>;\n"
    "    .reg .b64 %rd<5>;\n"
    "\n"
    "    ld.param.u64 %rd1, [add_one_x];\n"
    "    ld.param.u32 %r2, [add_one_n];\n"
    "    mov.u32 %r3, %ctaid.x;\n"
    "    mov.u32 %r4, %ntid.x;\n"
    "    mov.u32 %r5, %tid.x;\n"
    "    mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "    setp.ge.s32 %p1, %r1, %r2;\n"
    "    @%p1 bra DONE;\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "    mul.wide.s32 %rd3, %r1, 4;\n"
    "    add.s64 %rd4, %rd2, %rd3;\n"
    "    ld.global.f32 %f1, [%rd4];\n"
    "    add.f32 %f2, %f1, 0f3F800000;\n"
    "    st.global.f32 [%rd4], %f2;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n";

/* PTX with an instruction that does not exist, on line 6: the driver's
 * compiler must refuse it and its log must reach the message. */
static const char BROKEN_PTX[] =
    ".version 7.0\n"
    ".target sm_52\n"
    ".address_size 64\n"
    ".visible .entry broken()\n"
    "{\n"
    "    frobnicate.f32 %f1;\n"
    "    ret;\n"
    "}\n";

/* ======================================================================== */
/* The tests                                                                */
/* ======================================================================== */

/* A driver that is not there, and a library that is not a driver: clear
 * errors, on every machine. */
static void test_no_driver(void) {
    DlrtError err = {0};
    DlrtCuda *cu = (DlrtCuda *)&err; /* must come back NULL */
    setenv("DLRT_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    CHECK_ERROR(dlrt_cuda_open(&cu, ADD_ONE_PTX, &err), err, DLRT_E_DEVICE, "no CUDA driver");
    CHECK(strstr(err.message, "/nonexistent/libcuda.so.1") != NULL);
    CHECK(strstr(err.message, "use --device cpu") != NULL);
    CHECK(cu == NULL);

    /* zlib: loaded, but without the driver's entry points */
    setenv("DLRT_CUDA_LIBRARY", "libz.so.1", 1);
    cu = (DlrtCuda *)&err;
    CHECK_ERROR(dlrt_cuda_open(&cu, ADD_ONE_PTX, &err), err, DLRT_E_DEVICE,
                "the CUDA driver libz.so.1 has no cuGetErrorName");
    CHECK(cu == NULL);
    unsetenv("DLRT_CUDA_LIBRARY");

    CHECK(strcmp(dlrt_status_name(DLRT_E_DEVICE), "device error") == 0);
    dlrt_cuda_close(NULL);
}

/* add_one on n floats of device memory d, through host memory h (pinned or
 * not): uploads i / 2, runs, downloads, and checks i / 2 + 1. */
static void check_add_one(DlrtCuda *cu, DlrtCudaFunction fn, DlrtDevicePtr d, float *h, int n) {
    DlrtError err = {0};
    for (int i = 0; i < n; i++)
        h[i] = (float)i / 2;
    CHECK_OK(dlrt_cuda_upload(cu, d, h, (size_t)n * sizeof(float), "x", &err), err);
    void *args[] = {&d, &n};
    const unsigned grid[3] = {((unsigned)n + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    CHECK_OK(dlrt_cuda_launch(cu, fn, grid, block, 0, args, "op 'add_one'", &err), err);
    memset(h, 0, (size_t)n * sizeof(float));
    CHECK_OK(dlrt_cuda_download(cu, h, d, (size_t)n * sizeof(float), "x", &err), err);
    CHECK_OK(dlrt_cuda_sync(cu, "the test step", &err), err);
    int wrong = 0;
    for (int i = 0; i < n; i++)
        if (h[i] != (float)i / 2 + 1.0f && wrong++ < 5)
            fprintf(stderr, "x[%d] = %g, not %g\n", i, (double)h[i], (double)i / 2 + 1);
    CHECK(wrong == 0);
}

static void test_device(DlrtCuda *cu) {
    DlrtError err = {0};
    printf("cuda: %s, sm_%d, %d multiprocessors\n", dlrt_cuda_device_name(cu),
           dlrt_cuda_compute_capability(cu), dlrt_cuda_multiprocessors(cu));
    CHECK(dlrt_cuda_device_name(cu)[0] != 0);
    CHECK(dlrt_cuda_compute_capability(cu) >= 50);
    CHECK(dlrt_cuda_multiprocessors(cu) > 0);

    size_t free_bytes = 0, total_bytes = 0;
    CHECK_OK(dlrt_cuda_mem_info(cu, &free_bytes, &total_bytes, &err), err);
    CHECK(total_bytes > 0 && free_bytes <= total_bytes);

    DlrtCudaFunction fn = NULL, missing = &err;
    CHECK_OK(dlrt_cuda_function(cu, "add_one", &fn, &err), err);
    CHECK(fn != NULL);
    CHECK_ERROR(dlrt_cuda_function(cu, "add_two", &missing, &err), err, DLRT_E_DEVICE,
                "cuModuleGetFunction failed for kernel 'add_two': CUDA_ERROR_NOT_FOUND");
    CHECK(missing == NULL);

    /* 1000 floats: 4 blocks of 256 threads, the last 24 idle */
    enum { N = 1000 };
    DlrtDevicePtr d = 0;
    CHECK_OK(dlrt_cuda_alloc(cu, N * sizeof(float), &d, "x", &err), err);
    CHECK(d != 0);
    float *pinned = NULL;
    CHECK_OK(dlrt_cuda_host_alloc(cu, N * sizeof(float), (void **)&pinned, &err), err);
    if (!d || !pinned)
        return;
    static float pageable[N];
    check_add_one(cu, fn, d, pinned, N);
    check_add_one(cu, fn, d, pageable, N);

    /* zero: every byte, and bytes == 0 does nothing */
    CHECK_OK(dlrt_cuda_zero(cu, d, N * sizeof(float), "x", &err), err);
    CHECK_OK(dlrt_cuda_upload(cu, d, pinned, 0, "x", &err), err);
    CHECK_OK(dlrt_cuda_download(cu, pinned, d, N * sizeof(float), "x", &err), err);
    CHECK_OK(dlrt_cuda_sync(cu, "zeroing", &err), err);
    int nonzero = 0;
    for (int i = 0; i < N; i++)
        nonzero += pinned[i] != 0;
    CHECK(nonzero == 0);

    /* 2048 threads per block is over every GPU's limit of 1024 */
    int n = N;
    void *args[] = {&d, &n};
    const unsigned grid[3] = {4, 1, 1}, big_block[3] = {2048, 1, 1}, block[3] = {256, 1, 1};
    CHECK_ERROR(dlrt_cuda_launch(cu, fn, grid, big_block, 0, args, "op 'c1.1'", &err), err,
                DLRT_E_DEVICE, "cuLaunchKernel failed in op 'c1.1': CUDA_ERROR_");
    /* more dynamic shared memory than the default 48 KiB: allowed first */
    CHECK_OK(dlrt_cuda_launch(cu, fn, grid, block, 64 * 1024, args, "op 'shared'", &err), err);
    CHECK_OK(dlrt_cuda_sync(cu, "the shared-memory launch", &err), err);
    CHECK_ERROR(dlrt_cuda_launch(cu, fn, grid, block, 1u << 30, args, "op 'huge'", &err), err,
                DLRT_E_DEVICE, "op 'huge' needs 1073741824 bytes of shared memory per block");
    CHECK_ERROR(dlrt_cuda_launch(cu, NULL, grid, block, 0, args, "op 'none'", &err), err,
                DLRT_E_ARG, "no kernel to launch in op 'none'");
    /* the failed launches queued nothing: the stream is still usable */
    check_add_one(cu, fn, d, pinned, N);

    /* a petabyte: refused before the driver is asked, with both sizes */
    DlrtDevicePtr huge = 1;
    CHECK_ERROR(dlrt_cuda_alloc(cu, (size_t)1 << 50, &huge, "the activations", &err), err,
                DLRT_E_NOMEM, "the activations need 1073741824.0 MiB; the GPU has ");
    CHECK(strstr(err.message, " MiB free of ") != NULL);
    CHECK(huge == 0);
    DlrtDevicePtr none = 1;
    void *no_host = &err;
    CHECK_OK(dlrt_cuda_alloc(cu, 0, &none, "nothing", &err), err);
    CHECK(none == 0);
    CHECK_OK(dlrt_cuda_host_alloc(cu, 0, &no_host, &err), err);
    CHECK(no_host == NULL);
    dlrt_cuda_free(cu, 0);
    dlrt_cuda_host_free(cu, NULL);

    dlrt_cuda_host_free(cu, pinned);
    dlrt_cuda_free(cu, d);
}

/* Opens that fail once a driver and a GPU are known to be there. */
static void test_open_errors(void) {
    DlrtError err = {0};
    DlrtCuda *cu = (DlrtCuda *)&err;
    CHECK_ERROR(dlrt_cuda_open(&cu, BROKEN_PTX, &err), err, DLRT_E_DEVICE,
                "cuModuleLoadDataEx failed for the kernels' PTX on ");
    CHECK(strstr(err.message, "frobnicate") != NULL);
    CHECK(cu == NULL);
    printf("cuda: broken PTX: %s\n", err.message);

    setenv("DLRT_CUDA_DEVICE", "99", 1);
    CHECK_ERROR(dlrt_cuda_open(&cu, ADD_ONE_PTX, &err), err, DLRT_E_RANGE,
                "DLRT_CUDA_DEVICE=99 is not a device of this machine, which has ");
    setenv("DLRT_CUDA_DEVICE", "one", 1);
    CHECK_ERROR(dlrt_cuda_open(&cu, ADD_ONE_PTX, &err), err, DLRT_E_RANGE,
                "DLRT_CUDA_DEVICE=one is not a device");
    CHECK(cu == NULL);
    unsetenv("DLRT_CUDA_DEVICE");
}

/* Two objects at once (the second synchronizing every launch), on their
 * own memory, closed in the order they were opened. */
static void test_two_objects(DlrtCuda *first) {
    DlrtError err = {0};
    setenv("DLRT_CUDA_DEVICE", "0", 1);
    setenv("DLRT_CUDA_SYNC", "1", 1);
    DlrtCuda *second = NULL;
    DlrtStatus st = dlrt_cuda_open(&second, ADD_ONE_PTX, &err);
    unsetenv("DLRT_CUDA_DEVICE");
    unsetenv("DLRT_CUDA_SYNC");
    if (!CHECK_OK(st, err))
        return;
    DlrtCudaFunction f1 = NULL, f2 = NULL;
    CHECK_OK(dlrt_cuda_function(first, "add_one", &f1, &err), err);
    CHECK_OK(dlrt_cuda_function(second, "add_one", &f2, &err), err);
    enum { N = 300 };
    DlrtDevicePtr d1 = 0, d2 = 0;
    CHECK_OK(dlrt_cuda_alloc(first, N * sizeof(float), &d1, "x1", &err), err);
    CHECK_OK(dlrt_cuda_alloc(second, N * sizeof(float), &d2, "x2", &err), err);
    static float h[N];
    if (f1 && f2 && d1 && d2) {
        check_add_one(second, f2, d2, h, N);
        check_add_one(first, f1, d1, h, N);
        check_add_one(second, f2, d2, h, N);
    }
    dlrt_cuda_free(first, d1);
    dlrt_cuda_free(second, d2);
    dlrt_cuda_close(first);
    dlrt_cuda_close(second);
}

static int unit_tests(void) {
    unsetenv("DLRT_CUDA_DEVICE");
    unsetenv("DLRT_CUDA_SYNC");
    test_no_driver();

    DlrtError err = {0};
    DlrtCuda *cu = NULL;
    DlrtStatus st = dlrt_cuda_open(&cu, ADD_ONE_PTX, &err);
    if (st == DLRT_E_DEVICE) {
        printf("cuda: no GPU, skipping the device checks: %s\n", err.message);
    } else if (CHECK_OK(st, err)) {
        test_device(cu);
        test_open_errors();
        test_two_objects(cu);
    }
    return harness_report();
}

/* ======================================================================== */
/* The lit test's tool                                                      */
/* ======================================================================== */

static int fail(const DlrtError *err) {
    fprintf(stderr, "error: %s: %s\n", dlrt_status_name(err->status), err->message);
    return 1;
}

/* test_cuda open [PTX] */
static int open_tool(const char *ptx_path) {
    DlrtError err = {0};
    char *ptx = NULL;
    if (ptx_path) {
        FILE *f = fopen(ptx_path, "rb");
        if (!f) {
            fprintf(stderr, "test_cuda: cannot open %s\n", ptx_path);
            return 1;
        }
        size_t cap = 1 << 20, n = 0;
        ptx = malloc(cap);
        if (ptx)
            n = fread(ptx, 1, cap - 1, f);
        fclose(f);
        if (!ptx)
            return 1;
        ptx[n] = 0;
    }
    DlrtCuda *cu = NULL;
    DlrtStatus st = dlrt_cuda_open(&cu, ptx, &err);
    free(ptx);
    if (st != DLRT_OK)
        return fail(&err);
    printf("device: %s, sm_%d, %d multiprocessors\n", dlrt_cuda_device_name(cu),
           dlrt_cuda_compute_capability(cu), dlrt_cuda_multiprocessors(cu));
    dlrt_cuda_close(cu);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 1)
        return unit_tests();
    if (strcmp(argv[1], "open") == 0 && argc <= 3)
        return open_tool(argc == 3 ? argv[2] : NULL);
    fprintf(stderr, "usage: test_cuda [open [PTX]]\n");
    return 2;
}
