/* program.h — what the files of a generated program's command line share.
 *
 *   program.c   main: parsing the options, the thread count, dispatching;
 *               `info`; the JSON report
 *   train.c     `train` and `eval`: the commands that run on an IDX folder
 *   predict.c   `predict`: classifying IDX, .npy, PGM, PNG and JPEG files
 *   images.c    the train section's images(...): folders of images
 *   sample.c    `sample`: text from a language model
 *   bench.c     `bench`: timing steps on synthetic data
 *   gradcheck.c `gradcheck`: the gradients against finite differences
 *   check.c     `check`: the GPU's training step against the CPU's
 *   calibrate.c `calibrate`: an int8 program's scales and weights
 *   distributed.c  data-parallel training under mpirun (MPI; NCCL on GPUs)
 *   nccl.c      NCCL, loaded at run time, for distributed.c
 *
 * They make libdlrt_program, which a generated program links before
 * libdlrt; they call libdlrt like any user of dlrt.h, and libdlrt calls
 * none of them, so a product that embeds a network links libdlrt alone.
 * This header is internal to them: generated code includes dlrt.h only,
 * which declares the one entry point, dlrt_main.  These are the only files
 * of the runtime that print (but for profile.c's tables, DLRT_PROFILE and
 * DLRT_CUDA_PROFILE, on request, on stderr) and choose exit statuses; a
 * command returns 0 on success, 1 for problems with data, files or
 * training, 2 for bad usage.
 */
#ifndef DLRT_PROGRAM_H
#define DLRT_PROGRAM_H

#include "dlrt.h"

/* The command line, parsed; defaults from the network's train section. */
typedef struct Options {
    const char *device;        /* every command: "cpu" or "cuda" (--device) */
    const char *data;          /* an IDX folder */
    bool data_given;           /* --data was on the command line (not the
                                  train section's default) */
    const char *save, *resume, *log, *report, *weights;  /* files, or NULL */
    const char *mode;          /* bench: "train" or "infer" */
    int64_t epochs, batch;     /* train: epochs to run; every command: samples per step */
    int64_t limit;             /* train: the first samples of the train split; 0 = all */
    int64_t iters, warmup;     /* bench: timed and untimed iterations */
    int64_t threads;           /* for dlrt_set_threads */
    int64_t workers;           /* images: the loader's threads (0: chosen) */
    double lr;                 /* train, bench: before the schedule */
    double clip;               /* train, bench, check: the gradients' largest norm
                                  (0: no clipping) */
    uint64_t seed;             /* train, bench */
    bool seed_given;           /* --seed was on the command line */
    bool batch_given;          /* --batch was; without it, gradcheck's batch is
                                  DLRT_GRADCHECK_BATCH, not the train section's */
    double timeout;            /* train under mpirun: the seconds a rank waits for
                                  the others before it stops the job */
    int64_t ranks;             /* info: the ranks to show the bucket plan for */
    double tolerance;          /* gradcheck, check: the largest relative error
                                  that passes */
    const char *prime;         /* sample: the text to start from */
    int64_t length;            /* sample: characters to generate */
    double temperature;        /* sample: the logits' divisor, above 0 */
    int64_t samples;           /* calibrate: the train split's first samples it runs */
    const char *method;        /* calibrate: "minmax", "percentile" or "entropy" */
    char **inputs;             /* predict: the files to classify (ninputs) */
    int ninputs;
} Options;

/* What a command measured, for --report.  Figures not measured stay NAN
 * (or -1 for counts) and are left out of the file. */
typedef struct Report {
    const char *command;         /* "train", "eval", "predict", "bench", "gradcheck",
                                    "check", "calibrate" or "info" */
    const char *device;          /* where it ran; NULL: the table's (dlrt_device_name) */
    const char *mode;            /* bench: "train" or "infer"; else NULL */
    int64_t epochs;              /* train: epochs the weights have seen, resumed ones included */
    int64_t ranks;               /* train under mpirun: the ranks that trained */
    int64_t images;              /* samples the timed part of the command processed */
    double train_loss, test_loss, test_accuracy;  /* train, eval (train_loss: train) */
    double images_per_second;    /* in the timed part: steps, forward passes */
    double loader_images_per_second; /* bench of images(...): the loader alone */
    double median_ms, mean_ms, min_ms, max_ms;  /* bench: per batch */
    double gradcheck_error;      /* gradcheck: f64 gradients vs finite differences */
    double gradcheck_f32_error;  /* gradcheck: f32 gradients vs f64 */
    const char *check_worst_tensor; /* check: the tensor of the largest error; NULL
                                       when check did not run */
    double check_worst_error;    /* check: that error, the GPU's vs the CPU's (NAN
                                    when a value was not a number) */
    double seconds;              /* the whole command, loading included */
} Report;

/* A report with nothing measured yet. */
Report dlrt_report_new(const char *command);
/* Writes the report to o->report (if given); false, after a message, if it
 * cannot be written. */
bool dlrt_report_write(const DlrtModel *m, const Options *o, const Report *r);

