/* codegen.h — code generators.  Each target is a table of functions
 * (QBE's Target, amd64/targ.c) registered by name in codegen.c; the driver
 * looks one up and hands it a module that has been through the pipeline.
 * Targets read the IR and write files; they never change the module. */
#ifndef DLC_CODEGEN_H
#define DLC_CODEGEN_H

#include "../ir/ir.h"
#include "../passes/passes.h"

/* How a target writes its files. */
/* How the GPU's matrix products multiply (--gpu-math).  The tensor-core
 * kinds need sm_80 or later; every kind sums in f32. */
typedef enum DlcGpuMath {
    DLC_GPU_MATH_F32,  /* FMA on the CUDA cores */
    DLC_GPU_MATH_TF32, /* tensor cores, operands rounded to TF32 (10-bit mantissa) */
    DLC_GPU_MATH_BF16, /* tensor cores, operands rounded to bf16 (7-bit mantissa) */
} DlcGpuMath;

typedef struct DlcEmitOptions {
    DlcDType dtype;     /* the element type of the generated code: DLC_F32, or
                           DLC_F64 for exact gradient checks */
    const char *suffix; /* appended to each network's name in file and
                           function names ("_f64": lenet5_f64.c, lenet5_f64_create),
                           so that two generations link into one program */
    bool plan_memory;   /* share memory between values that are not live at the
                           same time (passes/plan_memory.c); false gives each
                           value a slot of its own */
    bool cuda;          /* cpu: the program also has NAME_cuda.c (the nvptx
                           target's), which NAME_model points to */
    const char *gpu_arch; /* nvptx: the GPU architecture, "sm_80" */
    DlcGpuMath gpu_math;  /* nvptx: the matrix products' arithmetic (--gpu-math) */
    int64_t bucket_bytes; /* cpu: the largest gradient bucket of data-parallel
                             training (--bucket-size); 0 chooses
                             (passes/plan_buckets.h) */
} DlcEmitOptions;

/* What --autotune tells a target (the driver fills it in). */
typedef struct DlcAutotuneOptions {
    const char *cache;      /* the cache file (read if it exists, then rewritten) */
    DlcTargetCpu cpu;       /* the CPU the passes chose for (--target-cpu over
                               this one's) */
    const char *const *cc;  /* the compiler and its flags, as the program's
                               build runs them, NULL-terminated */
    const char *const *libs; /* what follows the sources on that command line:
                                libdlrt and its libraries, NULL-terminated */
} DlcAutotuneOptions;

typedef struct DlcTarget {
    const char *name;      /* the device, as in --target= ("cpu", "cuda") */
    const char *emit_kind; /* the --emit= kind of its code alone ("c", "ptx") */
    const char *summary;   /* for --help */
    /* The passes the module must have been through, NULL-terminated, beyond
       the default pipeline (autodiff and optimizer, for training). */
    const char *const *passes;
    /* Writes the target's files for m into the folder dir (which exists):
       what --emit=c writes and a program is built from.  Reports errors
       through ctx and returns false after any. */
    bool (*emit)(DlcCtx *ctx, const DlcModule *m, const DlcEmitOptions *opt, const char *dir);
    /* --emit=KIND -o FILE: the target's code as one file for inspection
       ("-": standard output); NULL for a target whose code is a folder. */
    bool (*emit_file)(DlcCtx *ctx, const DlcModule *m, const DlcEmitOptions *opt,
                      const char *path);
    /* Whether net of m can be a program (--emit=exe): the table dlrt_main
       drives; NULL for a target that is not the program's host. */
    bool (*is_program)(const DlcModule *m, const DlcNetwork *net);
    /* Whether arch names an architecture the target generates code for
       (--gpu-arch); NULL for a target that takes none. */
    bool (*arch_ok)(const char *arch);
    /* --autotune: times candidate register blocks of m's ops on this machine
       and sets each op's tile to the fastest, through the cache; NULL for a
       target that has none.  The one entry that changes the module: the
       driver calls it after the passes and before emit. */
    bool (*autotune)(DlcCtx *ctx, DlcModule *m, const DlcAutotuneOptions *opt);
} DlcTarget;

/* codegen.c: the targets, by device name (--target=) or by the --emit=
 * kind of their own code; NULL if there is none. */
const DlcTarget *dlc_target_lookup(const char *name);
const DlcTarget *dlc_target_for_emit(const char *kind);

/* The targets themselves, which only codegen.c's table names. */
extern const DlcTarget dlc_target_cpu;   /* cpu/cpu.c */
extern const DlcTarget dlc_target_nvptx; /* nvptx/nvptx.c */
/* cpu/cpu.c: the C target's pipeline (after the default one), which the
 * nvptx target shares: both generate code from the same IR. */
extern const char *const dlc_cpu_passes[];
/* cpu/autotune.c: the CPU target's autotune. */
bool dlc_cpu_autotune(DlcCtx *ctx, DlcModule *m, const DlcAutotuneOptions *opt);

#endif /* DLC_CODEGEN_H */
