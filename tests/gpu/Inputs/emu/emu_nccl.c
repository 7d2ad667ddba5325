/* emu_nccl.c — NCCL for the CPU emulation of the GPU (emu_driver.c): the
 * few calls of NCCL's API that runtime/program/nccl.c makes, over MPI on
 * host memory (the emulated device memory is host memory), so that
 * `mpirun -np K ./net train --device cuda` runs its whole data-parallel
 * path, NCCL's communicator and sums included, where there is no GPU
 * (tests/gpu/emulated_nccl.test).  A program loads it through
 * DLRT_NCCL_LIBRARY in place of libnccl.so.2; MPI is the program's, already
 * started.  The emulated driver runs every call at once, so a sum here
 * happens when it is queued, after the kernels queued before it.
 *
 * It checks what real NCCL would refuse or what would hang it: a
 * communicator whose ranks were given different identities (rank 0's was
 * not sent to all), a rank or size that is not MPI's, a type other than
 * f32.  A pre-multiplied sum scales this rank's part by its scalar, then
 * MPI_Allreduce adds the parts (for 2 ranks, a + b on both: the same bits
 * everywhere). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;

enum { ok = 0, system_error = 2, invalid_argument = 4, invalid_usage = 5, max_ops = 16 };

struct ncclComm {
    MPI_Comm comm;
    float scalar[max_ops]; /* the pre-multiplied sums' scalars, by op - 5 */
    int used[max_ops];
};

int ncclGetVersion(int *version) { *version = 22800; return ok; }

const char *ncclGetErrorString(int r) {
    return r == invalid_argument ? "invalid argument (emulated NCCL)"
         : r == invalid_usage    ? "invalid usage (emulated NCCL)"
                                 : "system error (emulated NCCL)";
}

int ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "emu-nccl %ld %ld", (long)getpid(),
             (long)time(NULL));
    return ok;
}

int ncclCommInitRank(struct ncclComm **out, int nranks, ncclUniqueId id, int rank) {
    int started = 0, size, me;
    MPI_Initialized(&started);
    if (!started)
        return system_error;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (nranks != size || rank != me || strncmp(id.internal, "emu-nccl ", 9) != 0)
        return invalid_argument;
    ncclUniqueId root = id; /* every rank must hold rank 0's */
    MPI_Bcast(root.internal, sizeof root.internal, MPI_BYTE, 0, MPI_COMM_WORLD);
    int same = memcmp(root.internal, id.internal, sizeof id.internal) == 0, all = 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all)
        return invalid_usage;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return system_error;
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    *out = c;
    return ok;
}

int ncclCommDestroy(struct ncclComm *c) {
    if (c) {
        MPI_Comm_free(&c->comm);
        free(c);
    }
    return ok;
}

int ncclRedOpCreatePreMulSum(int *op, void *scalar, int type, int residence, struct ncclComm *c) {
    if (type != 7 || residence != 1) /* f32, on the host */
        return invalid_argument;
    for (int k = 0; k < max_ops; k++)
        if (!c->used[k]) {
            c->used[k] = 1;
            memcpy(&c->scalar[k], scalar, sizeof(float));
            *op = 5 + k;
            return ok;
        }
    return invalid_usage;
}

int ncclRedOpDestroy(int op, struct ncclComm *c) {
    if (op < 5 || op >= 5 + max_ops || !c->used[op - 5])
        return invalid_argument;
    c->used[op - 5] = 0;
    return ok;
}

int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op,
                  struct ncclComm *c, void *stream) {
    (void)stream;
    if (type != 7 || count > (size_t)1 << 30 || (op != 0 && (op < 5 || op >= 5 + max_ops)))
        return invalid_argument;
    float *out = recv;
    if (send != recv)
        memcpy(out, send, count * sizeof *out);
    if (op != 0) {
        if (!c->used[op - 5])
            return invalid_argument;
        for (size_t i = 0; i < count; i++)
            out[i] *= c->scalar[op - 5];
    }
    return MPI_Allreduce(MPI_IN_PLACE, out, (int)count, MPI_FLOAT, MPI_SUM, c->comm) == MPI_SUCCESS
               ? ok
               : system_error;
}
