/* cuda.c — the GPU through the CUDA Driver API, loaded at run time.
 *
 * libdlrt never links libcuda and includes no CUDA header (none is
 * installed where the programs run): the few types and entry points it
 * needs are declared here, from the Driver API's documentation (cuda.h of
 * CUDA 13), and dlrt_cuda_open finds them with dlopen/dlsym.  Where the
 * API has versioned a function, the symbol is the version cuda.h maps the
 * name to (cuMemAlloc is cuMemAlloc_v2); messages use the documented name.
 *
 * Everything lives in the DlrtCuda object: the library handle, the
 * function pointers, the device, its primary context (shared with every
 * other user of the device in the process, and reference-counted by the
 * driver), the stream and the module.  A failure in open releases what
 * was taken so far through the same function close uses. */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"

/* The Driver API's types, as cuda.h declares them. */
typedef int CUresult;                     /* CUDA_SUCCESS or a CUDA_ERROR_* */
typedef int CUdevice;                     /* a device ordinal's handle */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef int CUjit_option;

/* The values of cuda.h's enums that this file uses. */
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    /* CUdevice_attribute */
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    /* CUfunction_attribute */
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    /* CUjit_option */
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    /* CUevent_flags: an event only for ordering, never timed */
    CU_EVENT_DISABLE_TIMING = 2,
    /* CUstream_flags: no implicit ordering with the legacy default stream */
    CU_STREAM_NON_BLOCKING = 1,
    /* CUstreamCaptureMode: only this thread's calls are checked for ones
       that capture forbids */
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    /* CUlimit */
    CU_LIMIT_STACK_SIZE = 0,
};

/* Dynamic shared memory a kernel may use without asking for more. */
#define DEFAULT_SHARED_BYTES (48u * 1024)
/* The JIT compiler's error log, of which a message keeps the start. */
#define JIT_LOG_BYTES (16 * 1024)

/* Every entry point used, declared once: the field's name (the API's),
 * the symbol libcuda exports, and the parameters.  All return CUresult. */
#define DLRT_CUDA_CALLS(X)                                                            \
    X(cuGetErrorName, "cuGetErrorName", (CUresult error, const char **str))           \
    X(cuGetErrorString, "cuGetErrorString", (CUresult error, const char **str))       \
    X(cuInit, "cuInit", (unsigned flags))                                             \
    X(cuDeviceGetCount, "cuDeviceGetCount", (int *count))                             \
    X(cuDeviceGet, "cuDeviceGet", (CUdevice *dev, int ordinal))                       \
    X(cuDeviceGetName, "cuDeviceGetName", (char *name, int len, CUdevice dev))        \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int *value, int attr, CUdevice dev)) \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *ctx, CUdevice dev)) \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice dev))      \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext ctx))                            \
    X(cuCtxSetLimit, "cuCtxSetLimit", (int limit, size_t value))                      \
    X(cuStreamCreate, "cuStreamCreate", (CUstream *stream, unsigned flags))           \
    X(cuStreamDestroy, "cuStreamDestroy_v2", (CUstream stream))                       \
    X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream stream))                  \
    X(cuModuleLoadDataEx, "cuModuleLoadDataEx",                                       \
      (CUmodule *mod, const void *image, unsigned n, CUjit_option *options, void **values)) \
    X(cuModuleUnload, "cuModuleUnload", (CUmodule mod))                               \
    X(cuModuleGetFunction, "cuModuleGetFunction",                                     \
      (CUfunction *fn, CUmodule mod, const char *name))                               \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction fn, int attr, int value)) \
    X(cuLaunchKernel, "cuLaunchKernel",                                               \
      (CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,  \
       unsigned bz, unsigned shared, CUstream stream, void **params, void **extra))   \
    X(cuMemGetInfo, "cuMemGetInfo_v2", (size_t *free_bytes, size_t *total_bytes))     \
    X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *p, size_t bytes))                    \
    X(cuMemFree, "cuMemFree_v2", (CUdeviceptr p))                                     \
    X(cuMemAllocHost, "cuMemAllocHost_v2", (void **p, size_t bytes))                  \
    X(cuMemFreeHost, "cuMemFreeHost", (void *p))                                      \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                      \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))              \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                      \
      (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                    \
    X(cuMemsetD8Async, "cuMemsetD8Async",                                             \
      (CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream))             \
    X(cuEventCreate, "cuEventCreate", (CUevent *event, unsigned flags))              \
    X(cuEventDestroy, "cuEventDestroy_v2", (CUevent event))                          \
    X(cuEventRecord, "cuEventRecord", (CUevent event, CUstream stream))              \
    X(cuEventSynchronize, "cuEventSynchronize", (CUevent event))                     \
    X(cuStreamWaitEvent, "cuStreamWaitEvent", (CUstream stream, CUevent event, unsigned flags)) \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream stream, int mode))  \
    X(cuStreamEndCapture, "cuStreamEndCapture", (CUstream stream, CUgraph *graph))   \
    X(cuGraphInstantiate, "cuGraphInstantiateWithFlags",                              \
      (CUgraphExec *exec, CUgraph graph, unsigned long long flags))                   \
    X(cuGraphLaunch, "cuGraphLaunch", (CUgraphExec exec, CUstream stream))            \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec exec))                   \
    X(cuGraphDestroy, "cuGraphDestroy", (CUgraph graph))

