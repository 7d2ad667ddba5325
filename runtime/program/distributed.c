/* distributed.c — data-parallel training across processes: `mpirun -np K
 * ./net train`, on Open MPI.
 *
 * Every rank runs the same program on the same data in the same shuffled
 * order; of every global batch of B = --batch samples, rank r trains on
 * rows [r B / K, (r + 1) B / K) (those of them that an epoch's last,
 * smaller batch has: the last ranks may get fewer, or none, and add
 * zeros), the same rows in every batch, so that a stateful network's
 * streams stay each on its rank.  The generated step (NAME_train_step_dist)
 * scales its loss by the whole batch, writes its gradients into buckets
 * laid out at compile time in the order the backward pass completes them,
 * and hands each complete bucket to this file's reducer, which sums it
 * across the ranks while the backward pass goes on; each bucket's updates
 * wait for its sum.  Every rank ends a step with the same weights.
 *
 * The sum is deterministic: a bucket is cut into K chunks, rank c receives
 * chunk c of every other rank and adds the K of them in rank order
 * (((g0 + g1) + g2) + ...), then sends the sum to every rank (a
 * reduce-scatter and an all-gather, with point-to-point messages: the
 * volume of a ring allreduce, 2 (K - 1) / K of the bucket each way, in
 * 2 (K - 1) messages).  MPI_Allreduce's MPI_SUM may add in any order,
 * which changes the last bits with the message size and the algorithm
 * Open MPI picks; here the same K partial gradients give the same sum.
 *
 * Open MPI moves non-blocking messages on only inside MPI calls (it has no
 * progress thread of its own), so something must call it while the
 * backward pass runs: the generated step calls the reducer's progress
 * between ops (DLRT_DIST_PROGRESS=poll), or, by default, a thread of the
 * reducer's own makes every MPI call of the step and tests its messages
 * while the main thread computes.  docs/distributed.md has the measurement
 * that chose the thread: between ops, a large message's handshakes wait
 * for the peer's next op boundary, and a step ran at half the speed.
 *
 * Nothing waits forever: every wait has a deadline (--timeout), after
 * which the rank names the ranks it is still waiting for and stops the job
 * (MPI_Abort).  A rank that dies is reported by mpirun, which ends the
 * others.  DLRT_DIST_FAULT=kill:R:S or hang:R:S makes rank R die (SIGKILL)
 * or stop answering before its step S, for the tests of those two cases.
 *
 * On GPUs (--device cuda) the step's gradients are in device memory, in
 * the same buckets, and the sums are NCCL's (nccl.c, loaded at run time):
 * rank 0 makes the communicator's identity and sends it to the others over
 * MPI, each rank joins on its GPU at its first step, and each bucket's
 * ncclAllReduce runs on a stream of NCCL's own, after an event recorded on
 * the kernels' stream when the bucket's last gradient kernel is queued;
 * the bucket's updates wait for an event recorded after the sum.  The host
 * only queues: nothing blocks until the step's end.  NCCL adds in an order
 * of its own (not rank order), so the GPU's sums are not deterministic
 * across ranks counts the way the CPU's are; every rank still gets the
 * same sum.
 *
 * A build without MPI (libopenmpi-dev absent when dlc was built) compiles
 * the part of this file that refuses to train under mpirun, saying so.
 * The rest of libdlrt_program calls no MPI function: only this file. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "program.h"

bool dlrt_dist_launched(void) {
    /* Open MPI's mpirun; MPICH's and Slurm's process managers */
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

void dlrt_dist_part(int64_t batch, int64_t n, int rank, int size, int64_t *lo, int64_t *hi) {
    *lo = batch * rank / size;
    *hi = batch * (rank + 1) / size;
    *lo = *lo < n ? *lo : n;
    *hi = *hi < n ? *hi : n;
}

/* DLRT_DIST_FAULT: "kill:R:S" or "hang:R:S" (the tests' rank deaths and
 * hangs); false when unset or not for this rank. */
static bool fault_for(int rank, char *kind, int64_t *step) {
    const char *v = getenv("DLRT_DIST_FAULT");
    int r;
    long long s;
    char k[8];
    if (!v || sscanf(v, "%7[a-z]:%d:%lld", k, &r, &s) != 3 || r != rank)
        return false;
    *kind = k[0];
    *step = s;
    return true;
}

void dlrt_dist_fault(const DlrtDist *d, int64_t step) {
    char kind;
    int64_t at;
    if (!d->on || !fault_for(d->rank, &kind, &at) || step != at)
        return;
    fprintf(stderr, "rank %d: DLRT_DIST_FAULT: %s before step %lld\n", d->rank,
            kind == 'k' ? "killed" : "hanging", (long long)step);
    if (kind == 'k')
        raise(SIGKILL);
    for (;;) /* a peer that stops answering */
        pause();
}

