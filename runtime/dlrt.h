/* dlrt.h — libdlrt, the run-time library of programs that dlc generates.
 *
 * The one header generated code includes.  It depends on the C standard
 * library only and knows nothing of the compiler.  The library keeps no
 * global state: everything lives in objects the caller owns, with explicit
 * _init/_free pairs.  Functions that can fail return a DlrtStatus and fill
 * a DlrtError with a message for the user; nothing in the library exits or
 * prints.
 *
 * Sectioned by the file that implements each part:
 *   error.c        status codes and messages
 *   rng.c          the seeded random generator; parameter initialization
 *   data.c         datasets: IDX (gzip or plain), NumPy .npy, CSV; scaling
 *   batch.c        shuffling and batching
 *   loss.c         losses and accuracy
 *   safetensors.c  checkpoints in the safetensors format
 *   kernels.c      the ops' computations, forward and backward, in f32
 *   program.c      the command line of a generated program
 */
#ifndef DLRT_H
#define DLRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* error.c                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum DlrtStatus {
    DLRT_OK = 0,
    DLRT_E_IO,      /* a file could not be opened, read or written */
    DLRT_E_FORMAT,  /* a file is malformed, truncated or of the wrong kind */
    DLRT_E_SHAPE,   /* data or a checkpoint does not fit the network */
    DLRT_E_RANGE,   /* a value out of range (a label, an option) */
    DLRT_E_NOMEM,   /* an allocation failed */
    DLRT_E_ARG,     /* a bad argument from the caller */
} DlrtStatus;

/* What went wrong, for the user: "train-images-idx3-ubyte.gz: truncated
 * after 1024 of 47040000 bytes". */
typedef struct DlrtError {
    DlrtStatus status;
    char message[512];
} DlrtError;

/* Records status and a printf-style message in err (which may be NULL) and
 * returns status, so that failures read `return dlrt_fail(err, ...)`. */
