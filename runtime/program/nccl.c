/* nccl.c — NCCL, loaded at run time, for data-parallel training on GPUs.
 *
 * As runtime/cuda.c does with libcuda, this file links no NCCL and
 * includes no NCCL header (none need be installed where dlc is built):
 * the few types and entry points used are declared here as nccl.h (NCCL
 * 2.28, CUDA 13) declares them, and found with dlopen/dlsym in
 * libnccl.so.2, or the library DLRT_NCCL_LIBRARY names (the tests' CPU
 * emulation, tests/gpu/Inputs/emu/emu_nccl.c).  Where NCCL cannot be
 * loaded, a GPU program still trains in one process, and on the CPU under
 * mpirun; distributed.c says so before training starts.
 *
 * The calls are the stable core of NCCL's API since 2.11 (the pre-multiplied
 * sum, ncclRedOpCreatePreMulSum, arrived then): a library without one of
 * them is refused by name. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

/* nccl.h's types. */
typedef int ncclResult_t;                 /* ncclSuccess or an error */
typedef struct ncclComm *ncclComm_t;
typedef int ncclRedOp_t;                  /* an enum of int size */
typedef int ncclDataType_t;
typedef int ncclScalarResidence_t;
typedef struct {
    char internal[DLRT_NCCL_ID_BYTES];    /* NCCL_UNIQUE_ID_BYTES */
} ncclUniqueId;

/* The values of nccl.h's enums used here. */
enum {
    ncclSuccess = 0,
    ncclSum = 0,
    ncclFloat32 = 7,
    ncclScalarHostImmediate = 1, /* the scalar is read before the call returns */
};

/* Every entry point used: the field, the symbol, the return type and the
 * parameters. */
#define DLRT_NCCL_CALLS(X)                                                              \
    X(ncclGetVersion, ncclResult_t, (int *version))                                     \
    X(ncclGetErrorString, const char *, (ncclResult_t result))                          \
    X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId *id))                                \
    X(ncclCommInitRank, ncclResult_t, (ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)) \
    X(ncclCommDestroy, ncclResult_t, (ncclComm_t comm))                                 \
    X(ncclRedOpCreatePreMulSum, ncclResult_t,                                           \
      (ncclRedOp_t *op, void *scalar, ncclDataType_t type, ncclScalarResidence_t residence, \
       ncclComm_t comm))                                                                \
    X(ncclRedOpDestroy, ncclResult_t, (ncclRedOp_t op, ncclComm_t comm))                \
    X(ncclAllReduce, ncclResult_t,                                                      \
      (const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,  \
       ncclComm_t comm, void *stream))

struct DlrtNccl {
    void *lib;                 /* dlopen's handle */
    char path[256];            /* what was loaded */
    struct {
#define FIELD(name, ret, params) ret(*name) params;
        DLRT_NCCL_CALLS(FIELD)
#undef FIELD
    } api;
    ncclComm_t comm;           /* NULL until dlrt_nccl_init */
};

const char *dlrt_nccl_path(void) {
    const char *p = getenv("DLRT_NCCL_LIBRARY");
    return p && *p ? p : "libnccl.so.2";
}

DlrtNccl *dlrt_nccl_load(char *why, size_t size) {
    DlrtNccl *n = calloc(1, sizeof *n);
    if (!n) {
        snprintf(why, size, "out of memory");
        return NULL;
    }
    snprintf(n->path, sizeof n->path, "%s", dlrt_nccl_path());
    /* RTLD_NODELETE: NCCL's threads and exit handlers outlive dlclose */
    n->lib = dlopen(n->path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!n->lib) {
        const char *e = dlerror();
        snprintf(why, size, "cannot load %s (%s)", n->path, e ? e : "unknown reason");
        free(n);
        return NULL;
    }
    void *sym;
#define LOAD(name, ret, params)                                                          \
    if (!(sym = dlsym(n->lib, #name))) {                                                 \
        snprintf(why, size, "%s has no %s: it is not NCCL, or older than 2.11", n->path,  \
                 #name);                                                                 \
        dlrt_nccl_close(n);                                                              \
        return NULL;                                                                     \
    }                                                                                    \
    memcpy(&n->api.name, &sym, sizeof n->api.name);
    DLRT_NCCL_CALLS(LOAD)
#undef LOAD
    return n;
}

void dlrt_nccl_close(DlrtNccl *n) {
    if (!n)
        return;
    if (n->comm)
        n->api.ncclCommDestroy(n->comm);
    if (n->lib)
        dlclose(n->lib);
    free(n);
}

const char *dlrt_nccl_loaded(const DlrtNccl *n) { return n->path; }

int dlrt_nccl_version(const DlrtNccl *n) {
    int v = 0;
    return n->api.ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

/* A failed call's message: "ncclAllReduce failed for bucket 2: unhandled
 * cuda error". */
static DlrtStatus nccl_fail(const DlrtNccl *n, ncclResult_t r, const char *call,
                            const char *what, DlrtError *err) {
    const char *text = n->api.ncclGetErrorString(r);
    return dlrt_fail(err, DLRT_E_DEVICE, "%s failed for %s: %s (NCCL error %d)", call, what,
                     text ? text : "unknown error", r);
}

DlrtStatus dlrt_nccl_unique_id(DlrtNccl *n, unsigned char id[DLRT_NCCL_ID_BYTES],
                               DlrtError *err) {
    ncclUniqueId u;
    ncclResult_t r = n->api.ncclGetUniqueId(&u);
    if (r != ncclSuccess)
        return nccl_fail(n, r, "ncclGetUniqueId", "the ranks' communicator", err);
    memcpy(id, u.internal, sizeof u.internal);
    return DLRT_OK;
}

DlrtStatus dlrt_nccl_init(DlrtNccl *n, int size, const unsigned char id[DLRT_NCCL_ID_BYTES],
                          int rank, DlrtError *err) {
    ncclUniqueId u;
    memcpy(u.internal, id, sizeof u.internal);
    ncclResult_t r = n->api.ncclCommInitRank(&n->comm, size, u, rank);
    if (r != ncclSuccess) {
        n->comm = NULL;
        return nccl_fail(n, r, "ncclCommInitRank", "the ranks' communicator", err);
    }
    return DLRT_OK;
}

DlrtStatus dlrt_nccl_allreduce(DlrtNccl *n, DlrtDevicePtr data, int64_t count, float scale,
                               DlrtCudaStream stream, const char *what, DlrtError *err) {
    void *p = (void *)(uintptr_t)data;
    ncclResult_t r;
    if (scale == 1.0f) /* a plain sum */
        r = n->api.ncclAllReduce(p, p, (size_t)count, ncclFloat32, ncclSum, n->comm, stream);
    else {
        /* each rank's part times its share of the batch, then the sum; the
           operator may go as soon as the call that uses it is queued */
        ncclRedOp_t op;
        r = n->api.ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate,
                                            n->comm);
        if (r != ncclSuccess)
            return nccl_fail(n, r, "ncclRedOpCreatePreMulSum", what, err);
        r = n->api.ncclAllReduce(p, p, (size_t)count, ncclFloat32, op, n->comm, stream);
        ncclResult_t d = n->api.ncclRedOpDestroy(op, n->comm);
        if (r == ncclSuccess && d != ncclSuccess)
            return nccl_fail(n, d, "ncclRedOpDestroy", what, err);
    }
    return r == ncclSuccess ? DLRT_OK : nccl_fail(n, r, "ncclAllReduce", what, err);
}