#ifndef DLRT_HAVE_MPI

bool dlrt_dist_built(void) { return false; }

int dlrt_dist_open(DlrtDist *d, const DlrtModel *m, const Options *o) {
    (void)o;
    *d = (DlrtDist){.rank = 0, .size = 1};
    fprintf(stderr, "%s: this program was built without MPI (dlc was built where "
            "libopenmpi-dev was not installed), so it cannot train under mpirun; install "
            "libopenmpi-dev, rebuild dlc and this program, or train in one process\n", m->name);
    return 2;
}

void dlrt_dist_close(DlrtDist *d, int status) { (void)d, (void)status; }
const DlrtReducer *dlrt_dist_reducer(DlrtDist *d) { (void)d; return NULL; }
void dlrt_dist_sum(DlrtDist *d, double *v, int n, const char *what) {
    (void)d, (void)v, (void)n, (void)what;
}
bool dlrt_dist_same_weights(DlrtDist *d, const DlrtModel *m, void *net) {
    (void)d, (void)m, (void)net;
    return true;
}
void dlrt_dist_step(DlrtDist *d, int64_t step) { (void)d, (void)step; }
const DlrtCudaReducer *dlrt_dist_cuda_reducer(DlrtDist *d) { (void)d; return NULL; }

#else /* DLRT_HAVE_MPI */

#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

/* A bucket's sum in flight. */
typedef struct Flight {
    float *data;            /* the bucket in the gradient buffer */
    int64_t count;
    int phase;              /* 0 not started, 1 chunks sent to their owners,
                               2 sums sent to everyone, 3 done */
    bool summed;            /* the sum is there: phase 3, as the main thread sees
                               it (under the lock, with a communication thread) */
    bool held;              /* DLRT_DIST_OVERLAP=0: ready, not started until the
                               first wait */
    MPI_Request *req;       /* this phase's messages: receives (one per peer),
                               then sends */
    int nreq;
    int *peer;              /* each receive's sender */
    float *scratch;         /* phase 1: the other ranks' chunk of ours,
                               a slot of `chunk` floats per rank */
    int64_t chunk;          /* the largest chunk */
} Flight;

/* MPI's state and the reducer's. */
typedef struct DistImpl {
    const DlrtModel *m;
    int rank, size;
    double timeout;         /* seconds a wait may take */
    int64_t step;           /* the step being summed, for messages */
    Flight *flights;        /* a bucket each */
    int nflights;
    DlrtReducer reducer;
    bool threaded;          /* DLRT_DIST_PROGRESS=thread: comm makes the MPI calls */
    pthread_t comm;
    pthread_mutex_t lock;   /* guards the flights' phases, pending, stop */
    pthread_cond_t wake;    /* comm: a bucket is ready, or stop */
    pthread_cond_t done;    /* the main thread: a bucket's sum is there */
    int *pending;           /* buckets ready and not yet posted by comm */
    int npending;
    bool stop;
    bool overlap;           /* start each bucket when it is ready (else at the
                               first wait: DLRT_DIST_OVERLAP=0, to measure what
                               the overlap saves) */
    double waited;          /* seconds the steps spent in wait: communication
                               the backward pass did not hide */
    int64_t steps;          /* steps summed */
    /* --device cuda: NCCL's sums on the GPU */
    bool gpu;               /* the GPU's step and reducer, not the above */
    DlrtNccl *nccl;         /* loaded in open (more than one rank) */
    unsigned char id[DLRT_NCCL_ID_BYTES]; /* the communicator's, from rank 0 */
    DlrtCuda *cu;           /* the network's GPU, from the first ready; NULL
                               until NCCL's communicator is joined */
    DlrtCudaStream stream;  /* NCCL's own */
    DlrtCudaEvent *computed;/* a bucket's gradients are there (kernels' stream) */
    DlrtCudaEvent *summed_ev; /* its sum is there (NCCL's stream) */
    DlrtCudaReducer cuda_reducer;
} DistImpl;

bool dlrt_dist_built(void) { return true; }

