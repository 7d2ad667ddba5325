/* codegen.h — code generators.  Each target is a table of functions
 * (QBE's Target, amd64/targ.c) registered by name in codegen.c; the driver
 * looks one up and hands it a module that has been through the pipeline.
 * Targets read the IR and write files; they never change the module. */
#ifndef DLC_CODEGEN_H
#define DLC_CODEGEN_H

#include "../ir/ir.h"

/* How a target writes its files. */
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
    bool gpu_tf32;        /* nvptx: matrix products on the tensor cores, with
                             TF32 operands (--gpu-math=tf32; sm_80 and later) */
} DlcEmitOptions;

typedef struct DlcTarget {
    const char *name;    /* as in --emit= */
    const char *summary; /* for --help */
    /* The passes the module must have been through, NULL-terminated, beyond
       the default pipeline (cpu: autodiff and optimizer, for training). */
    const char *const *passes;
    /* Writes the target's files for m into the folder dir (which exists).
       Reports errors through ctx and returns false after any. */
    bool (*emit)(DlcCtx *ctx, const DlcModule *m, const DlcEmitOptions *opt, const char *dir);
} DlcTarget;

/* codegen.c */
const DlcTarget *dlc_target_lookup(const char *name);

/* cpu/cpu.c */
extern const DlcTarget dlc_target_cpu;
/* Whether the CPU target emits NAME_model for net, the table dlrt_main
 * drives: a classifier with its training step (after autodiff and
 * optimizer). */
bool dlc_cpu_is_program(const DlcModule *m, const DlcNetwork *net);
/* The C target's pipeline (after the default one), which the nvptx target
 * shares: both generate code from the same IR. */
extern const char *const dlc_cpu_passes[];

/* nvptx/nvptx.c */
extern const DlcTarget dlc_target_nvptx;
/* Whether arch is a GPU architecture the NVPTX target knows ("sm_90"). */
bool dlc_nvptx_arch_ok(const char *arch);
/* --emit=ptx: the kernels of m's one network (and its training step) as
 * PTX for arch, into path ("-": standard output). */
bool dlc_nvptx_emit_ptx(DlcCtx *ctx, const DlcModule *m, const DlcEmitOptions *opt, const char *path);

#endif /* DLC_CODEGEN_H */
