/* emu_driver.c — a CUDA driver that runs dlc's GPU kernels on the CPU, for
 * testing them where there is no GPU: a program built with
 * --target=cpu,cuda loads it through DLRT_CUDA_LIBRARY in place of
 * libcuda.so.1.  The kernels are the LLVM IR that dlc builds for the NVPTX
 * backend (DLC_NVPTX_DUMP_LL), compiled for the host by ll_to_host.py and
 * clang and linked into this library; the PTX the program passes is
 * ignored, and cuModuleGetFunction finds emu_wrap_NAME instead.
 *
 * Device memory is host memory, filled with 0xff bytes when allocated (a
 * float that nobody wrote reads as NaN, so a kernel that reads what it
 * should not shows in the results).  A block's threads are a pool of
 * pthreads that meet at a barrier for __syncthreads; blocks run one after
 * another, so the kernels' shared arrays, module globals here, are the
 * running block's.  The arithmetic is the host's (exp2f for ex2.approx):
 * this checks the kernels' indexing and the host code's launches, not the
 * GPU's rounding or speed.  The tensor cores' mma.sync is a warp's
 * exchange of fragments (emu_mma), computed in f32 in the order of k.
 * A stream being captured records its launches, with copies of their
 * arguments, into a graph that cuGraphLaunch runs again. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long CUdeviceptr;

static _Thread_local int thread_index; /* threadIdx.x of this worker */
static int block[3], block_dim, grid_dim;  /* the running block, for every worker */
static pthread_barrier_t sync_threads, go, done;
static void (*kernel)(void **);
static void **kernel_args;
static int pool_size;

/* A CUfunction: the kernel's wrapper, and its parameters' count and sizes
 * (ll_to_host.py's emu_sizes_NAME: count, then each size in bytes). */
typedef struct Function {
    void (*wrap)(void **);
    const int *sizes;
} Function;

/* A recorded launch, its arguments copied; a graph is a list of them. */
typedef struct Launch {
    Function *fn;
    unsigned grid[3], block[3];
    void *args[64];             /* each points into values */
    unsigned char values[64 * 8];
    struct Launch *next;
} Launch;
typedef struct Graph {
    Launch *first, **last;
} Graph;
static Graph *capturing;        /* the graph a capture is recording, or NULL */

int emu_tid_x(void) { return thread_index; }
int emu_ctaid_x(void) { return block[0]; }
int emu_ctaid_y(void) { return block[1]; }
int emu_ctaid_z(void) { return block[2]; }
int emu_ntid_x(void) { return block_dim; }
int emu_nctaid_x(void) { return grid_dim; }
void emu_barrier(void) { pthread_barrier_wait(&sync_threads); }
/* dp4a.s32.s32: c plus the four products of a's and b's signed bytes */
int emu_dp4a(int a, int b, int c) {
    for (int k = 0; k < 4; k++)
        c += (signed char)(a >> 8 * k) * (signed char)(b >> 8 * k);
    return c;
}

/* cvt.rna.tf32.f32: to 10 bits of mantissa, to nearest, ties away from 0 */
int emu_f2tf32(float a) {
    unsigned u;
    memcpy(&u, &a, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) /* not inf or NaN */
        u = (u + 0x1000u) & ~0x1fffu;
    return (int)u;
}