/* Stops the whole job after msg (which names the ranks concerned). */
static _Noreturn void stop_job(const DistImpl *s, const char *msg) {
    fprintf(stderr, "%s: rank %d of %d: %s; stopping the job\n", s->m->name, s->rank, s->size,
            msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* MPI_Abort does not return */
}

/* Waits for n requests until the deadline, then stops the job naming the
 * ranks (peer[i]: the rank of request i, -1 not a receive) still silent. */
static void wait_all(DistImpl *s, MPI_Request *req, const int *peer, int n, const char *what) {
    double deadline = dlrt_clock() + s->timeout;
    for (;;) {
        int flag = 0;
        MPI_Testall(n, req, &flag, MPI_STATUSES_IGNORE);
        if (flag)
            return;
        if (dlrt_clock() > deadline)
            break;
        sched_yield();
    }
    char msg[512];
    int len = snprintf(msg, sizeof msg, "%s: no answer for %g s from rank", what, s->timeout);
    for (int i = 0; i < n && len < (int)sizeof msg - 16; i++)
        if (peer && peer[i] >= 0 && req[i] != MPI_REQUEST_NULL)
            len += snprintf(msg + len, sizeof msg - (size_t)len, " %d", peer[i]);
    stop_job(s, msg);
}

/* ---- the reducer ------------------------------------------------------------ */

static void chunk_of(const Flight *f, int c, int size, int64_t *lo, int64_t *len) {
    int64_t a = f->count * c / size, b = f->count * (c + 1) / size;
    *lo = a;
    *len = b - a;
}

/* Phase 1: chunk c of the bucket to rank c, chunk `rank` of every other
 * rank into scratch.  Tags: the bucket's and the phase's. */
static void post_scatter(DistImpl *s, int b) {
    Flight *f = &s->flights[b];
    int64_t lo, len, mine_lo, mine;
    chunk_of(f, s->rank, s->size, &mine_lo, &mine);
    f->nreq = 0;
    for (int q = 0; q < s->size; q++) {
        if (q == s->rank)
            continue;
        f->peer[f->nreq] = q;
        MPI_Irecv(f->scratch + (int64_t)q * f->chunk, (int)mine, MPI_FLOAT, q, 2 * b,
                  MPI_COMM_WORLD, &f->req[f->nreq++]);
    }
    for (int q = 0; q < s->size; q++) {
        if (q == s->rank)
            continue;
        chunk_of(f, q, s->size, &lo, &len);
        f->peer[f->nreq] = -1;
        MPI_Isend(f->data + lo, (int)len, MPI_FLOAT, q, 2 * b, MPI_COMM_WORLD,
                  &f->req[f->nreq++]);
    }
    f->phase = 1;
}

/* Phase 2: this rank's chunk summed in rank order, then sent to every
 * rank, and every other rank's sum received in place. */
static void post_gather(DistImpl *s, int b) {
    Flight *f = &s->flights[b];
    int64_t lo, len, mine_lo, mine;
    chunk_of(f, s->rank, s->size, &mine_lo, &mine);
    float *own = f->data + mine_lo;
    for (int64_t i = 0; i < mine; i++) {
        float sum = s->rank == 0 ? own[i] : f->scratch[i];
        for (int q = 1; q < s->size; q++)
            sum += q == s->rank ? own[i] : f->scratch[(int64_t)q * f->chunk + i];
        own[i] = sum;
    }
    f->nreq = 0;
    for (int q = 0; q < s->size; q++) {
        if (q == s->rank)
            continue;
        chunk_of(f, q, s->size, &lo, &len);
        f->peer[f->nreq] = q;
        MPI_Irecv(f->data + lo, (int)len, MPI_FLOAT, q, 2 * b + 1, MPI_COMM_WORLD,
                  &f->req[f->nreq++]);
    }
    for (int q = 0; q < s->size; q++) {
        if (q == s->rank)
            continue;
        f->peer[f->nreq] = -1;
        MPI_Isend(own, (int)mine, MPI_FLOAT, q, 2 * b + 1, MPI_COMM_WORLD, &f->req[f->nreq++]);
    }
    f->phase = 2;
}

/* Moves bucket b on if its messages have arrived; true when it changed. */
static bool advance(DistImpl *s, int b) {
    Flight *f = &s->flights[b];
    if (f->phase != 1 && f->phase != 2)
        return false;
    int flag = 0;
    MPI_Testall(f->nreq, f->req, &flag, MPI_STATUSES_IGNORE);
    if (!flag)
        return false;
    if (f->phase == 1)
        post_gather(s, b);
    else
        f->phase = 3;
    return true;
}

static void poll_ready(void *ctx, int b, float *data, int64_t count) {
    DistImpl *s = ctx;
    s->flights[b].data = data;
    s->flights[b].count = count;
    s->flights[b].held = !s->overlap;
    if (s->overlap)
        post_scatter(s, b);
}

/* DLRT_DIST_OVERLAP=0: the buckets held back, started at the first wait. */
static void release_held(DistImpl *s, void (*start)(DistImpl *s, int b)) {
    for (int b = 0; b < s->nflights; b++)
        if (s->flights[b].held) {
            s->flights[b].held = false;
            start(s, b);
        }
}

static void poll_progress(void *ctx) {
    DistImpl *s = ctx;
    for (int b = 0; b < s->nflights; b++)
        advance(s, b);
}

/* The ranks bucket b still waits for, into msg. */
static void silent_ranks(const DistImpl *s, int b, char *msg, size_t size) {
    const Flight *f = &s->flights[b];
    int len = snprintf(msg, size, "the gradients of bucket %d of step %lld: no answer for %g s "
                       "from rank", b, (long long)s->step, s->timeout);
    for (int i = 0; i < f->nreq && len < (int)size - 16; i++)
        if (f->peer[i] >= 0 && f->req[i] != MPI_REQUEST_NULL)
            len += snprintf(msg + len, size - (size_t)len, " %d", f->peer[i]);
    if (f->phase == 0)
        snprintf(msg + len, size - (size_t)len, "s (the bucket was never started)");
}

static DlrtStatus poll_wait(void *ctx, int b, DlrtError *err) {
    DistImpl *s = ctx;
    release_held(s, post_scatter);
    double start = dlrt_clock(), deadline = start + s->timeout;
    while (s->flights[b].phase != 3) {
        if (!advance(s, b)) {
            for (int k = 0; k < s->nflights; k++) /* the others too, meanwhile */
                advance(s, k);
            if (dlrt_clock() > deadline) {
                char msg[400];
                silent_ranks(s, b, msg, sizeof msg);
                stop_job(s, msg);
            }
            sched_yield();
        }
    }
    s->waited += dlrt_clock() - start;
    (void)err;
    return DLRT_OK;
}

/* The communication thread: posts the buckets the step hands over and
 * tests the messages in flight until each sum is there. */
static void *comm_main(void *arg) {
    DistImpl *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        bool busy = false;
        for (int b = 0; b < s->nflights; b++)
            busy |= s->flights[b].phase == 1 || s->flights[b].phase == 2;
        while (!s->stop && !s->npending && !busy)
            pthread_cond_wait(&s->wake, &s->lock);
        if (s->stop)
            break;
        int todo[64], ntodo = 0;
        for (int k = 0; k < s->npending && ntodo < 64; k++)
            todo[ntodo++] = s->pending[k];
        memmove(s->pending, s->pending + ntodo, sizeof *s->pending * (size_t)(s->npending - ntodo));
        s->npending -= ntodo;
        pthread_mutex_unlock(&s->lock);
        for (int k = 0; k < ntodo; k++)
            post_scatter(s, todo[k]);
        bool any = false; /* a bucket's sum arrived */
        for (int b = 0; b < s->nflights; b++)
            if (advance(s, b) && s->flights[b].phase == 3)
                any = true;
        if (!any)
            sched_yield();
        pthread_mutex_lock(&s->lock);
        for (int b = 0; any && b < s->nflights; b++)
            if (s->flights[b].phase == 3)
                s->flights[b].summed = true;
        if (any)
            pthread_cond_broadcast(&s->done);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Hands bucket b to the communication thread; the lock held. */
static void enqueue(DistImpl *s, int b) {
    s->pending[s->npending++] = b;
    pthread_cond_signal(&s->wake);
}

static void thread_ready(void *ctx, int b, float *data, int64_t count) {
    DistImpl *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->flights[b].data = data;
    s->flights[b].count = count;
    s->flights[b].held = !s->overlap;
    if (s->overlap)
        enqueue(s, b);
    pthread_mutex_unlock(&s->lock);
}

static void thread_progress(void *ctx) { (void)ctx; }

static DlrtStatus thread_wait(void *ctx, int b, DlrtError *err) {
    DistImpl *s = ctx;
    double start = dlrt_clock();
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)s->timeout;
    pthread_mutex_lock(&s->lock);
    release_held(s, enqueue);
    while (!s->flights[b].summed) {
        if (pthread_cond_timedwait(&s->done, &s->lock, &until) == ETIMEDOUT &&
            !s->flights[b].summed) {
            char msg[400];
            silent_ranks(s, b, msg, sizeof msg);
            pthread_mutex_unlock(&s->lock);
            stop_job(s, msg);
        }
    }
    pthread_mutex_unlock(&s->lock);
    s->waited += dlrt_clock() - start;
    (void)err;
    return DLRT_OK;
}

/* ---- the GPU's reducer: NCCL ------------------------------------------------- */

/* The first bucket of the run: NCCL's communicator on the network's GPU
 * (every rank gets here at its first step, the last ranks of a short batch
 * included, which hand over zeros), its stream and the events. */
static DlrtStatus gpu_join(DistImpl *s, DlrtCuda *cu, DlrtError *err) {
    DlrtStatus st = dlrt_cuda_bind(cu, "NCCL's communicator", err);
    if (!st)
        st = dlrt_nccl_init(s->nccl, s->size, s->id, s->rank, err);
    s->cu = cu; /* from here close releases what is taken */
    if (!st)
        st = dlrt_cuda_stream_new(cu, &s->stream, "NCCL's stream", err);
    int n = s->m->nbuckets;
    s->computed = calloc((size_t)n + 1, sizeof *s->computed);
    s->summed_ev = calloc((size_t)n + 1, sizeof *s->summed_ev);
    if (!st && (!s->computed || !s->summed_ev))
        st = dlrt_fail(err, DLRT_E_NOMEM, "out of memory");
    for (int b = 0; !st && b < n; b++)
        if (!(st = dlrt_cuda_event_new(cu, &s->computed[b], "a bucket's gradients", err)))
            st = dlrt_cuda_event_new(cu, &s->summed_ev[b], "a bucket's sum", err);
    if (!st && s->rank == 0) { /* what the run uses, once it is there */
        int v = dlrt_nccl_version(s->nccl);
        fprintf(stderr, "%s: %d ranks, one GPU each (rank 0: %s): the gradients summed by NCCL "
                "%d.%d.%d (%s) on a stream of its own\n", s->m->name, s->size,
                dlrt_cuda_device_name(cu), v / 10000, v / 100 % 100, v % 100,
                dlrt_nccl_loaded(s->nccl));
    }
    return st;
}

static DlrtStatus gpu_ready(void *ctx, DlrtCuda *cu, int b, DlrtDevicePtr data, int64_t count,
                            float scale, DlrtError *err) {
    DistImpl *s = ctx;
    DlrtStatus st = DLRT_OK;
    if (!s->cu && (st = gpu_join(s, cu, err)) != DLRT_OK)
        return st;
    if (cu != s->cu)
        return dlrt_fail(err, DLRT_E_ARG, "internal error: the distributed step changed GPUs");
    char what[64];
    snprintf(what, sizeof what, "the gradients of bucket %d", b);
    if (!(st = dlrt_cuda_record(cu, NULL, s->computed[b], what, err)) &&
        !(st = dlrt_cuda_wait_event(cu, s->stream, s->computed[b], what, err)) &&
        !(st = dlrt_nccl_allreduce(s->nccl, data, count, scale, s->stream, what, err)))
        st = dlrt_cuda_record(cu, s->stream, s->summed_ev[b], what, err);
    return st;
}

static DlrtStatus gpu_wait(void *ctx, DlrtCuda *cu, int b, DlrtError *err) {
    DistImpl *s = ctx;
    if (!s->cu)
        return dlrt_fail(err, DLRT_E_ARG, "internal error: a bucket's sum waited for before "
                         "any was started");
    return dlrt_cuda_wait_event(cu, NULL, s->summed_ev[b], "the gradients' sum", err);
}

/* Everything NCCL's: before the network (and its GPU context) goes. */
static void gpu_release(DistImpl *s) {
    if (s->cu) {
        DlrtError err;
        dlrt_cuda_stream_sync(s->cu, s->stream, "NCCL's stream", &err);
        dlrt_cuda_bind(s->cu, "NCCL's communicator", &err);
    }
    dlrt_nccl_close(s->nccl);
    s->nccl = NULL;
    for (int b = 0; s->cu && b < s->m->nbuckets; b++) {
        dlrt_cuda_event_free(s->cu, s->computed ? s->computed[b] : NULL);
        dlrt_cuda_event_free(s->cu, s->summed_ev ? s->summed_ev[b] : NULL);
    }
    dlrt_cuda_stream_free(s->cu, s->stream);
    free(s->computed);
    free(s->summed_ev);
    s->computed = s->summed_ev = NULL;
    s->stream = NULL;
    s->cu = NULL;
}

/* --device cuda, more than one rank: rank 0's identity of the
 * communicator sent to every rank (NCCL's loading was checked by agree());
 * a failure stops the job. */
static void gpu_open(DistImpl *s) {
    DlrtError err;
    if (s->rank == 0 && dlrt_nccl_unique_id(s->nccl, s->id, &err) != DLRT_OK)
        stop_job(s, err.message);
    MPI_Request req;
    MPI_Ibcast(s->id, DLRT_NCCL_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
    wait_all(s, &req, NULL, 1, "NCCL's communicator");
    s->cuda_reducer = (DlrtCudaReducer){.ctx = s, .ready = gpu_ready, .wait = gpu_wait};
}

/* ---- starting and stopping ------------------------------------------------- */

/* What every rank must agree on before training: the network, and the
 * options that decide the steps. */
enum { AGREE_HASH, AGREE_BATCH, AGREE_SEED, AGREE_EPOCHS, AGREE_LIMIT, AGREE_LR, AGREE_CLIP,
       AGREE_DEVICE, AGREE_NCCL, AGREE_COUNT };

static uint64_t bits_of(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Every rank's values, compared with rank 0's; false after rank 0's
 * message naming the first rank that differs. */
static bool agree(DistImpl *s, const Options *o) {
    uint64_t mine[AGREE_COUNT] = {
        [AGREE_HASH] = s->m->hash, [AGREE_BATCH] = (uint64_t)o->batch, [AGREE_SEED] = o->seed,
        [AGREE_EPOCHS] = (uint64_t)o->epochs, [AGREE_LIMIT] = (uint64_t)o->limit,
        [AGREE_LR] = bits_of(o->lr), [AGREE_CLIP] = bits_of(o->clip), [AGREE_DEVICE] = s->gpu,
        [AGREE_NCCL] = s->nccl != NULL};
    uint64_t *all = malloc(sizeof *all * AGREE_COUNT * (size_t)s->size);
    if (!all)
        stop_job(s, "out of memory");
    MPI_Request req;
    MPI_Iallgather(mine, AGREE_COUNT, MPI_UINT64_T, all, AGREE_COUNT, MPI_UINT64_T,
                   MPI_COMM_WORLD, &req);
    wait_all(s, &req, NULL, 1, "checking the network and the options");
    static const char *const what[AGREE_COUNT] = {"", "--batch", "--seed", "--epochs",
                                                  "--limit", "--lr", "--clip", "--device"};
    bool ok = true;
    for (int r = 1; r < s->size && ok; r++)
        for (int k = 0; k < AGREE_COUNT && ok; k++) {
            if (all[r * AGREE_COUNT + k] == all[k])
                continue;
            ok = false;
            if (s->rank != 0)
                break;
            if (k == AGREE_HASH)
                fprintf(stderr, "%s: rank %d runs another network than rank 0 (network hash "
                        "%016llx, not %016llx): every rank must run a program compiled from "
                        "the same network\n", s->m->name, r,
                        (unsigned long long)all[r * AGREE_COUNT], (unsigned long long)all[0]);
            else if (k == AGREE_NCCL)
                fprintf(stderr, "%s: rank %d %s NCCL (%s) where rank 0 %s: every rank's "
                        "machine needs it to train on GPUs\n", s->m->name, r,
                        all[r * AGREE_COUNT + k] ? "can load" : "cannot load", dlrt_nccl_path(),
                        all[k] ? "can" : "cannot");
            else
                fprintf(stderr, "%s: rank %d was given another %s than rank 0: every rank must "
                        "train with the same options\n", s->m->name, r, what[k]);
        }
    free(all);
    return ok;
}

int dlrt_dist_open(DlrtDist *d, const DlrtModel *m, const Options *o) {
    *d = (DlrtDist){.rank = 0, .size = 1, .on = true};
    /* a thread of its own by default: docs/distributed.md has the measurement */
    const char *mode = getenv("DLRT_DIST_PROGRESS");
    bool threaded = !mode || strcmp(mode, "thread") == 0;
    if (mode && strcmp(mode, "thread") != 0 && strcmp(mode, "poll") != 0) {
        fprintf(stderr, "%s: DLRT_DIST_PROGRESS must be poll or thread, not '%s'\n", m->name,
                mode);
        return 2;
    }
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, threaded ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED,
                        &provided) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init_thread failed\n", m->name);
        return 1;
    }
    DistImpl *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "%s: out of memory\n", m->name);
        return 1;
    }
    d->impl = s;
    MPI_Comm_rank(MPI_COMM_WORLD, &s->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s->size);
    d->rank = s->rank;
    d->size = s->size;
    s->m = m;
    s->timeout = o->timeout;
    s->overlap = !getenv("DLRT_DIST_OVERLAP") || strcmp(getenv("DLRT_DIST_OVERLAP"), "0") != 0;
    s->threaded = threaded && provided >= MPI_THREAD_SERIALIZED;
    if (threaded && !s->threaded && s->rank == 0)
        fprintf(stderr, "%s: warning: this MPI cannot give a thread of its own the MPI calls "
                "(MPI_THREAD_SERIALIZED): polling between ops instead\n", m->name);
    /* the GPU's sums are NCCL's: every rank tries to load it, and agree()
       compares */
    s->gpu = strcmp(dlrt_device_name(m), "cuda") == 0;
    char nccl_why[512] = "";
    if (s->gpu && s->size > 1)
        s->nccl = dlrt_nccl_load(nccl_why, sizeof nccl_why);
    if (!agree(s, o))
        return 2;
    /* the same for every rank now, so each says the same; rank 0 prints */
    const char *why = NULL;
    char buf[768];
    if (!(s->gpu ? m->train_step_dist_cuda != NULL : m->train_step_dist != NULL))
        why = "this network has no distributed step (stateful recurrent layers read their text "
              "as streams, which are not split among ranks): train it in one process";
    else if (s->gpu && s->size > 1 && !s->nccl) {
        snprintf(buf, sizeof buf, "no NCCL: %s; training on GPUs under mpirun sums the "
                 "gradients with NCCL (libnccl.so.2, NVIDIA's libnccl2 package, loaded at run "
                 "time): install it or put it on LD_LIBRARY_PATH, or train on the CPUs "
                 "(--device cpu)", nccl_why);
        why = buf;
    } else if (o->batch % s->size != 0) {
        int64_t below = o->batch / s->size * s->size, above = below + s->size;
        snprintf(buf, sizeof buf, "the global batch of %lld samples (--batch) does not divide "
                 "among %d ranks: give a multiple of %d (%lld or %lld)", (long long)o->batch,
                 s->size, s->size, (long long)(below ? below : above), (long long)above);
        why = buf;
    } else if (!s->gpu && m->nbuckets > 0 && m->grad_floats / s->size >= (int64_t)1 << 30)
        why = "a bucket's chunk would not fit an MPI count: compile with a smaller --bucket-size";
    if (why) {
        if (s->rank == 0)
            fprintf(stderr, "%s: %s\n", m->name, why);
        return 2;
    }
    if (s->gpu) { /* NCCL's reducer; none of the CPU's flights or thread */
        s->threaded = false;
        if (s->size > 1)
            gpu_open(s);
        return 0;
    }
    s->nflights = m->nbuckets;
    s->flights = calloc((size_t)m->nbuckets + 1, sizeof *s->flights);
    s->pending = calloc((size_t)m->nbuckets + 1, sizeof *s->pending);
    bool ok = s->flights && s->pending;
    for (int b = 0; ok && b < m->nbuckets; b++) {
        Flight *f = &s->flights[b];
        f->chunk = (m->buckets[b].count + s->size - 1) / s->size;
        f->req = calloc(2 * (size_t)s->size, sizeof *f->req);
        f->peer = calloc(2 * (size_t)s->size, sizeof *f->peer);
        f->scratch = malloc(sizeof *f->scratch * (size_t)(f->chunk * s->size + 1));
        ok = f->req && f->peer && f->scratch;
    }
    if (!ok) {
        fprintf(stderr, "%s: out of memory for the gradients' messages\n", m->name);
        return 1;
    }
    s->reducer = s->threaded
                     ? (DlrtReducer){.ctx = s, .ready = thread_ready,
                                     .progress = thread_progress, .wait = thread_wait}
                     : (DlrtReducer){.ctx = s, .ready = poll_ready, .progress = poll_progress,
                                     .wait = poll_wait};
    if (s->threaded) {
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->wake, NULL);
        pthread_cond_init(&s->done, NULL);
        if (pthread_create(&s->comm, NULL, comm_main, s) != 0) {
            fprintf(stderr, "%s: cannot start the communication thread\n", m->name);
            s->threaded = false;
            return 1;
        }
    }
    return 0;
}