struct DlrtCuda {
    void *lib;              /* dlopen's handle of libcuda */
    struct {
#define FIELD(name, symbol, params) CUresult (*name) params;
        DLRT_CUDA_CALLS(FIELD)
#undef FIELD
    } api;                  /* the driver's entry points */
    CUdevice dev;           /* the device DLRT_CUDA_DEVICE names */
    bool retained;          /* dev's primary context is retained (ctx) */
    CUcontext ctx;          /* dev's primary context, made current by each call */
    CUstream stream;        /* where all the work goes; NULL until created */
    CUmodule module;        /* the kernels; NULL without PTX */
    char name[256];         /* the device's */
    int capability;         /* major * 10 + minor */
    int multiprocessors;    /* streaming multiprocessors */
    int max_shared;         /* dynamic shared memory a block may opt in to */
    bool sync_each;         /* DLRT_CUDA_SYNC=1: wait after each launch */
    bool graphs;            /* record launches as graphs (DLRT_CUDA_GRAPHS, dlrt_cuda_graphs) */
    DlrtProfile *profile;   /* DLRT_CUDA_PROFILE=1: each launch timed (below), or NULL */
};

/* DLRT_CUDA_PROFILE=1: each launch waits for the work before it, then for
 * itself, and its host-clock time (launch latency included, a few
 * microseconds) is added to the row of its 'what' string (profile.c);
 * dlrt_cuda_close prints the rows, longest first, on stderr.  For finding
 * where a step's time goes, not for timing steps: the waits add up. */

static const char *or_default(const char *what) {
    return what && *what ? what : "a CUDA call";
}

/* Fails with a message naming the call, the CUDA error and what was being
 * done: "cuLaunchKernel failed in op 'c1.1': CUDA_ERROR_INVALID_VALUE
 * (invalid argument)".  prep joins call and what ("in", "for"). */