/* a float's bf16, to nearest, ties to even (NaN stays NaN) */
static unsigned bf16(float a) {
    unsigned u;
    memcpy(&u, &a, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

/* cvt.rn.bf16x2.f32 d, a, b: a's bf16 in the upper half, b's in the lower */
int emu_ff2bf16x2(float a, float b) { return (int)(bf16(a) << 16 | bf16(b)); }

static float from_bits(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* mma.sync.m16n8k8 (TF32, kind 0) and m16n8k16 (bf16, kind 1), row.col,
 * f32 sums, for the calling lane: its fragments a (4 registers), b (2) and
 * c (4) in, its 4 results d out, in the PTX ISA's layouts (codegen/nvptx/
 * kb.h).  Each lane puts its fragments where its warp can read them, and
 * every thread of the block meets at the barrier: dlc's products call
 * mma.sync in every thread alike.  The fragments alternate between two
 * stores, since a thread can only get two calls ahead of another once
 * that one has read the first's. */
#define MAX_THREADS 1024
static unsigned frag_a[2][MAX_THREADS][4], frag_b[2][MAX_THREADS][2];
static _Thread_local int frag_turn;

void emu_mma(int kind, int a0, int a1, int a2, int a3, int b0, int b1, float c0, float c1, float c2,
             float c3, float *d) {
    int t = thread_index, s = frag_turn;
    frag_turn ^= 1;
    const int a[4] = {a0, a1, a2, a3}, b[2] = {b0, b1};
    for (int i = 0; i < 4; i++)
        frag_a[s][t][i] = (unsigned)a[i];
    for (int i = 0; i < 2; i++)
        frag_b[s][t][i] = (unsigned)b[i];
    emu_barrier();
    int warp = t & ~31, g = (t & 31) / 4, tq = t & 3, depth = kind ? 16 : 8;
    const float c[4] = {c0, c1, c2, c3};
    for (int e = 0; e < 4; e++) {
        int row = g + 8 * (e / 2), col = 2 * tq + e % 2;
        float sum = c[e];
        for (int k = 0; k < depth; k++) {
            float x, y;
            if (kind == 0) { /* A[r][k]: lane (r % 8) 4 + k % 4, register r / 8 + 2 (k / 4) */
                x = from_bits(frag_a[s][warp + row % 8 * 4 + k % 4][row / 8 + 2 * (k / 4)]);
                y = from_bits(frag_b[s][warp + col * 4 + k % 4][k / 4]);
            } else { /* pairs along k: lane (r % 8) 4 + (k % 8) / 2, half k % 2 */
                unsigned ra = frag_a[s][warp + row % 8 * 4 + k % 8 / 2][row / 8 + 2 * (k / 8)];
                unsigned rb = frag_b[s][warp + col * 4 + k % 8 / 2][k / 8];
                x = from_bits((k % 2 ? ra >> 16 : ra & 0xffffu) << 16);
                y = from_bits((k % 2 ? rb >> 16 : rb & 0xffffu) << 16);
            }
            sum += x * y;
        }
        d[e] = sum;
    }
}

static void *worker(void *arg) {
    thread_index = (int)(long)arg;
    for (;;) {
        pthread_barrier_wait(&go);
        kernel(kernel_args);
        pthread_barrier_wait(&done);
    }
    return NULL;
}

/* The workers, made at the first launch: dlc's kernels all have blocks of
 * the same size. */
static int start_pool(int threads) {
    if (pool_size)
        return pool_size == threads ? 0 : 1;
    pool_size = threads;
    pthread_barrier_init(&sync_threads, NULL, (unsigned)threads);
    pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&done, NULL, (unsigned)threads + 1);
    for (long i = 0; i < threads; i++) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1 << 20);
        if (pthread_create(&t, &attr, worker, (void *)i))
            return 1;
        pthread_detach(t);
    }
    return 0;
}

int cuGetErrorName(int e, const char **s) { (void)e; *s = "EMU_ERROR"; return 0; }
int cuGetErrorString(int e, const char **s) { (void)e; *s = "the CPU emulator failed"; return 0; }
int cuInit(unsigned flags) { (void)flags; return 0; }
int cuDeviceGetCount(int *count) { *count = 1; return 0; }
int cuDeviceGet(int *dev, int ordinal) { *dev = ordinal; return 0; }
int cuDeviceGetName(char *name, int len, int dev) {
    (void)dev;
    snprintf(name, (size_t)len, "CPU emulator");
    return 0;
}
int cuDeviceGetAttribute(int *value, int attr, int dev) {
    (void)dev; /* an H100's multiprocessors, capability and shared memory */
    *value = attr == 16 ? 132 : attr == 75 ? 9 : attr == 76 ? 0 : attr == 97 ? 227 * 1024 : 0;
    return 0;
}
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)dev; *ctx = (void *)1; return 0; }
int cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return 0; }
int cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
int cuCtxSetLimit(int limit, size_t value) { (void)limit, (void)value; return 0; }
int cuStreamCreate(void **stream, unsigned flags) { (void)flags; *stream = (void *)1; return 0; }
int cuStreamDestroy_v2(void *stream) { (void)stream; return 0; }
int cuStreamSynchronize(void *stream) { (void)stream; return capturing ? 900 : 0; }
/* Every call runs at once, in the order the host makes it, so an event has
 * nothing to order: the streams' work is already done when it is recorded
 * (emu_nccl.c's sums too). */
int cuEventCreate(void **event, unsigned flags) { (void)flags; *event = (void *)1; return 0; }
int cuEventDestroy_v2(void *event) { (void)event; return 0; }
int cuEventRecord(void *event, void *stream) { (void)event, (void)stream; return 0; }
int cuEventSynchronize(void *event) { (void)event; return 0; }
int cuStreamWaitEvent(void *stream, void *event, unsigned flags) {
    (void)stream, (void)event, (void)flags;
    return 0;
}
int cuModuleLoadDataEx(void **mod, const void *image, unsigned n, int *options, void **values) {
    (void)image, (void)n, (void)options, (void)values;
    *mod = (void *)1;
    return 0;
}
int cuModuleUnload(void *mod) { (void)mod; return 0; }
int cuModuleGetFunction(void **fn, void *mod, const char *name) {
    (void)mod;
    char symbol[512], sizes[512];
    snprintf(symbol, sizeof symbol, "emu_wrap_%s", name);
    snprintf(sizes, sizeof sizes, "emu_sizes_%s", name);
    static const char here = 0; /* an object of this library, for dladdr */
    Dl_info self;
    void *lib = dladdr(&here, &self) ? dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD) : NULL;
    Function *f = calloc(1, sizeof *f);
    void *wrap = lib ? dlsym(lib, symbol) : NULL;
    if (f && wrap) {
        memcpy(&f->wrap, &wrap, sizeof f->wrap);
        f->sizes = dlsym(lib, sizes);
    }
    if (!f || !wrap || !f->sizes) {
        fprintf(stderr, "emu_driver: no kernel %s\n", name);
        free(f);
        return 500; /* CUDA_ERROR_NOT_FOUND */
    }
    *fn = f; /* never freed: a program looks up each kernel once */
    return 0;
}
int cuFuncSetAttribute(void *fn, int attr, int value) { (void)fn, (void)attr, (void)value; return 0; }