/* DLRT_DIST_STATS=1: how much of the gradients' sums the backward pass
 * hid.  The sums of a step's buckets alone, without a backward pass to
 * hide behind (the median of `iters` steps), against the time the
 * training steps waited for them. */
static void print_stats(DistImpl *s) {
    enum { ITERS = 31 };
    float *buf = calloc((size_t)s->m->grad_floats + 1, sizeof *buf);
    double alone[ITERS];
    for (int it = 0; buf && it < ITERS; it++) {
        dlrt_dist_step(&(DlrtDist){.impl = s}, s->step + 1);
        s->steps--; /* not a training step */
        MPI_Barrier(MPI_COMM_WORLD);
        double waited = s->waited, t0 = dlrt_clock();
        for (int b = 0; b < s->nflights; b++)
            s->reducer.ready(s, b, buf + s->m->buckets[b].offset, s->m->buckets[b].count);
        for (int b = 0; b < s->nflights; b++)
            s->reducer.wait(s, b, NULL);
        alone[it] = dlrt_clock() - t0;
        s->waited = waited;
    }
    for (int i = 1; buf && i < ITERS; i++) /* sorted, for the median */
        for (int j = i; j > 0 && alone[j] < alone[j - 1]; j--) {
            double x = alone[j];
            alone[j] = alone[j - 1];
            alone[j - 1] = x;
        }
    double exposed = s->steps ? s->waited / (double)s->steps : 0;
    if (buf)
        fprintf(stderr, "%s: rank %d of %d: DLRT_DIST_STATS: %s; %lld steps; the sums alone "
                "%.3f ms per step (median of %d); waited for in training %.3f ms per step: "
                "%.0f%% hidden behind the backward pass\n", s->m->name, s->rank, s->size,
                s->threaded ? "thread" : "poll", (long long)s->steps, alone[ITERS / 2] * 1e3,
                ITERS, exposed * 1e3,
                alone[ITERS / 2] > 0 ? 100 * (1 - exposed / alone[ITERS / 2]) : 0.0);
    free(buf);
}