static DlrtStatus cuda_fail(const DlrtCuda *cu, DlrtStatus status, CUresult r, const char *call,
                            const char *prep, const char *what, DlrtError *err) {
    const char *name = NULL, *text = NULL;
    if (cu->api.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = NULL;
    if (cu->api.cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
        text = "unknown error";
    if (name)
        return dlrt_fail(err, status, "%s failed %s %s: %s (%s)", call, prep, or_default(what),
                         name, text);
    return dlrt_fail(err, status, "%s failed %s %s: CUDA error %d (%s)", call, prep,
                     or_default(what), r, text);
}

/* Makes the object's context current on this thread: cheap, and what lets
 * objects of different devices, and threads, take turns. */
static DlrtStatus bind(DlrtCuda *cu, const char *what, DlrtError *err) {
    CUresult r = cu->api.cuCtxSetCurrent(cu->ctx);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuCtxSetCurrent",
                                                   "for", what, err);
}

static double mib(size_t bytes) {
    return (double)bytes / (1024.0 * 1024.0);
}

/* Releases whatever a (possibly half-opened) object holds, in the reverse
 * order of open. */
void dlrt_cuda_close(DlrtCuda *cu) {
    if (!cu)
        return;
    dlrt_profile_close(cu->profile);
    if (cu->retained) {
        cu->api.cuCtxSetCurrent(cu->ctx);
        if (cu->module)
            cu->api.cuModuleUnload(cu->module);
        if (cu->stream)
            cu->api.cuStreamDestroy(cu->stream);
        cu->api.cuDevicePrimaryCtxRelease(cu->dev);
    }
    if (cu->lib)
        dlclose(cu->lib);
    free(cu);
}

/* Loads the library at path and every entry point. */
static DlrtStatus load_driver(DlrtCuda *cu, const char *path, DlrtError *err) {
    /* RTLD_NODELETE: the driver stays mapped after the last dlclose, as its
       threads and exit handlers expect; a second open finds it loaded. */
    cu->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!cu->lib) {
        const char *why = dlerror();
        return dlrt_fail(err, DLRT_E_DEVICE,
                         "no CUDA driver: cannot load %s (%s); this machine has no NVIDIA "
                         "driver, use --device cpu", path, why ? why : "unknown reason");
    }
    void *sym;
#define LOAD(name, symbol, params)                                                     \
    if (!(sym = dlsym(cu->lib, symbol)))                                               \
        return dlrt_fail(err, DLRT_E_DEVICE,                                           \
                         "the CUDA driver %s has no %s: it is too old or not a CUDA "  \
                         "driver; update the NVIDIA driver, or use --device cpu",      \
                         path, symbol);                                                \
    memcpy(&cu->api.name, &sym, sizeof cu->api.name);
    DLRT_CUDA_CALLS(LOAD)
#undef LOAD
    return DLRT_OK;
}

/* The rank of this process among those of its job on this machine, as
 * Open MPI's mpirun (or MPICH's, or Slurm) tells it; -1 outside a job. */
static int local_rank(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long r = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && r >= 0 && r < (1L << 30))
            return (int)r;
    }
    return -1;
}

/* The ordinal DLRT_CUDA_DEVICE names, among count devices; without it,
 * under mpirun, the local rank modulo count (each rank of a machine its
 * own GPU, docs/distributed.md), else 0. */
static DlrtStatus pick_device(int count, int *ordinal, DlrtError *err) {
    const char *s = getenv("DLRT_CUDA_DEVICE");
    int local = local_rank();
    *ordinal = local >= 0 ? local % count : 0;
    if (!s || !*s)
        return DLRT_OK;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v >= count)
        return dlrt_fail(err, DLRT_E_RANGE,
                         "DLRT_CUDA_DEVICE=%s is not a device of this machine, which has %d "
                         "GPU%s (0 to %d)", s, count, count == 1 ? "" : "s", count - 1);
    *ordinal = (int)v;
    return DLRT_OK;
}

/* Compiles and loads the PTX; a failure adds the start of the compiler's
 * log to the message, its lines joined by "; ". */