/* The device a table runs on: its `device`, or "cpu" when that is NULL (a
 * CPU table that does not say). */
const char *dlrt_device_name(const DlrtModel *m);
/* Gives a network just created by m the --clip of o (where m clips). */
void dlrt_apply_clip(const DlrtModel *m, void *net, const Options *o);

/* train.c: labels per sample, 1 or a language model's steps (outputs per
 * sample are that many times m->classes); and n random samples with their
 * labels (token ids below m->vocab for a language model, else values in
 * [0, 1); x64, if not NULL, gets the same values), for bench, gradcheck and
 * a train run without data. */
int64_t dlrt_label_steps(const DlrtModel *m);
void dlrt_random_batch(const DlrtModel *m, DlrtRng *rng, int64_t n, float *x, double *x64,
                       int32_t *y);

int dlrt_train_command(const DlrtModel *m, const Options *o);
int dlrt_sample_command(const DlrtModel *m, const Options *o);  /* sample.c */
int dlrt_eval_command(const DlrtModel *m, const Options *o);
int dlrt_predict_command(const DlrtModel *m, const Options *o);
int dlrt_bench_command(const DlrtModel *m, const Options *o);
int dlrt_gradcheck_command(const DlrtModel *m, const Options *o);  /* gradcheck.c */
/* check.c: m is the CPU's table, compared with m->cuda (which must be set) */
int dlrt_check_command(const DlrtModel *m, const Options *o);
int dlrt_calibrate_command(const DlrtModel *m, const Options *o);  /* calibrate.c */

/* gradcheck.c: the gradient check that `gradcheck` runs (see its comment). */
typedef struct DlrtGradcheck {
    int64_t batch;          /* samples in the random batch */
    uint64_t seed;          /* weights (unless weights is set), batch, entries */
    const char *weights;    /* a checkpoint to check at, or NULL */
    int64_t entries;        /* finite differences per tensor, at most */
    double step;            /* h of (L(w + h) - L(w - h)) / 2h */
    double kink;            /* one-sided slopes differing by more: a kink */
} DlrtGradcheck;

typedef struct DlrtGradcheckResult {
    double loss;            /* the f64 loss on the batch */
    double worst;           /* the largest relative error, f64 vs finite differences */
    char where[160];        /* its entry: "c1.weight[17]" */
    double analytic, numeric;
    double worst_f32;       /* the largest relative error, f32 vs f64 gradients */
    int64_t checked;        /* entries compared with finite differences */
    int64_t kinks;          /* of them, at a kink: compared with a one-sided slope */
    int tensors;            /* trainable tensors */
} DlrtGradcheckResult;

/* Prints a table of the errors per tensor to standard output and fills res;
 * fails only when the check cannot run (judging the errors is the caller's). */
DlrtStatus dlrt_gradcheck(const DlrtModel *m, const DlrtGradcheck *o, DlrtGradcheckResult *res,
                          DlrtError *err);

/* gradcheck's batch without --batch: finite differences need few samples */
#define DLRT_GRADCHECK_BATCH 4
/* check's tolerance without --tolerance: a relative error that f32 rounding
 * in another order of summation stays well below */
#define DLRT_CHECK_TOLERANCE 1e-4

/* images.c: the train section's images(...). */
typedef struct ImageData {
    DlrtImageFolder train, val;        /* the folder's splits */
    DlrtTransform train_tf, eval_tf;
    DlrtLoader *train_loader;          /* shuffled, the training transform */
    DlrtLoader *val_loader;            /* in order, the eval transform; NULL
                                          without validation images */
    char *classes;                     /* the class names, a metadata value */
} ImageData;

/* Whether train and eval read o->data as a folder of images: the train
 * section's images(...), or a network of images given a folder without
 * IDX files. */
bool dlrt_images_wanted(const DlrtModel *m, const Options *o);
/* The network's input as images: false unless [1 or 3, H, W]. */
bool dlrt_images_shape(const DlrtModel *m, int64_t *c, int64_t *h, int64_t *w);
/* The loader's threads: --workers, else the online CPUs up to 8. */
int dlrt_images_workers(const Options *o);
/* Lists o->data (both splits when train, else the validation one), cut to
 * --limit, and opens their loaders (seed: the shuffle's and the
 * augmentation's); false after a message. */
bool dlrt_images_open(ImageData *d, const DlrtModel *m, const Options *o, bool train,
                      uint64_t seed);
void dlrt_images_close(ImageData *d);
/* bench: the training loader alone, over up to `batches` batches of
 * o->data (an epoch at most), in images per second; false after a
 * message. */
bool dlrt_images_bench(const DlrtModel *m, const Options *o, int64_t batches, double *ips);
/* One PNG or JPEG file for predict, with m's eval transform (none without
 * images(...)), as a dataset of one sample. */
DlrtStatus dlrt_images_load_file(const DlrtModel *m, const char *path, DlrtDataset *ds,
                                 DlrtError *err);
/* The class names of a checkpoint's metadata ("classes"), *n of them, or
 * NULL; free(names[0]) then free(names). */
