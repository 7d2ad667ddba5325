/* plan_buckets.h — the gradient buckets of data-parallel training: an
 * analysis, not a pass.
 *
 * Data-parallel training sums every gradient across the ranks before the
 * update.  The compiler knows each gradient's size and the op of the
 * backward pass after which it is complete, so it lays the gradients out
 * at compile time, contiguously, in the order they become ready, and cuts
 * that layout into buckets: the generated step writes each gradient where
 * its bucket holds it (no fusion buffer to copy into, as Horovod and
 * PyTorch DDP must) and starts a bucket's allreduce as soon as its last
 * gradient is computed, while the rest of the backward pass runs.  The CPU
 * target (codegen/cpu/cpu.c) reads the plan; it changes no IR. */
#ifndef DLC_PLAN_BUCKETS_H
#define DLC_PLAN_BUCKETS_H

#include "../ir/ir.h"

/* One trained parameter's gradient in the layout. */
typedef struct DlcBucketGrad {
    const DlcValue *param;  /* the parameter */
    const DlcValue *grad;   /* the value that holds its gradient, or NULL for a
                               dense_sgd_update / dense_adam_update, which
                               computes it itself (the distributed step computes
                               it at that op, into the layout) */
    const DlcOp *update;    /* the op that consumes it (dlc_param_update) */
    int ready;              /* the op after which it is complete: grad's
                               definition, or the fused update */
    int64_t offset;         /* in floats, from the layout's start */
    int64_t count;          /* floats (the parameter's elements) */
    int bucket;             /* the bucket that holds it */
} DlcBucketGrad;

/* A bucket: consecutive gradients of the layout. */
typedef struct DlcBucket {
    int64_t offset, count;  /* floats */
    int first, ngrads;      /* its gradients: grads[first .. first + ngrads) */
    int ready;              /* the op after which all of them are complete */
} DlcBucket;

typedef struct DlcBucketPlan {
    DlcBucketGrad *grads;   /* in the order they become ready (ties: the
                               parameters' order) */
    int ngrads;
    DlcBucket *buckets;
    int nbuckets;
    int64_t floats;         /* the layout's size */
    int64_t cap;            /* the most floats a bucket holds, but for a single
                               gradient larger than that, which has a bucket of
                               its own */
} DlcBucketPlan;

/* The smallest bucket the automatic size gives, in bytes: below it the
 * latency of a message (tens of microseconds on Ethernet) outweighs its
 * transfer. */
#define DLC_BUCKET_MIN_BYTES (64 * 1024)
/* The buckets the automatic size aims at: enough that the first ones are
 * summed while the backward pass still runs, few enough that each costs
 * one latency only. */
#define DLC_BUCKET_TARGET 8
/* The last bucket holds at most 1/DLC_BUCKET_TAIL of the gradients (but at
 * least DLC_BUCKET_MIN_BYTES): its sum starts when the backward pass ends,
 * and nothing hides it. */
#define DLC_BUCKET_TAIL 64

/* Plans the buckets of a training network (NAME.train, after the
 * optimizer pass): every parameter that has an update.  cap_bytes is the
 * largest bucket; 0 chooses max(DLC_BUCKET_MIN_BYTES, the gradients' bytes
 * / DLC_BUCKET_TARGET).  The last bucket is smaller (DLC_BUCKET_TAIL).  A
 * network without updates gets no buckets. */
void dlc_plan_buckets(DlcArena *arena, const DlcNetwork *train, int64_t cap_bytes,
                      DlcBucketPlan *plan);
/* The entry of grads for a gradient value, or NULL for any other value. */
const DlcBucketGrad *dlc_bucket_of_value(const DlcBucketPlan *plan, const DlcValue *v);
/* The entry for the parameter that update op consumes, or NULL. */
const DlcBucketGrad *dlc_bucket_of_update(const DlcBucketPlan *plan, const DlcOp *update);

#endif /* DLC_PLAN_BUCKETS_H */