static DlrtStatus load_module(DlrtCuda *cu, const char *ptx, DlrtError *err) {
    char *log = calloc(1, JIT_LOG_BYTES);
    if (!log)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for the PTX compiler's log");
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(uintptr_t)JIT_LOG_BYTES};
    CUresult r = cu->api.cuModuleLoadDataEx(&cu->module, ptx, 2, options, values);
    if (r == CUDA_SUCCESS) {
        free(log);
        return DLRT_OK;
    }
    cu->module = NULL;
    log[JIT_LOG_BYTES - 1] = 0;
    char line[sizeof err->message];
    size_t n = 0;
    for (const char *p = log; *p && n + 3 < sizeof line; p++) {
        if (*p != '\n' && *p != '\r') {
            line[n++] = *p;
        } else if (n > 0 && line[n - 1] != ' ') {
            line[n++] = ';';
            line[n++] = ' ';
        }
    }
    while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == ';'))
        n--;
    line[n] = 0;
    char what[sizeof cu->name + 64];
    snprintf(what, sizeof what, "the kernels' PTX on %s (sm_%d)", cu->name, cu->capability);
    cuda_fail(cu, DLRT_E_DEVICE, r, "cuModuleLoadDataEx", "for", what, err);
    if (err && n > 0) {
        size_t used = strlen(err->message);
        snprintf(err->message + used, sizeof err->message - used, ": %s", line);
    }
    free(log);
    return DLRT_E_DEVICE;
}

/* Queries an attribute of the device. */
static DlrtStatus attribute(DlrtCuda *cu, int attr, int *value, DlrtError *err) {
    CUresult r = cu->api.cuDeviceGetAttribute(value, attr, cu->dev);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuDeviceGetAttribute",
                                                   "for", "the device", err);
}