void dlrt_dist_close(DlrtDist *d, int status) {
    DistImpl *s = d->impl;
    int started = 0;
    if (!d->on || MPI_Initialized(&started) != MPI_SUCCESS || !started)
        return;
    /* NCCL's and the GPU's share, while the network's context is there
       (train closes this before it frees the network); not when the job
       stops anyway, where destroying a communicator could wait for peers */
    if (s && !(status == 1 && d->size > 1))
        gpu_release(s);
    if (s && !s->gpu && status == 0 && s->size > 1 && getenv("DLRT_DIST_STATS") &&
        strcmp(getenv("DLRT_DIST_STATS"), "1") == 0)
        print_stats(s);
    if (s && s->threaded) {
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->comm, NULL);
    }
    /* a rank that fails alone would leave the others waiting on it */
    if (status == 1 && d->size > 1)
        MPI_Abort(MPI_COMM_WORLD, status);
    for (int b = 0; s && b < s->nflights; b++) {
        free(s->flights[b].req);
        free(s->flights[b].peer);
        free(s->flights[b].scratch);
    }
    if (s) {
        free(s->flights);
        free(s->pending);
        free(s);
    }
    d->impl = NULL;
    MPI_Finalize();
}

const DlrtReducer *dlrt_dist_reducer(DlrtDist *d) {
    DistImpl *s = d->impl;
    return s && !s->gpu && s->size > 1 ? &s->reducer : NULL;
}