char **dlrt_images_class_names(const DlrtMeta *meta, int nmeta, int32_t *n);

/* --timeout without the flag: long enough for a checkpoint of a large
 * network to be written while the other ranks wait, short enough that a
 * hung job is noticed */
#define DLRT_DIST_TIMEOUT 120

/* distributed.c: data-parallel training under mpirun (docs/distributed.md).
 * The one file that calls MPI; a build without MPI compiles the part that
 * says so. */
typedef struct DlrtDist {
    bool on;                   /* launched by mpirun: train runs the distributed step */
    int rank, size;            /* this process's rank among size (0 of 1 alone) */
    void *impl;                /* distributed.c's own: MPI's state, the reducer */
} DlrtDist;

/* Whether a process manager (mpirun) started this process. */
bool dlrt_dist_launched(void);
/* Whether this build has MPI. */
bool dlrt_dist_built(void);
/* Starts MPI and checks, before training, that every rank runs the same
 * network (DlrtModel.hash) with the same options, that the network has a
 * distributed step and that --batch divides among the ranks; 0 to go on,
 * else the exit status (after a message, from rank 0 where every rank
 * finds the same).  Close d whatever it returns. */
int dlrt_dist_open(DlrtDist *d, const DlrtModel *m, const Options *o);
/* Ends MPI; a status of 1 (a rank that fails alone: a file it cannot
 * write) stops the other ranks too (MPI_Abort) rather than leave them
 * waiting. */
void dlrt_dist_close(DlrtDist *d, int status);
/* The rows [lo, hi) that rank `rank` of `size` trains on (or evaluates)
 * of a batch of n samples where batches hold `batch`: [rank batch / size,
 * (rank + 1) batch / size), cut to n: the same rows in every batch (a
 * stateful network's streams stay on their rank), and in an epoch's last,
 * smaller batch fewer rows, or none, for the last ranks. */
void dlrt_dist_part(int64_t batch, int64_t n, int rank, int size, int64_t *lo, int64_t *hi);
/* The reducer of the distributed step: NULL for one rank. */
const DlrtReducer *dlrt_dist_reducer(DlrtDist *d);
/* Before each training step (1-based, counted in this run): the tests'
 * DLRT_DIST_FAULT, and the step's messages. */
void dlrt_dist_fault(const DlrtDist *d, int64_t step);
void dlrt_dist_step(DlrtDist *d, int64_t step);
/* Replaces the n values of v by their sums over the ranks, added in rank
 * order (the same on every rank); `what` names them if a rank does not
 * answer within --timeout, which stops the job. */
void dlrt_dist_sum(DlrtDist *d, double *v, int n, const char *what);
/* Whether every rank holds the same parameters and buffers (a checksum of
 * each rank's, compared); false after rank 0's message. */
bool dlrt_dist_same_weights(DlrtDist *d, const DlrtModel *m, void *net);

/* The GPU's reducer of the distributed step (NCCL): NULL for one rank, or
 * when training on the CPU. */
const DlrtCudaReducer *dlrt_dist_cuda_reducer(DlrtDist *d);

/* nccl.c: NCCL loaded at run time (libnccl.so.2, or DLRT_NCCL_LIBRARY), for
 * distributed.c's GPU reducer.  No NCCL header is needed to build. */
typedef struct DlrtNccl DlrtNccl;
#define DLRT_NCCL_ID_BYTES 128 /* nccl.h's NCCL_UNIQUE_ID_BYTES */
/* The library that dlrt_nccl_load tries. */
const char *dlrt_nccl_path(void);
/* Loads NCCL and its entry points; NULL with the reason in why. */
DlrtNccl *dlrt_nccl_load(char *why, size_t size);
/* Destroys the communicator (the GPU's context current) and unloads NCCL;
 * NULL is fine. */
void dlrt_nccl_close(DlrtNccl *n);
/* The file loaded, and NCCL's version (major * 10000 + minor * 100 +
 * patch; 0 where it does not say). */
const char *dlrt_nccl_loaded(const DlrtNccl *n);
int dlrt_nccl_version(const DlrtNccl *n);
/* Rank 0's: the communicator's identity, which every rank must get. */
DlrtStatus dlrt_nccl_unique_id(DlrtNccl *n, unsigned char id[DLRT_NCCL_ID_BYTES],
                               DlrtError *err);
/* Joins the communicator of size ranks as rank, on the current GPU
 * context's device (dlrt_cuda_bind); every rank must call it. */
DlrtStatus dlrt_nccl_init(DlrtNccl *n, int size, const unsigned char id[DLRT_NCCL_ID_BYTES],
                          int rank, DlrtError *err);
/* Queues on stream the in-place sum over the ranks of count floats at
 * data, each rank's times scale first; what names them in messages. */
DlrtStatus dlrt_nccl_allreduce(DlrtNccl *n, DlrtDevicePtr data, int64_t count, float scale,
                               DlrtCudaStream stream, const char *what, DlrtError *err);

#endif /* DLRT_PROGRAM_H */