static DlrtStatus open_steps(DlrtCuda *cu, const char *ptx, DlrtError *err) {
    const char *path = getenv("DLRT_CUDA_LIBRARY");
    if (!path || !*path)
        path = "libcuda.so.1";
    DlrtStatus st = load_driver(cu, path, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuInit(0);
    if (r == CUDA_ERROR_STUB_LIBRARY)
        return dlrt_fail(err, DLRT_E_DEVICE, "no CUDA driver: %s is the CUDA toolkit's stub "
                         "library, not the NVIDIA driver (a library path puts the stubs "
                         "first?); use --device cpu", path);
    if (r == CUDA_ERROR_NO_DEVICE)
        return dlrt_fail(err, DLRT_E_DEVICE, "no GPU: the NVIDIA driver sees no CUDA device; "
                         "use --device cpu");
    if (r != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuInit", "for", "the CUDA driver", err);
    int count = 0;
    if ((r = cu->api.cuDeviceGetCount(&count)) != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuDeviceGetCount", "for", "the CUDA driver", err);
    if (count < 1)
        return dlrt_fail(err, DLRT_E_DEVICE, "no GPU: the NVIDIA driver sees no CUDA device; "
                         "use --device cpu");
    int ordinal;
    if ((st = pick_device(count, &ordinal, err)) != DLRT_OK)
        return st;
    if ((r = cu->api.cuDeviceGet(&cu->dev, ordinal)) != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuDeviceGet", "for", "the device", err);
    if ((r = cu->api.cuDeviceGetName(cu->name, (int)sizeof cu->name, cu->dev)) != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuDeviceGetName", "for", "the device", err);
    cu->name[sizeof cu->name - 1] = 0;
    int major, minor;
    if ((st = attribute(cu, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major, err)) ||
        (st = attribute(cu, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor, err)) ||
        (st = attribute(cu, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &cu->multiprocessors,
                        err)) ||
        (st = attribute(cu, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                        &cu->max_shared, err)))
        return st;
    cu->capability = major * 10 + minor;
    if ((r = cu->api.cuDevicePrimaryCtxRetain(&cu->ctx, cu->dev)) != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuDevicePrimaryCtxRetain", "for", cu->name, err);
    cu->retained = true;
    if ((st = bind(cu, cu->name, err)) != DLRT_OK)
        return st;
    /* Each thread's stack: dlc's kernels use none (ptxas: 0 bytes stack
       frame), and the driver keeps local memory for the stack of every
       thread the device can hold (1 KiB each by default, hundreds of MB
       on an H100).  The driver grows the limit for a kernel that needs
       more, so the least it allows is safe; DLRT_CUDA_STACK=BYTES sets
       another.  A driver that refuses costs memory, not correctness. */
    const char *stack = getenv("DLRT_CUDA_STACK");
    cu->api.cuCtxSetLimit(CU_LIMIT_STACK_SIZE, stack ? (size_t)strtoull(stack, NULL, 10) : 0);
    if ((r = cu->api.cuStreamCreate(&cu->stream, 0)) != CUDA_SUCCESS) {
        cu->stream = NULL;
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuStreamCreate", "for", cu->name, err);
    }
    if (ptx && (st = load_module(cu, ptx, err)) != DLRT_OK)
        return st;
    const char *sync = getenv("DLRT_CUDA_SYNC");
    cu->sync_each = sync && strcmp(sync, "1") == 0;
    cu->profile = dlrt_profile_open("DLRT_CUDA_PROFILE", 0, NULL);
    /* a graph's launches cannot be waited for one by one */
    const char *graphs = getenv("DLRT_CUDA_GRAPHS");
    cu->graphs = !(graphs && strcmp(graphs, "0") == 0) && !cu->sync_each && !cu->profile;
    return DLRT_OK;
}

DlrtStatus dlrt_cuda_open(DlrtCuda **cu, const char *ptx, DlrtError *err) {
    if (!cu)
        return dlrt_fail(err, DLRT_E_ARG, "dlrt_cuda_open: no object to open");
    *cu = calloc(1, sizeof **cu);
    if (!*cu)
        return dlrt_fail(err, DLRT_E_NOMEM, "out of memory for the CUDA driver's state");
    DlrtStatus st = open_steps(*cu, ptx, err);
    if (st != DLRT_OK) {
        dlrt_cuda_close(*cu);
        *cu = NULL;
    }
    return st;
}

const char *dlrt_cuda_device_name(const DlrtCuda *cu) {
    return cu->name;
}

int dlrt_cuda_compute_capability(const DlrtCuda *cu) {
    return cu->capability;
}

int dlrt_cuda_multiprocessors(const DlrtCuda *cu) {
    return cu->multiprocessors;
}

DlrtStatus dlrt_cuda_function(DlrtCuda *cu, const char *name, DlrtCudaFunction *fn,
                              DlrtError *err) {
    *fn = NULL;
    if (!cu->module)
        return dlrt_fail(err, DLRT_E_ARG, "no kernel '%s': the CUDA object has no module", name);
    DlrtStatus st = bind(cu, name, err);
    if (st != DLRT_OK)
        return st;
    CUfunction f;
    CUresult r = cu->api.cuModuleGetFunction(&f, cu->module, name);
    if (r != CUDA_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "kernel '%s'", name);
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuModuleGetFunction", "for", what, err);
    }
    *fn = f;
    return DLRT_OK;
}

/* cuMemGetInfo, its failure naming what needed it. */
static DlrtStatus mem_info(DlrtCuda *cu, size_t *free_bytes, size_t *total_bytes,
                           const char *what, DlrtError *err) {
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuMemGetInfo(free_bytes, total_bytes);
    if (r != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuMemGetInfo", "for", what, err);
    return DLRT_OK;
}

DlrtStatus dlrt_cuda_mem_info(DlrtCuda *cu, size_t *free_bytes, size_t *total_bytes,
                              DlrtError *err) {
    return mem_info(cu, free_bytes, total_bytes, "the memory's size", err);
}

DlrtStatus dlrt_cuda_alloc(DlrtCuda *cu, size_t bytes, DlrtDevicePtr *p, const char *what,
                           DlrtError *err) {
    *p = 0;
    if (bytes == 0)
        return DLRT_OK;
    size_t free_bytes, total_bytes;
    DlrtStatus st = mem_info(cu, &free_bytes, &total_bytes, what, err);
    if (st != DLRT_OK)
        return st;
    if (bytes > free_bytes)
        return dlrt_fail(err, DLRT_E_NOMEM, "%s need %.1f MiB; the GPU has %.1f MiB free of "
                         "%.1f MiB", or_default(what), mib(bytes), mib(free_bytes),
                         mib(total_bytes));
    CUdeviceptr d;
    CUresult r = cu->api.cuMemAlloc(&d, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        cuda_fail(cu, DLRT_E_NOMEM, r, "cuMemAlloc", "for", what, err);
        if (err) {
            size_t used = strlen(err->message);
            snprintf(err->message + used, sizeof err->message - used,
                     ": %.1f MiB asked, %.1f MiB free of %.1f MiB", mib(bytes), mib(free_bytes),
                     mib(total_bytes));
        }
        return DLRT_E_NOMEM;
    }
    if (r != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuMemAlloc", "for", what, err);
    *p = d;
    return DLRT_OK;
}

void dlrt_cuda_free(DlrtCuda *cu, DlrtDevicePtr p) {
    if (!p)
        return;
    cu->api.cuCtxSetCurrent(cu->ctx);
    cu->api.cuMemFree(p);
}

DlrtStatus dlrt_cuda_host_alloc(DlrtCuda *cu, size_t bytes, void **p, DlrtError *err) {
    *p = NULL;
    if (bytes == 0)
        return DLRT_OK;
    DlrtStatus st = bind(cu, "pinned host memory", err);
    if (st != DLRT_OK)
        return st;
    void *q;
    CUresult r = cu->api.cuMemAllocHost(&q, bytes);
    if (r != CUDA_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "%.1f MiB of pinned host memory", mib(bytes));
        return cuda_fail(cu, DLRT_E_NOMEM, r, "cuMemAllocHost", "for", what, err);
    }
    *p = q;
    return DLRT_OK;
}

void dlrt_cuda_host_free(DlrtCuda *cu, void *p) {
    if (!p)
        return;
    cu->api.cuCtxSetCurrent(cu->ctx);
    cu->api.cuMemFreeHost(p);
}

DlrtStatus dlrt_cuda_upload(DlrtCuda *cu, DlrtDevicePtr dst, const void *src, size_t bytes,
                            const char *what, DlrtError *err) {
    if (bytes == 0)
        return DLRT_OK;
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuMemcpyHtoDAsync(dst, src, bytes, cu->stream);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuMemcpyHtoDAsync",
                                                   "for", what, err);
}

/* Slices of a staged upload: large enough that each transfer runs at the
 * bus's speed, small enough that the first starts early (a ResNet batch of
 * 128 is 77 MB). */
#define STAGE_SLICE ((size_t)4 << 20)

DlrtStatus dlrt_cuda_upload_staged(DlrtCuda *cu, DlrtDevicePtr dst, const void *src, void *staging,
                                   size_t bytes, const char *what, DlrtError *err) {
    for (size_t at = 0; at < bytes; at += STAGE_SLICE) {
        size_t len = bytes - at < STAGE_SLICE ? bytes - at : STAGE_SLICE;
        const char *from = (const char *)src + at;
        char *to = (char *)staging + at;
        /* one thread copies a few GB/s; the slice is split among them */
        int64_t pieces = (int64_t)(len >> 16) + 1;
#pragma omp parallel for schedule(static) if (pieces > 1)
        for (int64_t i = 0; i < pieces; i++) {
            size_t lo = len * (size_t)i / (size_t)pieces, hi = len * (size_t)(i + 1) / (size_t)pieces;
            memcpy(to + lo, from + lo, hi - lo);
        }
        DlrtStatus st = dlrt_cuda_upload(cu, dst + at, to, len, what, err);
        if (st != DLRT_OK)
            return st;
    }
    return DLRT_OK;
}

DlrtStatus dlrt_cuda_download(DlrtCuda *cu, void *dst, DlrtDevicePtr src, size_t bytes,
                              const char *what, DlrtError *err) {
    if (bytes == 0)
        return DLRT_OK;
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuMemcpyDtoHAsync(dst, src, bytes, cu->stream);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuMemcpyDtoHAsync",
                                                   "for", what, err);
}

DlrtStatus dlrt_cuda_zero(DlrtCuda *cu, DlrtDevicePtr dst, size_t bytes, const char *what,
                          DlrtError *err) {
    if (bytes == 0)
        return DLRT_OK;
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuMemsetD8Async(dst, 0, bytes, cu->stream);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuMemsetD8Async",
                                                   "for", what, err);
}

DlrtStatus dlrt_cuda_launch(DlrtCuda *cu, DlrtCudaFunction fn, const unsigned grid[3],
                            const unsigned block[3], unsigned shared_bytes, void **args,
                            const char *what, DlrtError *err) {
    if (!fn)
        return dlrt_fail(err, DLRT_E_ARG, "no kernel to launch in %s", or_default(what));
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r;
    if (shared_bytes > DEFAULT_SHARED_BYTES) {
        if (shared_bytes > (unsigned)cu->max_shared)
            return dlrt_fail(err, DLRT_E_DEVICE, "%s needs %u bytes of shared memory per "
                             "block; %s allows at most %d", or_default(what), shared_bytes,
                             cu->name, cu->max_shared);
        /* the limit is the function's: set each time, it is right whichever
           op launched the function before */
        r = cu->api.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       (int)shared_bytes);
        if (r != CUDA_SUCCESS)
            return cuda_fail(cu, DLRT_E_DEVICE, r, "cuFuncSetAttribute", "in", what, err);
    }
    double began = 0;
    if (cu->profile) {
        if ((r = cu->api.cuStreamSynchronize(cu->stream)) != CUDA_SUCCESS)
            return cuda_fail(cu, DLRT_E_DEVICE, r, "cuStreamSynchronize (DLRT_CUDA_PROFILE=1)",
                             "before", what, err);
        began = dlrt_clock();
    }
    r = cu->api.cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                               shared_bytes, cu->stream, args, NULL);
    if (r != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuLaunchKernel", "in", what, err);
    if ((cu->sync_each || cu->profile) &&
        (r = cu->api.cuStreamSynchronize(cu->stream)) != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuStreamSynchronize (DLRT_CUDA_SYNC=1 or "
                         "DLRT_CUDA_PROFILE=1)", "after", what, err);
    if (cu->profile)
        dlrt_profile_add(cu->profile, dlrt_profile_row(cu->profile, or_default(what)),
                         dlrt_clock() - began);
    return DLRT_OK;
}

DlrtStatus dlrt_cuda_sync(DlrtCuda *cu, const char *what, DlrtError *err) {
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuStreamSynchronize(cu->stream);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuStreamSynchronize",
                                                   "in", what, err);
}

/* ---- a second stream, and events between streams (data-parallel training) -- */

DlrtStatus dlrt_cuda_bind(DlrtCuda *cu, const char *what, DlrtError *err) {
    return bind(cu, what, err);
}

DlrtStatus dlrt_cuda_stream_new(DlrtCuda *cu, DlrtCudaStream *stream, const char *what,
                                DlrtError *err) {
    *stream = NULL;
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUstream s = NULL;
    /* non-blocking: nothing orders it with the legacy default stream, which
       libdlrt never uses but a library sharing the context may */
    CUresult r = cu->api.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuStreamCreate", "for", what, err);
    *stream = s;
    return DLRT_OK;
}

void dlrt_cuda_stream_free(DlrtCuda *cu, DlrtCudaStream stream) {
    if (cu && stream && cu->api.cuCtxSetCurrent(cu->ctx) == CUDA_SUCCESS) {
        cu->api.cuStreamSynchronize(stream);
        cu->api.cuStreamDestroy(stream);
    }
}

DlrtStatus dlrt_cuda_stream_sync(DlrtCuda *cu, DlrtCudaStream stream, const char *what,
                                 DlrtError *err) {
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuStreamSynchronize(stream ? (CUstream)stream : cu->stream);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuStreamSynchronize",
                                                   "in", what, err);
}

DlrtStatus dlrt_cuda_event_new(DlrtCuda *cu, DlrtCudaEvent *event, const char *what,
                               DlrtError *err) {
    *event = NULL;
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUevent e = NULL;
    CUresult r = cu->api.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        return cuda_fail(cu, DLRT_E_DEVICE, r, "cuEventCreate", "for", what, err);
    *event = e;
    return DLRT_OK;
}

void dlrt_cuda_event_free(DlrtCuda *cu, DlrtCudaEvent event) {
    if (cu && event && cu->api.cuCtxSetCurrent(cu->ctx) == CUDA_SUCCESS)
        cu->api.cuEventDestroy(event);
}

DlrtStatus dlrt_cuda_record(DlrtCuda *cu, DlrtCudaStream stream, DlrtCudaEvent event,
                            const char *what, DlrtError *err) {
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuEventRecord(event, stream ? (CUstream)stream : cu->stream);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuEventRecord", "for",
                                                   what, err);
}