const DlrtCudaReducer *dlrt_dist_cuda_reducer(DlrtDist *d) {
    DistImpl *s = d->impl;
    return s && s->gpu && s->size > 1 ? &s->cuda_reducer : NULL;
}

void dlrt_dist_step(DlrtDist *d, int64_t step) {
    DistImpl *s = d->impl;
    if (!s)
        return;
    if (s->threaded) /* the thread reads the phases */
        pthread_mutex_lock(&s->lock);
    s->step = step;
    s->steps++;
    for (int b = 0; b < s->nflights; b++) { /* the buckets of the step to come */
        s->flights[b].phase = 0;
        s->flights[b].summed = false;
        s->flights[b].held = false;
    }
    if (s->threaded)
        pthread_mutex_unlock(&s->lock);
}

void dlrt_dist_sum(DlrtDist *d, double *v, int n, const char *what) {
    DistImpl *s = d->impl;
    if (!s || s->size == 1)
        return;
    double *all = malloc(sizeof *all * (size_t)(n * s->size));
    if (!all)
        stop_job(s, "out of memory");
    MPI_Request req;
    MPI_Iallgather(v, n, MPI_DOUBLE, all, n, MPI_DOUBLE, MPI_COMM_WORLD, &req);
    wait_all(s, &req, NULL, 1, what);
    for (int k = 0; k < n; k++) { /* in rank order: the same sum on every rank */
        double sum = all[k];
        for (int r = 1; r < s->size; r++)
            sum += all[r * n + k];
        v[k] = sum;
    }
    free(all);
}