static void run(Function *fn, const unsigned grid[3], unsigned bx, void **params) {
    kernel = fn->wrap;
    kernel_args = params;
    block_dim = (int)bx, grid_dim = (int)grid[0];
    for (unsigned z = 0; z < grid[2]; z++)
        for (unsigned y = 0; y < grid[1]; y++)
            for (unsigned x = 0; x < grid[0]; x++) {
                block[0] = (int)x, block[1] = (int)y, block[2] = (int)z;
                pthread_barrier_wait(&go);
                pthread_barrier_wait(&done);
            }
}

int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    (void)shared, (void)stream, (void)extra;
    if (by != 1 || bz != 1 || bx > MAX_THREADS || start_pool((int)bx)) {
        fprintf(stderr, "emu_driver: blocks of %u x %u x %u threads\n", bx, by, bz);
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    }
    Function *f = fn;
    const unsigned grid[3] = {gx, gy, gz};
    if (!capturing) {
        run(f, grid, bx, params);
        return 0;
    }
    Launch *l = calloc(1, sizeof *l);
    if (!l || f->sizes[0] > 64)
        return 1;
    l->fn = f;
    memcpy(l->grid, grid, sizeof grid);
    l->block[0] = bx;
    for (int i = 0, at = 0; i < f->sizes[0]; at += 8, i++) {
        memcpy(l->values + at, params[i], (size_t)f->sizes[1 + i]);
        l->args[i] = l->values + at;
    }
    *capturing->last = l;
    capturing->last = &l->next;
    return 0;
}

/* Graphs.  A capture records the stream's launches (nothing else is
 * queued during one here); the instance is the graph itself. */
int cuStreamBeginCapture_v2(void *stream, int mode) {
    (void)stream, (void)mode;
    if (capturing)
        return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
    capturing = calloc(1, sizeof *capturing);
    if (!capturing)
        return 2;
    capturing->last = &capturing->first;
    return 0;
}
int cuStreamEndCapture(void *stream, void **graph) {
    (void)stream;
    if (!capturing)
        return 901; /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */
    *graph = capturing;
    capturing = NULL;
    return 0;
}
int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
    (void)flags;
    Graph *copy = calloc(1, sizeof *copy);
    if (!copy)
        return 2;
    copy->last = &copy->first;
    for (const Launch *l = ((Graph *)graph)->first; l; l = l->next) {
        Launch *c = malloc(sizeof *c);
        if (!c)
            return 2;
        *c = *l;
        for (int i = 0; i < 64; i++) /* into its own values */
            if (l->args[i])
                c->args[i] = c->values + ((unsigned char *)l->args[i] - l->values);
        c->next = NULL;
        *copy->last = c;
        copy->last = &c->next;
    }
    *exec = copy;
    return 0;
}
static void graph_free(Graph *g) {
    for (Launch *l = g ? g->first : NULL, *next; l; l = next) {
        next = l->next;
        free(l);
    }
    free(g);
}
int cuGraphDestroy(void *graph) { graph_free(graph); return 0; }
int cuGraphExecDestroy(void *exec) { graph_free(exec); return 0; }
int cuGraphLaunch(void *exec, void *stream) {
    (void)stream;
    for (Launch *l = ((Graph *)exec)->first; l; l = l->next)
        run(l->fn, l->grid, l->block[0], l->args);
    return 0;
}
int cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    *free_bytes = *total = (size_t)16 << 30;
    return 0;
}
int cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    void *m = malloc(bytes);
    if (!m)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    memset(m, 0xff, bytes);
    *p = (CUdeviceptr)(unsigned long)m;
    return 0;
}
int cuMemFree_v2(CUdeviceptr p) { free((void *)(unsigned long)p); return 0; }
int cuMemAllocHost_v2(void **p, size_t bytes) { *p = malloc(bytes); return *p ? 0 : 2; }
int cuMemFreeHost(void *p) { free(p); return 0; }
int cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, void *stream) {
    (void)stream;
    if (capturing) /* dlc's graphs hold kernels only */
        return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
    memcpy((void *)(unsigned long)dst, src, bytes);
    return 0;
}
int cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, void *stream) {
    (void)stream;
    if (capturing) /* dlc's graphs hold kernels only */
        return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
    memcpy(dst, (const void *)(unsigned long)src, bytes);
    return 0;
}
int cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, void *stream) {
    (void)stream;
    if (capturing) /* dlc's graphs hold kernels only */
        return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */
    memset((void *)(unsigned long)dst, value, bytes);
    return 0;
}