DlrtStatus dlrt_cuda_wait_event(DlrtCuda *cu, DlrtCudaStream stream, DlrtCudaEvent event,
                                const char *what, DlrtError *err) {
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuStreamWaitEvent(stream ? (CUstream)stream : cu->stream, event, 0);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuStreamWaitEvent",
                                                   "for", what, err);
}

DlrtStatus dlrt_cuda_event_sync(DlrtCuda *cu, DlrtCudaEvent event, const char *what,
                                DlrtError *err) {
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuEventSynchronize(event);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuEventSynchronize",
                                                   "in", what, err);
}

/* ---- graphs: a sequence of launches recorded once, replayed in one call ---- */

bool dlrt_cuda_graphs(const DlrtCuda *cu) { return cu && cu->graphs; }

DlrtStatus dlrt_cuda_capture_begin(DlrtCuda *cu, const char *what, DlrtError *err) {
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuStreamBeginCapture(cu->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuStreamBeginCapture",
                                                   "for", what, err);
}

DlrtStatus dlrt_cuda_capture_end(DlrtCuda *cu, DlrtCudaGraph *graph, const char *what,
                                 DlrtError *err) {
    if (graph)
        *graph = NULL;
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUgraph g = NULL;
    CUresult r = cu->api.cuStreamEndCapture(cu->stream, &g);
    if (r != CUDA_SUCCESS)
        return graph ? cuda_fail(cu, DLRT_E_DEVICE, r, "cuStreamEndCapture", "for", what, err)
                     : DLRT_OK;
    CUgraphExec exec = NULL;
    if (graph && (r = cu->api.cuGraphInstantiate(&exec, g, 0)) != CUDA_SUCCESS)
        st = cuda_fail(cu, DLRT_E_DEVICE, r, "cuGraphInstantiate", "for", what, err);
    cu->api.cuGraphDestroy(g); /* the instance keeps what it needs */
    if (graph)
        *graph = exec;
    return st;
}

DlrtStatus dlrt_cuda_graph_launch(DlrtCuda *cu, DlrtCudaGraph graph, const char *what,
                                  DlrtError *err) {
    DlrtStatus st = bind(cu, what, err);
    if (st != DLRT_OK)
        return st;
    CUresult r = cu->api.cuGraphLaunch(graph, cu->stream);
    return r == CUDA_SUCCESS ? DLRT_OK : cuda_fail(cu, DLRT_E_DEVICE, r, "cuGraphLaunch", "for",
                                                   what, err);
}

void dlrt_cuda_graph_free(DlrtCuda *cu, DlrtCudaGraph graph) {
    if (cu && graph && cu->api.cuCtxSetCurrent(cu->ctx) == CUDA_SUCCESS)
        cu->api.cuGraphExecDestroy(graph);
}