bool dlrt_dist_same_weights(DlrtDist *d, const DlrtModel *m, void *net) {
    DistImpl *s = d->impl;
    if (!s || s->size == 1)
        return true;
    uint64_t h = 14695981039346656037ull; /* FNV-1a of every tensor's bytes */
    for (int i = 0; i < m->ntensors; i++) {
        DlrtTensor t = m->tensor(net, i);
        int64_t count = 1;
        for (int k = 0; k < t.rank; k++)
            count *= t.dims[k];
        const unsigned char *p = t.data;
        size_t bytes = (size_t)count * (t.dtype == DLRT_F64 || t.dtype == DLRT_I64 ? 8
                                         : t.dtype == DLRT_U8 || t.dtype == DLRT_I8 ? 1
                                                                                   : 4);
        for (size_t k = 0; k < bytes; k++)
            h = (h ^ p[k]) * 1099511628211ull;
    }
    uint64_t *all = malloc(sizeof *all * (size_t)s->size);
    if (!all)
        stop_job(s, "out of memory");
    MPI_Request req;
    MPI_Iallgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD, &req);
    wait_all(s, &req, NULL, 1, "comparing the weights");
    int differs = -1;
    for (int r = 1; r < s->size && differs < 0; r++)
        if (all[r] != all[0])
            differs = r;
    free(all);
    if (differs >= 0 && s->rank == 0)
        fprintf(stderr, "%s: rank %d's weights differ from rank 0's (checksums of every "
                "tensor): the ranks are out of step\n", m->name, differs);
    return differs < 0;
}

#endif /* DLRT_HAVE_MPI */