DlrtStatus dlrt_fail(DlrtError *err, DlrtStatus status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A short name for a status: "I/O error", "bad format", ... */
const char *dlrt_status_name(DlrtStatus status);

/* ------------------------------------------------------------------------ */
/* rng.c                                                                    */
/* ------------------------------------------------------------------------ */

/* xoshiro256** seeded through splitmix64: the same seed gives the same
 * numbers on every machine. */
typedef struct DlrtRng {
    uint64_t s[4];
} DlrtRng;

void dlrt_rng_seed(DlrtRng *rng, uint64_t seed);
uint64_t dlrt_rng_next(DlrtRng *rng);
/* Uniform in [0, 1), with 24 random bits. */
float dlrt_rng_uniform(DlrtRng *rng);
/* Uniform in [0, n), without modulo bias; n >= 1. */
uint64_t dlrt_rng_below(DlrtRng *rng, uint64_t n);

/* PyTorch's default initialization of conv and dense weights
 * (kaiming_uniform_ with a = sqrt(5)): uniform in [-b, b] with
 * b = 1 / sqrt(fan_in). */
void dlrt_init_kaiming_uniform(float *w, int64_t n, int64_t fan_in, DlrtRng *rng);
void dlrt_init_constant(float *w, int64_t n, float value);

/* ------------------------------------------------------------------------ */
/* data.c                                                                   */
/* ------------------------------------------------------------------------ */

#define DLRT_MAX_SAMPLE_RANK 4

/* How raw values become inputs: x = (raw * scale - mean) / std, computed in
 * double and rounded once.  A NULL scaling means the default: scale = 1/255,
 * mean = 0, std = 1 for uint8 data (IDX, .npy |u1: values in [0, 1]), and
 * the identity for other dtypes and CSV.  std must be positive and finite. */
typedef struct DlrtScaling {
    float scale;
    float mean;
    float std;
} DlrtScaling;

DlrtScaling dlrt_scaling_default(void);

/* A dataset in memory: samples of one shape and their class labels. */
typedef struct DlrtDataset {
    int64_t count;                        /* number of samples */
    int rank;                             /* of one sample */
    int64_t dims[DLRT_MAX_SAMPLE_RANK];   /* one sample's shape: {1, 28, 28} for
                                             IDX images of 28x28 (IDX gets a
                                             channel added to 2-d images; .npy
                                             shapes are kept as stored) */
    int64_t sample_size;                  /* elements per sample */
    float *x;                             /* count * sample_size, scaled */
    int32_t *y;                           /* count labels */
    int32_t num_classes;                  /* 1 + the largest label */
} DlrtDataset;

/* Every loader reads files gzip-compressed or not (told by content, not by
 * name).  On failure *ds is left zeroed; free a previous dataset first.
 *
 * An images file and a labels file in the IDX format.  The counts must
 * agree. */
DlrtStatus dlrt_load_idx(DlrtDataset *ds, const char *images, const char *labels,
                         const DlrtScaling *scaling, DlrtError *err);
/* A folder laid out as MNIST and Fashion-MNIST ship: train-images-idx3-ubyte,
 * train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte,
 * each possibly with .gz.  Either train or test may be NULL (not both), to
 * load one split only. */
DlrtStatus dlrt_load_idx_dir(DlrtDataset *train, DlrtDataset *test, const char *dir,
                             const DlrtScaling *scaling, DlrtError *err);
/* NumPy .npy files: images of any numeric dtype and shape [count, ...],
 * labels of an integer dtype and shape [count].  Shapes are kept as stored:
 * no channel dimension is added (save [count, 1, 28, 28] for f32[1, 28, 28]). */
DlrtStatus dlrt_load_npy(DlrtDataset *ds, const char *images, const char *labels,
                         const DlrtScaling *scaling, DlrtError *err);
/* A CSV file of numbers, one sample per row; the label is column
 * label_column; header says whether to skip a first row.  Samples are
 * one-dimensional. */
DlrtStatus dlrt_load_csv(DlrtDataset *ds, const char *path, int label_column, bool header,
                         const DlrtScaling *scaling, DlrtError *err);
/* Checks that every sample has the shape a network expects and every label
 * is below num_classes; the message names the first offender. */
DlrtStatus dlrt_dataset_check(const DlrtDataset *ds, int rank, const int64_t *dims,
                              int32_t num_classes, DlrtError *err);
void dlrt_dataset_free(DlrtDataset *ds);

/* ------------------------------------------------------------------------ */
/* batch.c                                                                  */
/* ------------------------------------------------------------------------ */

/* Walks a dataset in batches, in a new seeded random order each epoch (or
 * in order).  The last batch of an epoch may be smaller. */
typedef struct DlrtBatcher {
    const DlrtDataset *ds;
    int64_t batch;     /* samples per batch */
    bool shuffle;
    DlrtRng rng;
    int64_t *order;    /* a permutation of the samples, for this epoch */
    int64_t pos;       /* next position in order */
} DlrtBatcher;

DlrtStatus dlrt_batcher_init(DlrtBatcher *b, const DlrtDataset *ds, int64_t batch,
                             bool shuffle, uint64_t seed, DlrtError *err);
/* Copies the next batch into x (batch * sample_size floats) and y (batch
 * labels; either may be NULL) and returns how many samples it holds: 0 once
 * the epoch is over.  The dataset must outlive the batcher. */
int64_t dlrt_batcher_next(DlrtBatcher *b, float *x, int32_t *y);
/* Starts the next epoch (reshuffling when shuffling). */
void dlrt_batcher_next_epoch(DlrtBatcher *b);
void dlrt_batcher_free(DlrtBatcher *b);

/* ------------------------------------------------------------------------ */
/* loss.c                                                                   */
/* ------------------------------------------------------------------------ */

/* Mean cross-entropy of n rows of logits (classes each) against labels,
 * through log-sum-exp: never negative, finite for finite logits.  When grad
 * is not NULL it receives d(loss)/d(logits) (softmax - onehot) / n.  A label
 * outside [0, classes) gives NAN and a zero gradient; n == 0 gives 0. */
double dlrt_cross_entropy(const float *logits, const int32_t *labels, int64_t n,
                          int64_t classes, float *grad);
/* Mean squared error over n * size values; grad as above (may be NULL). */
double dlrt_mse(const float *pred, const float *target, int64_t n, int64_t size,
                float *grad);
/* Rows whose largest logit (the first, on ties) is at the label. */
int64_t dlrt_count_correct(const float *logits, const int32_t *labels, int64_t n,
                           int64_t classes);

/* ------------------------------------------------------------------------ */
/* safetensors.c                                                            */
/* ------------------------------------------------------------------------ */

typedef enum DlrtDType { DLRT_F32, DLRT_F64, DLRT_I32, DLRT_I64, DLRT_U8 } DlrtDType;

#define DLRT_MAX_RANK 6

/* A named tensor in a checkpoint; data is the caller's. */
typedef struct DlrtTensor {
    const char *name;
    DlrtDType dtype;
    int rank;
    int64_t dims[DLRT_MAX_RANK];
    void *data;
} DlrtTensor;

/* One string of a checkpoint's metadata ("network": "lenet5").  A generated
 * network's save_with takes up to DLRT_MAX_META entries of its caller's. */
#define DLRT_MAX_META 16
typedef struct DlrtMeta {
    char *key;
    char *value;
} DlrtMeta;

/* Writes the tensors (in the given order) and metadata to path in the
 * safetensors format: to a temporary file in the same folder, flushed and
 * renamed over path, so a crash never leaves a partial checkpoint and never
 * destroys the previous one.  A path that exists and is not a regular file
 * (/dev/null, a pipe) is written into, not replaced. */
DlrtStatus dlrt_save_safetensors(const char *path, const DlrtTensor *tensors, int n,
                                 const DlrtMeta *meta, int nmeta, DlrtError *err);
/* Reads path into the given tensors: the file must hold exactly these names
 * (in any order), each with the same dtype and shape; anything missing,
 * extra, mismatched, truncated or malformed is an error naming the tensor.
 * Data is copied into each tensor's data.  meta and nmeta are both NULL or
 * both set; they receive the metadata (free with dlrt_meta_free).  On error
 * *meta = NULL, *nmeta = 0 and the tensors are unchanged (short of a read
 * error midway); a mismatch is DLRT_E_SHAPE, a malformed file DLRT_E_FORMAT. */
DlrtStatus dlrt_load_safetensors(const char *path, DlrtTensor *tensors, int n,
                                 DlrtMeta **meta, int *nmeta, DlrtError *err);
void dlrt_meta_free(DlrtMeta *meta, int nmeta);

/* ------------------------------------------------------------------------ */
/* kernels.c                                                                */
/* ------------------------------------------------------------------------ */

/* What generated code calls for each op of the IR.  Tensors are dense,
 * row-major, f32, batch first: an image batch is [n, c, h, w].  n is the
 * batch of this call; every other size is the network's, known when the
 * code was generated.  Outputs are overwritten (not accumulated into) and
 * must not alias inputs unless a kernel says so.  Semantics are PyTorch's;
 * tests/runtime checks each kernel against PyTorch and finite differences.
 * Matrix sizes go to BLAS as int: c/groups*kh*kw*oh*ow, f/groups*oh*ow,
 * n*in and n*out must each stay below 2^31. */

/* A 2-d convolution's geometry (torch.nn.Conv2d). */
typedef struct DlrtConv {
    int64_t c, h, w;       /* input channels and size */
    int64_t f, oh, ow;     /* filters and output size */
    int64_t kh, kw;        /* kernel */
    int64_t sh, sw;        /* stride */
    int64_t ph, pw;        /* zero padding on each side */
    int64_t dh, dw;        /* dilation */
    int64_t groups;
} DlrtConv;

/* Floats of scratch memory the convolution kernels need for a batch of n
 * (an im2col buffer); the caller provides it.  Today the size does not
 * depend on n (one buffer serves every sample); n is there for per-thread
 * buffers once the kernels use OpenMP. */
int64_t dlrt_conv2d_workspace(const DlrtConv *cv, int64_t n);
/* y[n,f,oh,ow] = conv(x[n,c,h,w], w[f,c/groups,kh,kw]) + b[f] (b may be NULL). */
void dlrt_conv2d_forward(const DlrtConv *cv, int64_t n, const float *x, const float *w,
                         const float *b, float *y, float *work);
/* dx[n,c,h,w] from dy[n,f,oh,ow] and w. */
void dlrt_conv2d_backward_input(const DlrtConv *cv, int64_t n, const float *dy,
                                const float *w, float *dx, float *work);
/* dw[f,c/groups,kh,kw], summed over the batch, from dy and x. */
void dlrt_conv2d_backward_weight(const DlrtConv *cv, int64_t n, const float *dy,
                                 const float *x, float *dw, float *work);

/* y[n,out] = x[n,in] w[out,in]^T + b[out] (b may be NULL) (torch.nn.Linear). */
void dlrt_dense_forward(int64_t n, int64_t in, int64_t out, const float *x, const float *w,
                        const float *b, float *y);
/* dx[n,in] = dy[n,out] w[out,in] */
void dlrt_dense_backward_input(int64_t n, int64_t in, int64_t out, const float *dy,
                               const float *w, float *dx);
/* dw[out,in] = dy^T x, summed over the batch */
void dlrt_dense_backward_weight(int64_t n, int64_t in, int64_t out, const float *dy,
                                const float *x, float *dw);
/* db[c] = the sum of dy[n,c,spatial] over n and spatial (a bias gradient). */
void dlrt_bias_backward(int64_t n, int64_t c, int64_t spatial, const float *dy, float *db);

/* Elementwise over count values.  The backward kernels take the forward
 * result y (relu: y > 0; sigmoid: y (1 - y); tanh: 1 - y^2). */
void dlrt_relu_forward(int64_t count, const float *x, float *y);
void dlrt_relu_backward(int64_t count, const float *dy, const float *y, float *dx);
void dlrt_sigmoid_forward(int64_t count, const float *x, float *y);
void dlrt_sigmoid_backward(int64_t count, const float *dy, const float *y, float *dx);
void dlrt_tanh_forward(int64_t count, const float *x, float *y);
void dlrt_tanh_backward(int64_t count, const float *dy, const float *y, float *dx);
/* y = a + b; y may alias a or b. */
void dlrt_add(int64_t count, const float *a, const float *b, float *y);

/* Max and average pooling's geometry (torch.nn.MaxPool2d, AvgPool2d). */
typedef struct DlrtPool {
    int64_t c, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
    bool count_include_pad; /* average pooling: divide by the whole window */
} DlrtPool;

void dlrt_maxpool_forward(const DlrtPool *p, int64_t n, const float *x, float *y);
/* dx from dy, finding each window's maximum (the first, on ties) in x again. */
void dlrt_maxpool_backward(const DlrtPool *p, int64_t n, const float *dy, const float *x,
                           float *dx);
void dlrt_avgpool_forward(const DlrtPool *p, int64_t n, const float *x, float *y);
void dlrt_avgpool_backward(const DlrtPool *p, int64_t n, const float *dy, float *dx);
/* y[n,c] = the mean of x[n,c,hw]; backward spreads dy[n,c] / hw. */
void dlrt_globalavgpool_forward(int64_t n, int64_t c, int64_t hw, const float *x, float *y);
void dlrt_globalavgpool_backward(int64_t n, int64_t c, int64_t hw, const float *dy, float *dx);

/* Softmax over the middle dimension of [outer, axis, inner] (outer includes
 * the batch); backward dx = y (dy - sum(dy y)) along the axis. */
void dlrt_softmax_forward(int64_t outer, int64_t axis, int64_t inner, const float *x, float *y);
void dlrt_softmax_backward(int64_t outer, int64_t axis, int64_t inner, const float *dy,
                           const float *y, float *dx);

/* Copies a block: for each of outer rows, len floats from src + row *
 * src_stride + src_offset to dst + row * dst_stride + dst_offset.  concat is
 * one call per operand, and its gradient (slice) one per result. */
void dlrt_copy_rows(int64_t outer, int64_t len, const float *src, int64_t src_stride,
                    int64_t src_offset, float *dst, int64_t dst_stride, int64_t dst_offset);

/* The updates of torch.optim.SGD and torch.optim.Adam for one parameter of
 * count values, in place.  g is the gradient (left unchanged);
 * momentum_buffer is NULL without momentum (and ignored when momentum is 0).
 * Adam's step is 1 on the first update; a smaller step is taken as 1. */
void dlrt_sgd_update(int64_t count, const float *g, float lr, float momentum, bool nesterov,
                     float weight_decay, float *p, float *momentum_buffer);
void dlrt_adam_update(int64_t count, const float *g, float lr, int32_t step, float beta1,
                      float beta2, float eps, float weight_decay, float *p, float *exp_avg,
                      float *exp_avg_sq);

/* ------------------------------------------------------------------------ */
/* program.c                                                                */
/* ------------------------------------------------------------------------ */

/* A compiled classifier as the command line sees it: what the generated
 * code knows of the network, the train section's defaults, and its API
 * (with the network object as void *). */
typedef struct DlrtModel {
    const char *name;          /* the network: "lenet5" */
    const char *source;        /* the .dl file it was compiled from */
    const char *layers;        /* one line per op, for `info` */
    int rank;                  /* the input's per-sample shape */
    int64_t dims[DLRT_MAX_SAMPLE_RANK];
    int64_t input_size;        /* floats per sample */
    int64_t classes;           /* outputs per sample */
    int64_t trainable;         /* trainable parameters */
    /* the train section's defaults, which flags override */
    const char *data;          /* an IDX folder, or NULL */
    int64_t batch, epochs;
    double lr;
    uint64_t seed;
    const char *schedule;      /* "constant", "step" or "cosine" */
    int64_t step_every;        /* step: epochs between decays */
    double gamma, min_lr;      /* step: the decay; cosine: the floor */
    int64_t warmup;            /* epochs of linear warm-up */
    const char *optimizer;     /* for messages: "sgd(lr=0.01, momentum=0.9)" */
    /* the generated API */
    size_t (*memory)(int64_t max_batch);
    DlrtStatus (*create)(void **net, int64_t max_batch, uint64_t seed, DlrtError *err);
    void (*free)(void *net);
    DlrtStatus (*forward)(void *net, int64_t n, const float *x, float *out, DlrtError *err);
    DlrtStatus (*train_step)(void *net, int64_t n, const float *x, const int32_t *labels,
                             float lr, float *loss, DlrtError *err);
    DlrtStatus (*save)(const void *net, const char *path, const DlrtMeta *extra, int nextra,
                       DlrtError *err);
    DlrtStatus (*load)(void *net, const char *path, DlrtMeta **meta, int *nmeta,
                       DlrtError *err);
} DlrtModel;

/* The generated program's main: `train`, `eval`, `info`, with --help.
 * Returns the exit status: 0 on success, 1 on errors in data, files or
 * training, 2 on bad usage. */
int dlrt_main(int argc, char **argv, const DlrtModel *model);

#ifdef __cplusplus
}
#endif

#endif /* DLRT_H */
