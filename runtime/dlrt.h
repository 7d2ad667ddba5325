/* dlrt.h — the run-time library of the code that dlc generates.
 *
 * The one header generated code includes.  It depends on the C standard
 * library only and knows nothing of the compiler.  The library keeps no
 * global state: everything lives in objects the caller owns, with explicit
 * _init/_free pairs.  Functions that can fail return a DlrtStatus and fill
 * a DlrtError with a message for the user; nothing in libdlrt exits, and
 * it prints only the profiles that DLRT_PROFILE=1 and DLRT_CUDA_PROFILE=1
 * ask for, and dlrt_fix_blas_core's warning.
 *
 * Sectioned by the file that implements each part.  libdlrt, all that a
 * product embedding a network links:
 *   error.c        status codes and messages
 *   rng.c          the seeded random generator; parameter initialization
 *   threads.c      the kernels' thread count
 *   data.c         datasets: IDX (gzip or plain), NumPy .npy, CSV; scaling
 *   pgm.c          grayscale PGM images, for predictions
 *   image.c        PNG and JPEG images (libpng, libjpeg-turbo)
 *   transform.c    torchvision's preprocessing and augmentation of images
 *   imagefolder.c  folders of images, a subfolder per class, and the
 *                  loader that decodes their batches on worker threads
 *   batch.c        shuffling and batching
 *   safetensors.c  checkpoints in the safetensors format
 *   text.c         text for character-level language models: UTF-8
 *                  files, the vocabulary (kept in checkpoints), datasets
 *                  of next-character prediction
 *   kernels/       the ops' computations, forward and backward, in f32
 *                  and f64, losses and accuracy among them: kernels.c, and
 *                  a file per op family
 *   alloc.c        the cache-line-aligned memory of generated networks
 *   profile.c      where a step's time goes, on request
 *   cuda.c         the GPU through the CUDA driver, loaded at run time
 * libdlrt_program, which a generated program links besides:
 *   program/       the program's command line: dlrt_main (program.c) and
 *                  its commands, in files beside it that share
 *                  program/program.h
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
    DLRT_E_DEVICE,  /* no GPU, no driver, or a driver call failed */
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
/* A seed derived from seed and two counters (a hash): independent streams
 * for each (step, op) of a network without keeping generator state. */
uint64_t dlrt_rng_derive(uint64_t seed, uint64_t a, uint64_t b);
/* Element i of a stream of uniform numbers in [0, 1) (24 random bits)
 * from seed, computed on its own: splitmix64's i-th output.  Dropout's
 * masks come from it, so that a GPU kernel draws the same mask as the CPU
 * element by element. */
float dlrt_rng_uniform_at(uint64_t seed, uint64_t i);
/* Uniform in [0, n), without modulo bias; n >= 1. */
uint64_t dlrt_rng_below(DlrtRng *rng, uint64_t n);

/* PyTorch's default initialization of conv and dense weights
 * (kaiming_uniform_ with a = sqrt(5)): uniform in [-b, b] with
 * b = 1 / sqrt(fan_in). */
void dlrt_init_kaiming_uniform(float *w, int64_t n, int64_t fan_in, DlrtRng *rng);
void dlrt_init_constant(float *w, int64_t n, float value);
void dlrt_init_kaiming_uniform_f64(double *w, int64_t n, int64_t fan_in, DlrtRng *rng);
void dlrt_init_constant_f64(double *w, int64_t n, double value);
/* normal(0, 1), torch.nn.Embedding's initialization (Box-Muller on the
 * generator's uniform numbers); the f64 twin draws the same floats. */
void dlrt_init_normal(float *w, int64_t n, DlrtRng *rng);
void dlrt_init_normal_f64(double *w, int64_t n, DlrtRng *rng);

/* ------------------------------------------------------------------------ */
/* threads.c                                                                */
/* ------------------------------------------------------------------------ */

/* Sets the number of threads the kernels use: OpenBLAS's (which caps it at
 * the maximum it was built for, 64 on Debian 12) and, in a build with
 * OpenMP, OpenMP's.  It is process-wide state of those libraries, so call
 * it once, before the work; n < 1 is taken as 1.  The same seed and thread
 * count give bit-identical results; another thread count may change the
 * last bits of sums. */
void dlrt_set_threads(int n);

/* The kernels OpenBLAS runs: "SkylakeX", "Haswell", "Zen", "Prescott"... */
const char *dlrt_blas_core(void);
/* When OpenBLAS fell back to its generic Prescott kernels on a CPU with
 * AVX-512 or AVX2 (Debian 12's OpenBLAS 0.3.21 does on some Xeons) and
 * OPENBLAS_CORETYPE is not set, sets it and starts the program again
 * (execv of /proc/self/exe with argv): OpenBLAS reads it only when it is
 * loaded.  Returns only when nothing needs doing, or after a warning when
 * the restart failed.  The generated program's main calls it first; a
 * product embedding dlc's code can call it the same way, or set
 * OPENBLAS_CORETYPE itself. */
void dlrt_fix_blas_core(char **argv);

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

/* A dataset in memory: samples of one shape and their class labels: one
 * per sample, or (label_size > 1) one per step of a sequence. */
typedef struct DlrtDataset {
    int64_t count;                        /* number of samples */
    int rank;                             /* of one sample */
    int64_t dims[DLRT_MAX_SAMPLE_RANK];   /* one sample's shape: {1, 28, 28} for
                                             IDX images of 28x28 (IDX gets a
                                             channel added to 2-d images; .npy
                                             shapes are kept as stored) */
    int64_t sample_size;                  /* elements per sample */
    float *x;                             /* count * sample_size, scaled */
    int32_t *y;                           /* count * label_size labels, a
                                             sample's together; NULL for
                                             images alone (the *_images
                                             loaders) */
    int32_t num_classes;                  /* 1 + the largest label; 0
                                             without labels (a text
                                             dataset's: the vocabulary's
                                             size) */
    int64_t label_size;                   /* labels per sample: 1 (0 reads
                                             as 1, as a zeroed dataset has
                                             it), or dims[0] for a label per
                                             step of a sequence (text.c's
                                             datasets: the next character at
                                             each step) */
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
/* Images without labels, to classify (y is NULL).  An IDX images file,
 * count first, as dlrt_load_idx reads it (one image is a count of 1). */
DlrtStatus dlrt_load_idx_images(DlrtDataset *ds, const char *path, const DlrtScaling *scaling,
                                DlrtError *err);
/* A .npy file of images: an array of exactly the shape sample_dims (the
 * network's input, of rank sample_rank) is one sample; any other has the
 * count first.  Shapes and scaling as dlrt_load_npy. */
DlrtStatus dlrt_load_npy_images(DlrtDataset *ds, const char *path, int sample_rank,
                                const int64_t *sample_dims, const DlrtScaling *scaling,
                                DlrtError *err);
/* Checks that every sample has the shape a network expects and every label
 * (if there are labels) is below num_classes; the message names the first
 * offender.  Samples of [1, H, W] (grayscale images) also fit a network
 * that takes [H, W]: the sequence of their rows.  A label_size above 1
 * must be the samples' first dimension (their steps); whether the network
 * takes a label per sample or per step is the caller's to compare. */
DlrtStatus dlrt_dataset_check(const DlrtDataset *ds, int rank, const int64_t *dims,
                              int32_t num_classes, DlrtError *err);
/* Checks the token ids of input `input` (n samples of `steps` ids each)
 * against a vocabulary of `vocab` tokens: the error (DLRT_E_RANGE) names
 * the first id outside 0 to vocab-1, its sample and its step.  The
 * generated code calls it before running a network that embeds tokens. */
DlrtStatus dlrt_check_tokens(const int32_t *ids, int64_t n, int64_t steps, int64_t vocab,
                             const char *input, DlrtError *err);
/* Checks the sequence lengths of input `input` (n of them) against the
 * network's steps: each from 0 to steps (DLRT_E_RANGE names the first
 * other one and its sample). */
DlrtStatus dlrt_check_lengths(const int32_t *lengths, int64_t n, int64_t steps, const char *input,
                              DlrtError *err);
/* The token ids held as floats in a dataset's samples (x, count values)
 * into ids, exactly: an error names the first value that is not an integer
 * in the range of int32. */
DlrtStatus dlrt_tokens_from_floats(const float *x, int64_t count, int32_t *ids, DlrtError *err);
DlrtStatus dlrt_tokens_from_doubles(const double *x, int64_t count, int32_t *ids, DlrtError *err);
/* count random samples of the given shape, values uniform in [0, 1) and
 * labels uniform in [0, num_classes), from seed: for timing and for
 * training a network that has no dataset (its accuracy means nothing). */
DlrtStatus dlrt_dataset_synthetic(DlrtDataset *ds, int64_t count, int rank, const int64_t *dims,
                                  int32_t num_classes, uint64_t seed, DlrtError *err);
void dlrt_dataset_free(DlrtDataset *ds);
/* Labels per sample: ds->label_size, or 1 where it is 0. */
int64_t dlrt_dataset_label_size(const DlrtDataset *ds);
/* A shape as text, "[1, 28, 28]", into buf (for messages); returns buf. */
const char *dlrt_shape_text(char *buf, size_t size, const int64_t *dims, int rank);

/* ------------------------------------------------------------------------ */
/* pgm.c                                                                    */
/* ------------------------------------------------------------------------ */

/* A grayscale Netpbm image (PGM: binary P5 or ASCII P2, maxval 1 to 65535,
 * gzip-compressed or not) as a dataset of one sample of shape {1, height,
 * width} without labels; a pixel becomes value / maxval, in [0, 1], as
 * 8-bit training data scales by 1/255.  One image per file. */
DlrtStatus dlrt_load_pgm(DlrtDataset *ds, const char *path, DlrtError *err);

/* ------------------------------------------------------------------------ */
/* image.c                                                                  */
/* ------------------------------------------------------------------------ */

/* An image as floats in [0, 1] (torchvision's ToTensor), channels first. */
typedef struct DlrtImage {
    int64_t channels;   /* 1 (grayscale) or 3 (RGB) */
    int64_t height, width;
    float *data;        /* channels * height * width, a plane per channel */
} DlrtImage;

typedef enum DlrtImageFormat {
    DLRT_IMAGE_UNKNOWN,
    DLRT_IMAGE_PNG,     /* the 8-byte PNG signature */
    DLRT_IMAGE_JPEG,    /* SOI and a marker: FF D8 FF */
} DlrtImageFormat;

/* The format of a file from its first n bytes (8 suffice). */
DlrtImageFormat dlrt_image_sniff(const unsigned char *head, size_t n);
/* Decodes a PNG (gray, RGB, palette, with or without alpha, 1 to 16 bits,
 * interlaced or not) or a JPEG (baseline or progressive; gray, YCbCr or
 * CMYK) held in memory, named `name` in messages, into *img with
 * `channels` channels: 3 for RGB (PIL's convert("RGB"), as torchvision's
 * ImageFolder loads), 1 for grayscale (convert("L")), 0 for the file's own
 * (1 or 3).  Alpha is dropped.  8-bit samples scale by 1/255, 16-bit by
 * 1/65535.  A truncated or corrupt file, or one of another format, is
 * DLRT_E_FORMAT naming it; more than 2^28 pixels DLRT_E_RANGE.  On failure
 * *img is left zeroed. */
DlrtStatus dlrt_image_decode(DlrtImage *img, const unsigned char *data, size_t size,
                             const char *name, int channels, DlrtError *err);
/* dlrt_image_decode of the file at path. */
DlrtStatus dlrt_image_read(DlrtImage *img, const char *path, int channels, DlrtError *err);
/* A whole file into a new buffer (*data, free() it; at most 1 GiB). */
DlrtStatus dlrt_read_file(const char *path, unsigned char **data, size_t *size, DlrtError *err);
/* An uninitialized image of that size (DLRT_E_RANGE beyond 2^28 pixels). */
DlrtStatus dlrt_image_alloc(DlrtImage *img, int64_t channels, int64_t height, int64_t width,
                            DlrtError *err);
void dlrt_image_free(DlrtImage *img);

/* ------------------------------------------------------------------------ */
/* transform.c                                                              */
/* ------------------------------------------------------------------------ */

/* A step of a transform, torchvision's transform of the same meaning. */
typedef enum DlrtTransformKind {
    DLRT_TF_RESIZE,              /* Resize, bilinear, antialiased */
    DLRT_TF_CENTER_CROP,         /* CenterCrop (zero padding when larger) */
    DLRT_TF_RANDOM_RESIZED_CROP, /* RandomResizedCrop */
    DLRT_TF_HFLIP,               /* RandomHorizontalFlip */
    DLRT_TF_NORMALIZE,           /* Normalize */
} DlrtTransformKind;

typedef struct DlrtTransformStep {
    DlrtTransformKind kind;
    int64_t height, width;     /* the sizes: resize's width 0 means the
                                  smaller side to height */
    double scale[2], ratio[2]; /* random_resized_crop's ranges */
    double p;                  /* hflip's probability */
    int nmean, nstd;           /* normalize: 1 (every channel) or one each */
    float mean[4], std[4];
} DlrtTransformStep;

#define DLRT_MAX_TRANSFORMS 8

/* A chain of steps, applied in order. */
typedef struct DlrtTransform {
    int n;
    DlrtTransformStep step[DLRT_MAX_TRANSFORMS];
} DlrtTransform;

/* A transform from its text, as the train section writes it:
 * "resize(256) -> center_crop(224) -> normalize(mean=[0.485, 0.456, 0.406],
 * std=[0.229, 0.224, 0.225])" (steps in transform.c); "" or NULL is no
 * steps.  A mistake is DLRT_E_ARG, quoting the text. */
DlrtStatus dlrt_transform_parse(DlrtTransform *t, const char *text, DlrtError *err);
/* Applies t to *img (replacing its pixels), drawing the random steps'
 * choices from rng. */
DlrtStatus dlrt_transform_apply(const DlrtTransform *t, DlrtImage *img, DlrtRng *rng,
                                DlrtError *err);
/* Whether t has random steps (random_resized_crop, hflip). */
bool dlrt_transform_random(const DlrtTransform *t);
/* Antialiased bilinear resize of in into a new image *out. */
DlrtStatus dlrt_image_resize(const DlrtImage *in, DlrtImage *out, int64_t height, int64_t width,
                             DlrtError *err);
/* The box of in at (top, left) of height x width into a new image *out,
 * zeros where it lies outside in. */
DlrtStatus dlrt_image_crop(const DlrtImage *in, DlrtImage *out, int64_t top, int64_t left,
                           int64_t height, int64_t width, DlrtError *err);

/* ------------------------------------------------------------------------ */
/* imagefolder.c                                                            */
/* ------------------------------------------------------------------------ */

/* Images in a folder per class, as torchvision's ImageFolder reads them:
 * ROOT/CLASS/NAME.png.  Classes are the subfolders, sorted by name
 * (strcmp: Python's sorted() of the names), with labels 0..C-1; a class's
 * images are its files named *.png, *.jpg or *.jpeg (any case), sorted,
 * and subfolders below it, recursively (os.walk's order, sorted); other
 * files are skipped, as ImageFolder skips them.  Listing reads names only:
 * no image is opened until it is loaded. */
typedef struct DlrtImageFolder {
    int32_t num_classes;
    char **classes;      /* num_classes names, sorted */
    int64_t count;       /* images */
    char **paths;        /* count paths, class by class */
    int32_t *labels;     /* count labels */
} DlrtImageFolder;

/* The metadata key under which a checkpoint keeps the class names: the
 * names in label order, one a line ("\n" between them). */
#define DLRT_CLASSES_KEY "classes"

/* The train and validation images of root: root/train and root/val when
 * root has both (the validation classes must be among the training
 * ones, which give the labels), else root's own classes, of which
 * round(val_fraction * count) images, chosen by a shuffle of fixed seed,
 * are the validation set (val may be NULL with val_fraction 0; train may
 * be NULL to list the validation images only).  Errors, naming the
 * folder: no class folders, a class folder with no images (an empty
 * class, as ImageFolder refuses), a class name with a newline, a
 * validation class unknown to training, a val_fraction outside [0, 1) or
 * one that leaves either set empty.  On failure both are left zeroed. */
DlrtStatus dlrt_image_folders(DlrtImageFolder *train, DlrtImageFolder *val, const char *root,
                              double val_fraction, DlrtError *err);
void dlrt_image_folder_free(DlrtImageFolder *f);
/* The class names as a metadata value (a new string, names a line each;
 * free() it). */
char *dlrt_image_classes_text(const DlrtImageFolder *f);

/* A loader: the batches of an image folder, decoded, transformed and
 * checked against the network's input (channels x height x width) by
 * `workers` threads, up to `prefetch` batches ahead of the one being
 * used.  The order is a shuffle of the seed and the epoch (or the
 * folder's order), and each image's random choices are drawn from a
 * generator of (seed, epoch, image), so the batches are the same whatever
 * the number of workers. */
typedef struct DlrtLoader DlrtLoader;

DlrtStatus dlrt_loader_open(DlrtLoader **l, const DlrtImageFolder *f, const DlrtTransform *t,
                            int64_t channels, int64_t height, int64_t width, int64_t batch,
                            bool shuffle, uint64_t seed, int workers, int prefetch,
                            DlrtError *err);
/* Starts epoch `epoch` (0-based; open starts none: call it first). */
void dlrt_loader_start_epoch(DlrtLoader *l, int64_t epoch);
/* The next batch into x (batch * channels * height * width floats) and y
 * (batch labels); *n samples, 0 once the epoch is over.  An image that
 * cannot be loaded stops the epoch: its error names the file. */
DlrtStatus dlrt_loader_next(DlrtLoader *l, float *x, int32_t *y, int64_t *n, DlrtError *err);
/* Seconds the workers spent loading (decoding and transforming), all
 * together, and the images they loaded, since open. */
void dlrt_loader_stats(const DlrtLoader *l, double *seconds, int64_t *images);
/* Stops the workers and frees everything; NULL is fine. */
void dlrt_loader_close(DlrtLoader *l);

/* ------------------------------------------------------------------------ */
/* batch.c                                                                  */
/* ------------------------------------------------------------------------ */

/* Walks a dataset in batches, in a new seeded random order each epoch (or
 * in order).  The last batch of an epoch may be smaller.  The order of an
 * epoch is a function of the seed and the epoch's number alone, so a run
 * resumed at epoch e sees what an uninterrupted run sees. */
typedef struct DlrtBatcher {
    const DlrtDataset *ds;
    int64_t batch;     /* samples per batch */
    bool shuffle;
    uint64_t seed;     /* the run's seed, from which each epoch's comes */
    int64_t epoch;     /* the epoch being walked, 0-based */
    int64_t *order;    /* a permutation of the samples, for this epoch */
    int64_t pos;       /* next position in order */
    bool streams;      /* the samples as streams (dlrt_batcher_streams): */
    int64_t runs;      /* as many runs of consecutive samples, */
    int64_t run_len;   /* each this long but the last, which may be shorter */
    int64_t taken;     /* batches taken in this epoch */
} DlrtBatcher;

DlrtStatus dlrt_batcher_init(DlrtBatcher *b, const DlrtDataset *ds, int64_t batch,
                             bool shuffle, uint64_t seed, DlrtError *err);
/* Copies the next batch into x (batch * sample_size floats) and y (batch *
 * dlrt_dataset_label_size labels, a sample's together; either may be NULL)
 * and returns how many samples it holds: 0 once the epoch is over.  The
 * dataset must outlive the batcher. */
int64_t dlrt_batcher_next(DlrtBatcher *b, float *x, int32_t *y);
/* Walks the dataset from now on as streams, as a stateful recurrent
 * network reads a text (dlrt_text_dataset's consecutive samples): the
 * samples, in order, cut into at most `batch` runs of ceil(count / batch)
 * (the last may be shorter), row i of the k-th batch the k-th sample of
 * run i, so that each row goes on where the same row of the batch before
 * stopped.  The batches past the end of the last run leave its row out.
 * Nothing is shuffled. */
void dlrt_batcher_streams(DlrtBatcher *b);
/* Starts epoch `epoch` (0-based; init starts epoch 0), in its own order
 * when shuffling. */
void dlrt_batcher_start_epoch(DlrtBatcher *b, int64_t epoch);
/* Starts the next epoch: dlrt_batcher_start_epoch(b, b->epoch + 1). */
void dlrt_batcher_next_epoch(DlrtBatcher *b);
void dlrt_batcher_free(DlrtBatcher *b);
/* The order of n samples in epoch `epoch` that a batcher of this seed
 * walks (0..n-1 unshuffled): image loaders share it, so that the same
 * samples in the same places give the same batches. */
void dlrt_epoch_order(int64_t *order, int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

/* ------------------------------------------------------------------------ */
/* safetensors.c                                                            */
/* ------------------------------------------------------------------------ */

typedef enum DlrtDType { DLRT_F32, DLRT_F64, DLRT_I32, DLRT_I64, DLRT_U8, DLRT_I8 } DlrtDType;

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
/* text.c                                                                   */
/* ------------------------------------------------------------------------ */

/* Text for character-level language models (an embedding, recurrent
 * layers, a cross-entropy at every step).  A character is a Unicode code
 * point; the vocabulary is the distinct characters of the training text,
 * sorted by code point, with ids 0..V-1; a sample is T steps of ids and,
 * as its labels, the T characters that follow each.  A training program
 * reads:
 *
 *     DlrtText text;  DlrtVocab vocab;  DlrtDataset train, val;
 *     int32_t *ids;  int64_t n;
 *     dlrt_load_text(&text, "/usr/share/games/fortunes", 0, &err);
 *     dlrt_vocab_build(&vocab, text.data, text.size, &err);
 *     dlrt_vocab_encode(&vocab, text.data, text.size, &ids, &n, &err);
 *     dlrt_text_dataset(&train, &val, ids, n, 64, 0.1, vocab.size, &err);
 *
 * (each call checked), saves the vocabulary with its weights
 * (DlrtMeta m = dlrt_vocab_meta(&vocab), passed to the network's
 * save_with), and a program that loads the checkpoint gets it back from
 * the metadata (dlrt_vocab_from_meta) and, with new data, checks that the
 * two agree (dlrt_vocab_check): ids mean nothing under another vocabulary.
 *
 * Messages name the file or "the text", the byte offset and the character,
 * as U+XXXX followed by the character itself when it is printable:
 * "U+00E9 'é'", "U+000A". */

/* The most bytes dlrt_load_text reads unless told otherwise: 1 GiB, whose
 * dataset takes 8 GiB (a float and a label per character). */
#define DLRT_TEXT_MAX_BYTES (INT64_C(1) << 30)

/* Text in memory, as read. */
typedef struct DlrtText {
    char *data;      /* the bytes, valid UTF-8 without NUL bytes, followed
                        by a NUL */
    int64_t size;    /* bytes, the final NUL not counted */
    int64_t chars;   /* characters (code points) */
    int files;       /* the files it was read from */
} DlrtText;

/* Reads path, a file or a folder, as UTF-8 text, byte for byte: nothing is
 * normalized (line ends stay as they are, a byte order mark stays a
 * character).  A folder's text is that of the regular files directly
 * inside it, one after the other in the byte order of their names (strcmp),
 * without separators; it skips symbolic links (fortunes' NAME.u8), strfile
 * indexes (NAME.dat beside NAME, as fortune files have), names that start
 * with '.', and subfolders.  A file may be gzip-compressed (told by
 * content, as the other loaders do).  Errors, each naming the file: a path
 * that does not exist (DLRT_E_IO); no text, an empty file or a folder
 * whose files are empty or absent; a NUL byte (binary data), or gzip data
 * that fails to inflate; bytes that are not UTF-8, with the offset of the
 * first (an invalid sequence, an overlong encoding, a surrogate, a
 * character beyond U+10FFFF, a character cut short by the end of the
 * file), all DLRT_E_FORMAT; more than max_bytes of text in all
 * (DLRT_E_RANGE; 0 means DLRT_TEXT_MAX_BYTES).  On failure *text is left
 * zeroed. */
DlrtStatus dlrt_load_text(DlrtText *text, const char *path, int64_t max_bytes, DlrtError *err);
void dlrt_text_free(DlrtText *text);

/* The metadata key under which a checkpoint keeps its vocabulary. */
#define DLRT_VOCAB_KEY "vocabulary"

/* A character-level vocabulary: V distinct characters, in ascending order
 * of code point, and their ids 0..V-1.  In a checkpoint's metadata it is
 * the string of its characters in id order (utf8 below), under the key
 * "vocabulary"; safetensors' JSON escapes what JSON needs, and Python reads
 * the ids back as list(metadata["vocabulary"]). */
typedef struct DlrtVocab {
    int32_t size;          /* V, the number of characters (at least 1) */
    uint32_t *chars;       /* V code points, ascending: id i is chars[i] */
    char *utf8;            /* the V characters in id order as UTF-8,
                              NUL-terminated: the metadata's value */
    int32_t latin1[256];   /* the id of each code point below 256, -1 where
                              it is not in the vocabulary (a quick look-up
                              for most text; others are searched in chars) */
} DlrtVocab;

/* The vocabulary of size bytes of UTF-8 text: every character in it.  The
 * text must be valid UTF-8 without NUL bytes (as dlrt_load_text's is) and
 * not empty; the messages are dlrt_load_text's, about "the text".  On
 * failure *v is left zeroed. */
DlrtStatus dlrt_vocab_build(DlrtVocab *v, const char *text, int64_t size, DlrtError *err);
/* The ids of the characters of size bytes of UTF-8 text, in a new array
 * (*ids, n of them; free() it; an empty text gives n = 0).  A character
 * not in the vocabulary is DLRT_E_RANGE: "the text: U+00E9 'é' at byte 12
 * (character 10) is not in the vocabulary of 65 characters"; text that is
 * not UTF-8 is DLRT_E_FORMAT, as dlrt_vocab_build says.  On failure *ids
 * is NULL and *n 0. */
DlrtStatus dlrt_vocab_encode(const DlrtVocab *v, const char *text, int64_t size, int32_t **ids,
                             int64_t *n, DlrtError *err);
/* n ids as UTF-8 text, in a new NUL-terminated string (*text; free() it)
 * of *size bytes (size may be NULL).  An id outside 0..V-1 is
 * DLRT_E_RANGE, naming it and its position.  On failure *text is NULL. */
DlrtStatus dlrt_vocab_decode(const DlrtVocab *v, const int32_t *ids, int64_t n, char **text,
                             int64_t *size, DlrtError *err);
/* The vocabulary as a checkpoint's metadata entry, {"vocabulary",
 * v->utf8}: strings of v and a constant, valid while v is, not to be
 * freed: pass it among a save's metadata. */
DlrtMeta dlrt_vocab_meta(const DlrtVocab *v);
/* The vocabulary in a checkpoint's metadata (as dlrt_load_safetensors
 * returns it); source names the checkpoint in messages.  Errors,
 * DLRT_E_FORMAT: no "vocabulary" entry, or two; an empty value; one that
 * is not UTF-8; characters not in ascending order of code point, or one
 * given twice.  On failure *v is left zeroed. */
DlrtStatus dlrt_vocab_from_meta(DlrtVocab *v, const DlrtMeta *meta, int nmeta,
                                const char *source, DlrtError *err);
/* Checks that a checkpoint's vocabulary is the data's, character for
 * character: a network trained on one cannot read the other's ids.  A
 * difference is DLRT_E_SHAPE, with both sizes, the first id whose
 * characters differ, and the first of the data's characters that the
 * checkpoint lacks. */
DlrtStatus dlrt_vocab_check(const DlrtVocab *checkpoint, const DlrtVocab *data, DlrtError *err);
/* Frees v's arrays and zeroes it; NULL and a zeroed vocabulary are fine. */
void dlrt_vocab_free(DlrtVocab *v);

/* Datasets for next-character prediction from the n ids of a text, in
 * samples of `steps` ids: sample k has x = ids[k*steps .. k*steps+steps-1]
 * (each id as a float, exactly) and labels ids[k*steps+1 .. k*steps+steps],
 * so shape {steps}, label_size = steps and num_classes = vocab_size.  The
 * samples do not overlap: there are C = (n - 1) / steps of them, and the
 * ids past the last one's labels are dropped.  The last V =
 * round(val_fraction * C) samples (to the nearest, halves up) are the
 * validation set *val, the first C - V the training set
 * *train: the split is at a sample's boundary, so no validation input is a
 * training input and no validation label a training label (the character
 * at the boundary is the last training label and the first validation
 * input).  val may be NULL when val_fraction is 0; otherwise a fraction of
 * 0 gives it no samples.  Errors: steps < 1, a val_fraction outside [0, 1),
 * or a vocab_size outside 1..2^24 (the ids must be exact as floats)
 * (DLRT_E_ARG); an id outside 0..vocab_size-1 (DLRT_E_RANGE); too few ids
 * for one sample, for one validation sample when val_fraction > 0, or for
 * one training sample (DLRT_E_SHAPE).  On failure both datasets are left
 * zeroed. */
DlrtStatus dlrt_text_dataset(DlrtDataset *train, DlrtDataset *val, const int32_t *ids, int64_t n,
                             int64_t steps, double val_fraction, int32_t vocab_size,
                             DlrtError *err);

/* ------------------------------------------------------------------------ */
/* kernels/ (kernels.c, one .inc file per op family)                        */
/* ------------------------------------------------------------------------ */

/* What generated code calls for each op of the IR.  Tensors are dense,
 * row-major, batch first: an image batch is [n, c, h, w].  n is the
 * batch of this call; every other size is the network's, known when the
 * code was generated.  Outputs are overwritten (not accumulated into) and
 * must not alias inputs unless a kernel says so.  Semantics are PyTorch's;
 * tests/runtime checks each kernel against PyTorch and finite differences.
 * Matrix sizes go to BLAS as int: c/groups*kh*kw*oh*ow, f/groups*oh*ow,
 * n*in and n*out must each stay below 2^31. */

/* An activation applied to a kernel's output (a convolution's or a dense
 * layer's, where the fuse pass merged it), with the same results as the
 * activation's own kernel (dlrt_relu_forward, dlrt_sigmoid_forward,
 * dlrt_tanh_forward, dlrt_leaky_relu_forward with the kernel's slope,
 * dlrt_elu_forward with its alpha). */
typedef enum DlrtActivation {
    DLRT_ACT_NONE,
    DLRT_ACT_RELU,
    DLRT_ACT_SIGMOID,
    DLRT_ACT_TANH,
    DLRT_ACT_LEAKY_RELU,
    DLRT_ACT_ELU
} DlrtActivation;

/* A 2-d convolution's geometry (torch.nn.Conv2d). */
typedef struct DlrtConv {
    int64_t c, h, w;       /* input channels and size */
    int64_t f, oh, ow;     /* filters and output size */
    int64_t kh, kw;        /* kernel */
    int64_t sh, sw;        /* stride */
    int64_t ph, pw;        /* zero padding on each side */
    int64_t dh, dw;        /* dilation */
    int64_t groups;
    DlrtActivation act;    /* forward: an activation on the output (conv2d {relu=true}, ...) */
    double slope;          /* DLRT_ACT_LEAKY_RELU's, rounded to the element type */
    double alpha;          /* DLRT_ACT_ELU's, rounded to the element type */
} DlrtConv;

/* A recurrent layer's cell (torch.nn.RNN with nonlinearity tanh or relu,
 * torch.nn.LSTM, torch.nn.GRU).  Its weights are PyTorch's, G gate blocks
 * of H rows each: w_ih [G*H, input], w_hh [G*H, H], b_ih and b_hh [G*H]. */
typedef enum DlrtCell {
    DLRT_CELL_RNN_TANH, /* G = 1: h = tanh(W_ih x + b_ih + W_hh h + b_hh) */
    DLRT_CELL_RNN_RELU, /* G = 1: the same with relu */
    DLRT_CELL_LSTM,     /* G = 4, gates i, f, g, o; a cell state c beside h */
    DLRT_CELL_GRU       /* G = 3, gates r, z, n; r scales W_hn h + b_hn */
} DlrtCell;

/* One layer in one direction of a recurrent network over [n, steps, input]
 * (batch_first=True): a bidirectional or stacked network is several. */
typedef struct DlrtRnn {
    DlrtCell cell;
    int64_t steps;    /* T */
    int64_t input;    /* F: features per step */
    int64_t hidden;   /* H */
    bool reverse;     /* runs from step T-1 down to 0 (the reverse direction of a bidirectional layer) */
    bool last;        /* y is the final hidden state [n, H] instead of every step's [n, T, H] */
    bool fast;        /* f32: the cell's sigmoid and tanh vectorized, within 2.5 ulp of
                         the exact values and 15 times as fast, not libm's (the bits of
                         the standalone ops); the f64 kernels always use libm's */
} DlrtRnn;

/* Max and average pooling's geometry (torch.nn.MaxPool2d, AvgPool2d). */
typedef struct DlrtPool {
    int64_t c, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
    bool count_include_pad; /* average pooling: divide by the whole window */
    bool relu_grad;         /* max pooling backward: also the gradient of the ReLU
                               whose result x is (maxpool_grad {relu_grad=true}):
                               nothing reaches an x that is not positive; forward
                               with argmax (maxpool_train {relu_grad=true}): -1 for
                               such a maximum, which the backward then skips */
    int64_t band;           /* max pooling forward: output rows of a plane computed
                               at a time (maxpool {band=N}, the tile pass's choice
                               from the CPU's caches): N >= oh takes whole planes
                               where their loops apply; 0 lets libdlrt choose.
                               At most what its buffers of MAXPOOL_BAND elements
                               hold (kernels/pool.inc) */
} DlrtPool;

/* Local response normalization across channels (torch.nn.LocalResponseNorm,
 * Caffe's LRN across channels) over [n, c, hw]: y = x / (k + alpha/size *
 * the sum of x^2 over `size` channels centred on x's)^beta. */
typedef struct DlrtLrn {
    int64_t c, hw;      /* channels, values per channel of a sample */
    int64_t size;       /* channels in the window */
    double alpha, beta, k;
    bool relu_grad;     /* backward: through the ReLU whose result x is */
} DlrtLrn;

/* The threads the kernels may use: OpenMP's count (omp_get_max_threads,
 * which dlrt_set_threads and OMP_NUM_THREADS set), 1 in a build without
 * OpenMP.  Kernels split the batch (convolutions), the batch or the
 * features (dense layers), channels or elements among them, each worker on
 * fixed iterations, so a thread count always gives the same results. */
int dlrt_threads(void);
/* Workers (at most `threads`) for a loop of `items` iterations and `work`
 * multiply-adds in all: 1 when waking others would cost more than they
 * save.  Generated loops (a convolution computed by dlc's own code) split
 * their iterations among this many workers, statically. */
int dlrt_workers(int threads, int64_t items, int64_t work);
/* The calling worker's number inside such a loop (0 outside one). */
int dlrt_worker(void);
/* Floats of scratch memory the convolution kernels need when `threads`
 * workers run them (an im2col buffer and a partial weight gradient each);
 * the caller provides it, and passes the same `threads` to the kernels. */
int64_t dlrt_conv2d_workspace(const DlrtConv *cv, int threads);
/* Elements of scratch memory (of the kernel's element type: floats for
 * dlrt_rnn_forward, doubles for dlrt_rnn_forward_f64) that the recurrent
 * kernels need for a batch of at most n samples; the caller provides it,
 * at least 4-byte aligned (dlrt_alloc's, for speed), and passes the same
 * `threads`.  Neither depends on more than r, n and threads. */
int64_t dlrt_rnn_workspace(const DlrtRnn *r, int64_t n, int threads);
int64_t dlrt_rnn_backward_workspace(const DlrtRnn *r, int64_t n, int threads);
/* ---- kernels/int8.c, int8_conv.c: int8 inference (dlc --quantize=int8) -- */

/* An int8 convolution, or a dense layer as a 1x1 convolution of [in,1,1]
 * to [units,1,1]: x [n,c,h,w] int8, w [f,c/groups,kh,kw] int8, sums in
 * int32 (exact: c/groups * kh * kw at most 65536). */
typedef struct DlrtQConv {
    int64_t c, h, w;        /* the operand's channels, height, width */
    int64_t f, oh, ow;      /* filters, the result's height and width */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw, groups;
    bool relu;              /* requantized results clamped to 0..127 */
    bool vnni;              /* the sums by AVX-512 VNNI's vpdpbusd (the
                               operand biased by 128 to unsigned, the weights'
                               sums times 128 taken back): the same integers
                               as the portable loops; only on a CPU that has it */
    bool avx2;              /* without vnni, the sums by AVX2 (vpmaddubsw where
                               the operand is nonnegative, else vpmaddwd on
                               16 bits) where the CPU has it, else portable */
} DlrtQConv;

/* One filter's requantization: y = clamp(round((acc + bias) mult /
 * 2^shift)), the division rounded half to even, clamped to -128..127 (0..127
 * with relu). */
typedef struct DlrtRequant {
    int32_t bias;   /* the f32 bias in units of the sums' scale, rounded half to even */
    int32_t mult;   /* the multiplier scale_x scale_w / scale_y as mult / 2^shift, */
    int32_t shift;  /* mult in 2^30..2^31-1 (0 for a multiplier below 2^-62) */
} DlrtRequant;

/* The requantization of sums of scale acc_scale (scale_x scale_w[f]) with
 * the bias `bias` into results of scale out_scale, from their doubles:
 * bias = rint(bias / acc_scale), mult and shift from frexp(acc_scale /
 * out_scale).  The scales are positive and finite (checkpoints are checked
 * when loaded). */
void dlrt_requant_init(double acc_scale, double bias, double out_scale, DlrtRequant *r);
/* One sum requantized (what dlrt_qconv_s8 does to each). */
int8_t dlrt_requantize(int32_t acc, const DlrtRequant *r, bool relu);
/* Bytes of scratch memory dlrt_qconv_s8 needs on `threads` workers (the
 * packed weights, when not given, and each worker's operand), at least
 * 64-byte aligned. */
size_t dlrt_qconv_s8_work(const DlrtQConv *q, int threads);
/* Bytes of the weights as the VNNI path reads them (dlrt_qconv_s8_pack):
 * the filters' sums, then for a convolution the weights in 4-channel
 * groups. */
size_t dlrt_qconv_s8_packed(const DlrtQConv *q);
/* Packs w [f,c/groups,kh,kw] into packed (dlrt_qconv_s8_packed bytes,
 * 64-byte aligned), once for as long as the weights stay. */
void dlrt_qconv_s8_pack(const DlrtQConv *q, const int8_t *w, void *packed);
/* The convolution: with rq (one per filter), y [n,f,oh,ow] int8,
 * requantized; with rq NULL, the sums alone into acc [n,f,oh,ow] int32
 * (no bias: an f32 result's epilogue is the caller's).  packed: w packed
 * by dlrt_qconv_s8_pack, or NULL to pack it into work at this call. */
void dlrt_qconv_s8(const DlrtQConv *q, int64_t n, const int8_t *x, const int8_t *w,
                   const DlrtRequant *rq, int8_t *y, int32_t *acc, const void *packed,
                   void *work, int threads);
/* Max pooling of int8 tensors (the windows clipped to the plane, as
 * dlrt_maxpool_forward's; band and relu_grad are not read). */
void dlrt_maxpool_s8(const DlrtPool *p, int64_t n, const int8_t *x, int8_t *y);
/* The requantization of a residual addition of two int8 tensors a and b
 * of scales scale_a and scale_b into y of scale scale_y: y = clamp(round(
 * (a mult_a + b mult_b) / 2^shift)), in int64, the division rounded half to
 * even, clamped to -128..127 (0..127 with relu: the ReLU after the add). */
typedef struct DlrtQAdd {
    int32_t mult_a;  /* scale_a / scale_y as mult_a / 2^shift */
    int32_t mult_b;  /* scale_b / scale_y as mult_b / 2^shift */
    int32_t shift;   /* one shift for both: the larger multiplier in 2^30..2^31-1
                        (both 0 where it is below 2^-32; at least 0, the
                        multipliers saturated at 2^31-1 where one is 2^31 or more) */
} DlrtQAdd;

/* mult_a, mult_b and shift from the scales' doubles (positive, finite):
 * the shift from frexp of the larger ratio, each multiplier rint(ratio
 * 2^shift). */
void dlrt_qadd_init(double scale_a, double scale_b, double scale_y, DlrtQAdd *r);
/* y[i] = a[i] + b[i] in int8 (above), count elements; y may be a or b. */
void dlrt_qadd_s8(int64_t count, const int8_t *a, const int8_t *b, const DlrtQAdd *r, bool relu,
                  int8_t *y);
/* rows rows of len int8 values of x (contiguous) into y, row i at y + i
 * ld_y, each requantized by r with no ReLU (dlrt_requantize; a multiplier of
 * exactly 1 and no bias, equal scales, copies the bytes): a concatenation's
 * operand into its result's scale (dlrt_requant_init(scale_x, 0, scale_y)). */
void dlrt_requantize_rows_s8(int64_t rows, int64_t len, const int8_t *x, const DlrtRequant *r,
                             int8_t *y, int64_t ld_y);
/* Global average pooling of int8 planes of hw values (hw below 2^23): y[i]
 * = the plane's sum in int32, requantized by r (dlrt_requant_init(scale_x /
 * hw, 0, scale_y): the mean's division is in the multiplier). */
void dlrt_qglobalavgpool_s8(int64_t planes, int64_t hw, const int8_t *x, const DlrtRequant *r,
                            int8_t *y);
/* A layer's f32 weights w [f, k] (k: the rest of its dimensions) and bias
 * b [f] (NULL: none), with an inference batchnorm folded in where bn_w is
 * not NULL (scale bn_w / sqrt(bn_var + eps) per filter, shift bn_b + (b -
 * bn_mean) scale, in double), quantized per filter, symmetric: wscale[f] =
 * max |w'[f]| / 127 (1 for a filter of zeros), qw = rint(w' / wscale)
 * clamped to -127..127, qbias the folded bias.  Returns the weights' SQNR
 * in dB (w' against qw wscale; infinite where exact). */
double dlrt_quantize_weights(int64_t f, int64_t k, const float *w, const float *b,
                             const float *bn_w, const float *bn_b, const float *bn_mean,
                             const float *bn_var, double eps, int8_t *qw, float *wscale,
                             float *qbias);
/* Whether this CPU has what DlrtQConv.vnni needs (AVX-512 BW, VL and
 * VNNI), and what .avx2 does. */
bool dlrt_cpu_has_vnni(void);
bool dlrt_cpu_has_avx2(void);

/* The kernels, for float and (with the suffix _f64) for double: see
 * dlrt_kernels.h, sectioned by family.  f64 serves gradient checks by
 * finite differences. */
#define DLRT_REAL float
#define DLRT_K(f) f
#include "dlrt_kernels.h"
#undef DLRT_REAL
#undef DLRT_K
#define DLRT_REAL double
#define DLRT_K(f) f##_f64
#include "dlrt_kernels.h"
#undef DLRT_REAL
#undef DLRT_K

/* ------------------------------------------------------------------------ */
/* alloc.c                                                                  */
/* ------------------------------------------------------------------------ */

/* The alignment of dlrt_alloc's memory, in bytes: a cache line. */
#define DLRT_ALIGN 64

/* count * size bytes, zeroed, at a multiple of DLRT_ALIGN; NULL if out of
 * memory or if the size overflows.  Free it with free(). */
void *dlrt_alloc(size_t count, size_t size);

/* ------------------------------------------------------------------------ */
/* profile.c                                                                */
/* ------------------------------------------------------------------------ */

/* Where a step's time goes: rows of timed calls, printed on request.  The
 * generated CPU code keeps one when DLRT_PROFILE=1 (a row per op), the CUDA
 * back end when DLRT_CUDA_PROFILE=1 (a row per kind of launch). */
typedef struct DlrtProfile DlrtProfile;

/* A table with rows names[0, nrows) (more may be added), if the
 * environment variable `title` is "1"; otherwise, or out of memory, NULL,
 * and the caller times nothing. */
DlrtProfile *dlrt_profile_open(const char *title, int nrows, const char *const *names);
/* The row named `what`, added if new; -1 if it cannot be (out of memory). */
int dlrt_profile_row(DlrtProfile *p, const char *what);
/* One call of `seconds` in row `row` (nothing for row -1). */
void dlrt_profile_add(DlrtProfile *p, int row, double seconds);
/* One call in row `row`, from `since` (a dlrt_clock reading) to
 * now; returns now, where the next lap starts. */
double dlrt_profile_lap(DlrtProfile *p, int row, double since);
/* Seconds on a monotonic clock (CLOCK_MONOTONIC). */
double dlrt_clock(void);
/* Prints the rows that have calls on stderr, longest first (their time in
 * all, calls, share, mean and shortest call), and frees the table; nothing
 * for NULL. */
void dlrt_profile_close(DlrtProfile *p);

/* ------------------------------------------------------------------------ */
/* cuda.c                                                                   */
/* ------------------------------------------------------------------------ */

/* The GPU through the CUDA Driver API.  libcuda is loaded at run time
 * (dlopen), never linked, and no CUDA header is needed to build libdlrt:
 * the same program runs on a machine without NVIDIA's driver, where
 * dlrt_cuda_open fails with DLRT_E_DEVICE and a message that says so.
 *
 * A DlrtCuda holds the loaded driver, one device's primary context, one
 * stream and one module (the network's kernels, as PTX that the driver
 * compiles for the device).  Each call makes the object's context current
 * on the calling thread, so an object may be used from any thread (by one
 * at a time), and objects on different devices may be used in turn.  Work
 * is queued on the object's stream in order; copies and launches return
 * before the GPU is done, and a fault of a kernel may be reported by a
 * later call.  Failures are DLRT_E_DEVICE unless a function says otherwise;
 * a message names the driver call, the CUDA error (name and description)
 * and `what` the caller was doing: "cuLaunchKernel failed in op 'c1.1':
 * CUDA_ERROR_INVALID_VALUE (invalid argument)".  `what` is the caller's
 * words: "op 'c1.1'", "the activations", "the training step".
 *
 * Environment variables, read by dlrt_cuda_open:
 *   DLRT_CUDA_LIBRARY  the driver library to load (tests); libcuda.so.1
 *   DLRT_CUDA_DEVICE   the device's ordinal; without it, under mpirun (or
 *                      MPICH, or Slurm), the local rank modulo the devices;
 *                      else 0
 *   DLRT_CUDA_SYNC     1: wait for every launch to finish, so that a fault
 *                      is reported by the launch of the op that caused it
 *                      (a debugging aid: it serializes host and GPU) */

typedef struct DlrtCuda DlrtCuda;         /* the driver, a device's context, a stream
                                             and a module */
typedef void *DlrtCudaFunction;           /* a kernel of the module (a CUfunction) */
typedef unsigned long long DlrtDevicePtr; /* device memory (a CUdeviceptr); 0 is none */

/* Loads the driver, takes the device, its primary context and a new stream,
 * and loads ptx (NUL-terminated PTX text; NULL for no module, to query the
 * device or move memory only).  A PTX the driver cannot compile (for a newer
 * architecture than the device's, or a newer PTX version than the driver
 * knows) fails with the start of the compiler's log in the message.  A bad
 * DLRT_CUDA_DEVICE is DLRT_E_RANGE.  On failure *cu is NULL and nothing is
 * held.  Several objects may be open at once. */
DlrtStatus dlrt_cuda_open(DlrtCuda **cu, const char *ptx, DlrtError *err);
/* Unloads the module, destroys the stream, releases the context and the
 * driver.  Memory still allocated is the caller's to free first.  NULL is
 * fine. */
void dlrt_cuda_close(DlrtCuda *cu);
/* The device's name: "NVIDIA H100 80GB HBM3". */
const char *dlrt_cuda_device_name(const DlrtCuda *cu);
/* The compute capability as major * 10 + minor: 90 for sm_90. */
int dlrt_cuda_compute_capability(const DlrtCuda *cu);
/* The number of streaming multiprocessors (132 on an H100 SXM). */
int dlrt_cuda_multiprocessors(const DlrtCuda *cu);
/* The kernel of the module named name (its .entry); DLRT_E_ARG without a
 * module. */
DlrtStatus dlrt_cuda_function(DlrtCuda *cu, const char *name, DlrtCudaFunction *fn,
                              DlrtError *err);
/* The device's free and total memory, in bytes. */
DlrtStatus dlrt_cuda_mem_info(DlrtCuda *cu, size_t *free_bytes, size_t *total_bytes,
                              DlrtError *err);
/* bytes of device memory for what ("the activations").  A request above the
 * free memory fails with DLRT_E_NOMEM before trying, with a message giving
 * both: "the activations need 1234.5 MiB; the GPU has 800.0 MiB free of
 * 81559.0 MiB"; the driver's running out is DLRT_E_NOMEM too.  bytes == 0
 * gives *p = 0.  On failure *p = 0. */
DlrtStatus dlrt_cuda_alloc(DlrtCuda *cu, size_t bytes, DlrtDevicePtr *p, const char *what,
                           DlrtError *err);
/* 0 is fine. */
void dlrt_cuda_free(DlrtCuda *cu, DlrtDevicePtr p);
/* bytes of page-locked host memory, which copies to and from the device
 * need to be truly asynchronous (from other memory the driver copies
 * through a staging buffer first).  bytes == 0 gives *p = NULL; a failure
 * is DLRT_E_NOMEM. */
DlrtStatus dlrt_cuda_host_alloc(DlrtCuda *cu, size_t bytes, void **p, DlrtError *err);
/* NULL is fine. */
void dlrt_cuda_host_free(DlrtCuda *cu, void *p);
/* Copies bytes from host to device, device to host, or sets them to zero,
 * queued on the stream: src must stay unchanged, and dst unread, until
 * dlrt_cuda_sync.  bytes == 0 does nothing. */
DlrtStatus dlrt_cuda_upload(DlrtCuda *cu, DlrtDevicePtr dst, const void *src, size_t bytes,
                            const char *what, DlrtError *err);
/* dlrt_cuda_upload of pageable memory src through the pinned buffer
 * staging (bytes long, not in use by a queued copy): src is copied into it
 * a slice at a time, by the kernels' threads, and each slice's upload is
 * queued as soon as it is there, so that the host's copying and the
 * transfer overlap. */
DlrtStatus dlrt_cuda_upload_staged(DlrtCuda *cu, DlrtDevicePtr dst, const void *src, void *staging,
                                   size_t bytes, const char *what, DlrtError *err);
DlrtStatus dlrt_cuda_download(DlrtCuda *cu, void *dst, DlrtDevicePtr src, size_t bytes,
                              const char *what, DlrtError *err);
DlrtStatus dlrt_cuda_zero(DlrtCuda *cu, DlrtDevicePtr dst, size_t bytes, const char *what,
                          DlrtError *err);
/* Queues fn on the stream with grid x block threads and shared_bytes of
 * dynamic shared memory (above 48 KiB the function is first allowed that
 * much, up to the device's opt-in limit); args points at each kernel
 * parameter's value, as cuLaunchKernel takes them.  With DLRT_CUDA_SYNC=1
 * it waits for the kernel to finish. */
DlrtStatus dlrt_cuda_launch(DlrtCuda *cu, DlrtCudaFunction fn, const unsigned grid[3],
                            const unsigned block[3], unsigned shared_bytes, void **args,
                            const char *what, DlrtError *err);
/* Waits until everything queued on the stream is done; what ("the training
 * step") names the work in the message of a failure, which may be any
 * queued kernel's fault. */
DlrtStatus dlrt_cuda_sync(DlrtCuda *cu, const char *what, DlrtError *err);

/* A second stream and events, for work that runs beside the kernels' stream
 * and is ordered with it: data-parallel training's gradient sums on NCCL's
 * stream (runtime/program/distributed.c).  Everywhere, stream NULL is the
 * kernels' stream (the object's). */
typedef void *DlrtCudaStream;             /* a CUstream */
typedef void *DlrtCudaEvent;              /* a CUevent (without timing) */
/* Makes the object's context current on this thread, for a library that
 * works on "the current device" (NCCL). */
DlrtStatus dlrt_cuda_bind(DlrtCuda *cu, const char *what, DlrtError *err);
DlrtStatus dlrt_cuda_stream_new(DlrtCuda *cu, DlrtCudaStream *stream, const char *what,
                                DlrtError *err);
/* Waits for the stream's work, then destroys it; NULL is fine. */
void dlrt_cuda_stream_free(DlrtCuda *cu, DlrtCudaStream stream);
/* Waits until everything queued on stream is done. */
DlrtStatus dlrt_cuda_stream_sync(DlrtCuda *cu, DlrtCudaStream stream, const char *what,
                                 DlrtError *err);
DlrtStatus dlrt_cuda_event_new(DlrtCuda *cu, DlrtCudaEvent *event, const char *what,
                               DlrtError *err);
/* NULL is fine. */
void dlrt_cuda_event_free(DlrtCuda *cu, DlrtCudaEvent event);
/* The event happens when the work queued on stream so far is done. */
DlrtStatus dlrt_cuda_record(DlrtCuda *cu, DlrtCudaStream stream, DlrtCudaEvent event,
                            const char *what, DlrtError *err);
/* The work queued on stream from now on waits for the event's last record. */
DlrtStatus dlrt_cuda_wait_event(DlrtCuda *cu, DlrtCudaStream stream, DlrtCudaEvent event,
                                const char *what, DlrtError *err);
/* The host waits until the event's last record has happened (a fault
 * before it is reported here). */
DlrtStatus dlrt_cuda_event_sync(DlrtCuda *cu, DlrtCudaEvent event, const char *what,
                                DlrtError *err);

/* Graphs: the launches of a generated step recorded once and replayed with
 * one call, so that the host's cost per launch and the gaps between
 * kernels go (a CUDA graph, made by capturing the kernels' stream).
 * dlrt_cuda_graphs says whether to use them: yes unless DLRT_CUDA_GRAPHS=0,
 * DLRT_CUDA_SYNC=1 or DLRT_CUDA_PROFILE=1 (which wait after each launch).
 * Between capture_begin and capture_end the object's launches are
 * recorded, not run; capture_end with graph NULL ends a capture that
 * failed and keeps nothing.  A replay runs the launches with the argument
 * values they had when recorded. */
typedef void *DlrtCudaGraph;              /* a CUgraphExec */
bool dlrt_cuda_graphs(const DlrtCuda *cu);
DlrtStatus dlrt_cuda_capture_begin(DlrtCuda *cu, const char *what, DlrtError *err);
DlrtStatus dlrt_cuda_capture_end(DlrtCuda *cu, DlrtCudaGraph *graph, const char *what,
                                 DlrtError *err);
DlrtStatus dlrt_cuda_graph_launch(DlrtCuda *cu, DlrtCudaGraph graph, const char *what,
                                  DlrtError *err);
/* NULL is fine. */
void dlrt_cuda_graph_free(DlrtCuda *cu, DlrtCudaGraph graph);

/* ------------------------------------------------------------------------ */
/* data-parallel training: what a generated step and its reducer share      */
/* ------------------------------------------------------------------------ */

/* Types only: libdlrt has no communication of its own.  A network compiled
 * for the CPU with a training step also gets NAME_train_step_dist, the
 * step of one rank of K that each train on a part of every batch: its
 * gradients go to one buffer laid out at compile time in buckets, in the
 * order the backward pass completes them (passes/plan_buckets.c), and the
 * step hands each bucket to a reducer as soon as it is complete, lets it
 * progress between the ops that follow, and waits for each bucket's sum
 * before that bucket's updates.  The same network's GPU table has the same
 * step, its gradients in the same buckets on the device, and a reducer
 * that only queues work on streams (DlrtCudaReducer).  libdlrt_program's
 * reducers sum over MPI and, on GPUs, NCCL (runtime/program/distributed.c);
 * a product may bring its own. */

/* A bucket of the gradient buffer. */
typedef struct DlrtBucket {
    int64_t offset, count;     /* floats of the buffer */
    const char *tensors;       /* the parameters whose gradients it holds,
                                  ", " between them */
    const char *after;         /* the op after which it is complete (its row of
                                  DLRT_PROFILE, "out.grad (cross_entropy_grad,
                                  train_op8_out_grad)") */
} DlrtBucket;

/* What the step calls.  data is the bucket's place in the buffer: the sum
 * over the ranks must be there when wait returns. */
typedef struct DlrtReducer {
    void *ctx;                 /* the reducer's own */
    /* bucket `bucket` (count floats at data) is complete: start summing it */
    void (*ready)(void *ctx, int bucket, float *data, int64_t count);
    /* between ops of the backward pass: a chance to move messages on (a
       reducer that has a thread of its own does nothing) */
    void (*progress)(void *ctx);
    /* waits for the sum of bucket `bucket`; a failure (a peer gone, or too
       slow) stops the step with err */
    DlrtStatus (*wait)(void *ctx, int bucket, DlrtError *err);
} DlrtReducer;

/* The GPU's step calls these instead: the gradients are in device memory
 * and the calls only queue work.  ready is called once bucket's last
 * gradient kernel is queued on cu's stream: the sum must run after it (an
 * event), on a stream of the reducer's own, with this rank's part
 * multiplied by scale first (its rows over the batch's: the ranks' losses
 * are means over their own rows).  wait makes cu's stream wait for the sum
 * (an event back) before the bucket's updates are queued. */
typedef struct DlrtCudaReducer {
    void *ctx;                 /* the reducer's own */
    DlrtStatus (*ready)(void *ctx, DlrtCuda *cu, int bucket, DlrtDevicePtr data,
                        int64_t count, float scale, DlrtError *err);
    DlrtStatus (*wait)(void *ctx, DlrtCuda *cu, int bucket, DlrtError *err);
} DlrtCudaReducer;

/* ------------------------------------------------------------------------ */
/* program/: libdlrt_program, not libdlrt                                   */
/* ------------------------------------------------------------------------ */

/* The generated program's command line is a library of its own,
 * libdlrt_program (runtime/program/), which `dlc net.dl -o net` links
 * before libdlrt; a product that embeds a network links libdlrt alone.
 * For a classifier the generated NAME.c defines NAME_model, a DlrtModel
 * (and NAME_f64.c NAME_f64_check, a DlrtCheck): tables of its own
 * functions that use the types below and no symbol of libdlrt_program, so
 * NAME.c links with or without it.  The program's main, written by dlc,
 * passes the table to dlrt_main, libdlrt_program's entry point (the rest
 * of that library is its own: runtime/program/program.h). */

/* A network generated in f64 (dlc emits NAME_f64_check beside NAME_model
 * for a program): what the gradient check needs.  Tensors are in the same
 * order as the model's, and the same seed creates the same weights. */
typedef struct DlrtCheck {
    DlrtStatus (*create)(void **net, int64_t max_batch, uint64_t seed, DlrtError *err);
    void (*free)(void *net);
    DlrtTensor (*tensor)(void *net, int i);
    DlrtTensor (*gradient)(void *net, int i);
    DlrtStatus (*gradients)(void *net, int64_t n, const double *x, const int32_t *labels,
                            double *loss, DlrtError *err);
} DlrtCheck;

/* A size of the activations' memory, in elements: per_sample * batch + fixed. */
typedef struct DlrtPlanSize {
    int64_t per_sample, fixed;
} DlrtPlanSize;

/* The train section's images("path", val=..., train=..., eval=...): a
 * folder of images per class (dlrt_image_folders) and the transforms'
 * texts (dlrt_transform_parse). */
typedef struct DlrtImageSource {
    const char *path;          /* ROOT/CLASS/IMAGE, or ROOT/train and ROOT/val */
    double val_fraction;       /* held out where there are no train/ and val/ */
    const char *train;         /* training's transform; NULL: eval's */
    const char *eval;          /* eval's and predict's; NULL: none */
} DlrtImageSource;

/* An int8 program's calibration (dlc --quantize=int8, docs/quantization.md):
 * its table's `quant`; NULL in an f32 program.  The program holds the int8
 * network, which eval, predict and bench run, and the f32 network it came
 * from, which `calibrate` runs on data to choose the activations' scales and
 * whose weights it folds and quantizes into the int8 network's. */
typedef struct DlrtQuant {
    int ninfer;                /* the int8 network's tensors, the table's first:
                                  what an int8 checkpoint holds */
    int nscales;               /* activation scales (one per int8 tensor) */
    const int *scales;         /* each one's tensor index */
    const int64_t *observed;   /* floats per sample of the f32 tensor each
                                  scale is calibrated on */
    int nlayers;               /* int8 layers (qconv2d, qdense) */
    const char *const *layers; /* their names (the f32 weight's, less .weight) */
    const int *layer_scales;   /* 3 per layer: the tensor indices of its weight
                                  scales, operand scale and result scale (-1:
                                  none, an f32 result) */
    /* the f32 weights from a checkpoint of the f32 program (NAME.safetensors
       as `train --save` writes it) */
    DlrtStatus (*load_f32)(void *net, const char *path, DlrtError *err);
    /* the f32 network on n samples: its scores, and observed[j] the f32
       tensor of scale j (n * observed[j] floats each) */
    DlrtStatus (*calib_forward)(void *net, int64_t n, const float *x, float *scores,
                                float *const *observed, DlrtError *err);
    /* every int8 layer's weights and bias from the f32 ones (a batchnorm
       folded in): sqnr[l] gets layer l's weights' SQNR in dB */
    void (*quantize_weights)(void *net, double *sqnr);
    /* the int8 network's tensors alone, as safetensors (the weights I8) */
    DlrtStatus (*save)(const void *net, const char *path, const DlrtMeta *extra, int nextra,
                       DlrtError *err);
} DlrtQuant;

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
    int64_t classes;           /* outputs per sample, or per step (steps > 1) */
    int64_t steps;             /* labels per sample: 1 for a classifier, T for a
                                  language model's label at every step (0 reads
                                  as 1); the outputs are steps x classes */
    int64_t vocab;             /* > 0: the input is token ids below vocab, held
                                  in float datasets and passed as floats (the
                                  table's functions convert them exactly); 0:
                                  values */
    bool causal;               /* each step's outputs depend on the steps up to
                                  it only (no reversed recurrent layer): what
                                  `sample` needs to read a shorter context */
    int64_t trainable;         /* trainable parameters */
    /* the train section's defaults, which flags override */
    const char *data;          /* an IDX folder, or NULL */
    const char *text;          /* text(path): a UTF-8 file or folder, or NULL */
    double val_fraction;       /* text(val=...): the held-out end of the text */
    const DlrtImageSource *images; /* images(...), or NULL */
    int64_t batch, epochs;
    double lr;
    uint64_t seed;
    const char *schedule;      /* "constant", "step" or "cosine" */
    int64_t step_every;        /* step: epochs between decays */
    double gamma, min_lr;      /* step: the decay; cosine: the floor */
    int64_t warmup;            /* epochs of linear warm-up */
    const char *optimizer;     /* for messages: "sgd(lr=0.01, momentum=0.9)" */
    double clip;               /* the gradients' largest total norm (clip; 0: none) */
    /* the activations' memory plan (NAME_ARENA_*, NAME_NAIVE_*, NAME_LOWER_BOUND_*) */
    DlrtPlanSize arena, naive, lower_bound;
    /* the generated API */
    size_t (*memory)(int64_t max_batch);
    DlrtStatus (*create)(void **net, int64_t max_batch, uint64_t seed, DlrtError *err);
    void (*free)(void *net);
    DlrtStatus (*forward)(void *net, int64_t n, const float *x, float *out, DlrtError *err);
    /* NAME_freeze: packs the weights for forward until they may change;
       NULL where the table has none (a GPU's) */
    DlrtStatus (*freeze)(void *net, DlrtError *err);
    DlrtStatus (*train_step)(void *net, int64_t n, const float *x, const int32_t *labels,
                             float lr, float *loss, DlrtError *err);
    /* NAME_set_clip: the gradients' largest norm for the steps that follow
       (0: no clipping); NULL where the network was compiled without
       clipping (no clip in its train section) */
    void (*set_clip)(void *net, double clip);
    /* NAME_reset_state: the stateful recurrent layers' states to zero;
       NULL where the network has none.  With them, train and evaluate walk
       a text as `batch` streams, each chunk continuing the last's (row i of
       a batch goes on where row i of the last stopped). */
    void (*reset_state)(void *net);
    /* NAME_forward_step: one step of n sequences (one token id each, as a float),
       the scores of the step out, each row going on from its state; NULL
       where the network has no step form (passes/step.c).  `sample` uses
       it to generate a token at the cost of one step. */
    DlrtStatus (*forward_step)(void *net, int64_t n, const float *x, float *out,
                               DlrtError *err);
    DlrtStatus (*save)(const void *net, const char *path, const DlrtMeta *extra, int nextra,
                       DlrtError *err);
    DlrtStatus (*load)(void *net, const char *path, DlrtMeta **meta, int *nmeta,
                       DlrtError *err);
    /* parameters and buffers (ntensors), gradients of the last gradients()
       call (data NULL for a buffer), and the step without its update */
    int ntensors;
    DlrtTensor (*tensor)(void *net, int i);
    DlrtTensor (*gradient)(void *net, int i);
    DlrtStatus (*gradients)(void *net, int64_t n, const float *x, const int32_t *labels,
                            float *loss, DlrtError *err);
    /* the same network generated in f64, for gradcheck; NULL if not linked */
    const struct DlrtCheck *check;
    /* the same network on an NVIDIA GPU, with the same API (create fails
       with DLRT_E_DEVICE where there is no GPU or driver); NULL in a program
       built for the CPU alone */
    const struct DlrtModel *cuda;
    const char *device;        /* "cpu" or "cuda": which this table runs on
                                  (NULL reads as "cpu") */
    /* data-parallel training (docs/distributed.md); NULL and 0 where the
       table has no distributed step (a GPU's) */
    uint64_t hash;             /* of the network as compiled (its IR): ranks
                                  running other networks refuse to train */
    int nbuckets;              /* the gradient buffer's buckets, in the order */
    const DlrtBucket *buckets; /* the backward pass completes them */
    int64_t grad_floats;       /* the gradient buffer's size */
    /* NAME_train_step_dist: one rank's step on its n samples of a batch of
       `total` (all ranks' n added up; the loss is their mean), summing the
       gradients through r (NULL: this rank's alone) before the updates;
       n may be 0 (the rank then adds zeros) */
    DlrtStatus (*train_step_dist)(void *net, int64_t n, int64_t total, const float *x,
                                  const int32_t *labels, float lr, float *loss,
                                  const DlrtReducer *r, DlrtError *err);
    /* the GPU table's distributed step: the same, with the gradients in the
       same bucket plan on the device, summed through a DlrtCudaReducer;
       NULL in a CPU table and where the network has no distributed step */
    DlrtStatus (*train_step_dist_cuda)(void *net, int64_t n, int64_t total, const float *x,
                                       const int32_t *labels, float lr, float *loss,
                                       const DlrtCudaReducer *r, DlrtError *err);
    /* A GPU table's training step in two halves, so that the host makes
       and copies the next batch while the device runs this one
       (runtime/program/train.c): train_step_start copies the batch into
       pinned memory, queues its upload and the step and returns;
       train_step_finish waits for the oldest step started and gives its
       loss.  At most two are started and not finished, and no other call
       may come between.  NULL in a CPU table. */
    DlrtStatus (*train_step_start)(void *net, int64_t n, const float *x, const int32_t *labels,
                                   float lr, DlrtError *err);
    DlrtStatus (*train_step_finish)(void *net, float *loss, DlrtError *err);
    const char *dlc;           /* the dlc that built the program, for
                                  --version and info: "dlc 0.1.0 (commit
                                  1a2b3c4d5e6f)"; set by the main that
                                  `dlc -o` writes (NULL: not known) */
    const DlrtQuant *quant;    /* an int8 program's calibration, or NULL */
} DlrtModel;

/* The generated program's main: `train`, `eval`, `predict`, `bench`,
 * `gradcheck`, `check` and `info`, with --help and --version
 * (runtime/program/program.c).
 * Returns the exit status: 0 on success, 1 on errors in data, files or
 * training, 2 on bad usage. */
int dlrt_main(int argc, char **argv, const DlrtModel *model);

#ifdef __cplusplus
}
#endif

#endif /* DLRT_H */
