/* nvptx.c — the GPU target: PTX through LLVM's NVPTX backend, and the C
 * that runs it.
 *
 * For a network NAME (and NAME.train) it builds one LLVM module holding a
 * kernel (or two) per op of both networks (kernels.c), runs LLVM's O3
 * pipeline on it, asks the NVPTX backend for PTX for the chosen
 * architecture (sm_80 unless --gpu-arch says otherwise), and writes
 * NAME_cuda.c: the PTX as a string, and NAME_cuda_model, a DlrtModel
 * whose functions run the network on the GPU through libdlrt's CUDA
 * layer (runtime/cuda.c: the driver loaded with dlopen, so the program
 * still runs where there is none).
 *
 * The GPU network keeps its parameters, optimizer state and activations
 * on the device for the whole run, at the offsets the CPU code uses (the
 * same memory plan, the same parameter block).  Its host side is a CPU
 * network of batch 1 (NAME_create): the same initialization from the
 * seed, and the home of the parameters for checkpoints and inspection,
 * which are copied back from the device when asked for.  Batches go up
 * through pinned buffers; kernels run in order on one stream; every
 * driver call is checked and a failure names the op.
 *
 * Preconditions: the module verifies and has been through the C target's
 * pipeline (the same IR feeds both targets). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "../codegen.h"
#include "../cpu/out.h"
#include "../../passes/plan_buckets.h"
#include "../../passes/plan_memory.h"
#include "nvptx.h"

/* The PTX version each architecture needs at least (LLVM 16 defaults to
 * 6.0, too old for sm_80 and later). */
static const char *ptx_features(const char *arch) {
    int sm = atoi(arch + 3);
    if (sm >= 89)
        return "+ptx78";
    if (sm >= 86)
        return "+ptx71";
    if (sm >= 80)
        return "+ptx70";
    return "+ptx64";
}

static bool nvptx_arch_ok(const char *arch) {
    static const char *const known[] = {"sm_60", "sm_61", "sm_70", "sm_75", "sm_80",
                                        "sm_86", "sm_87", "sm_89", "sm_90", NULL};
    for (int i = 0; known[i]; i++)
        if (strcmp(arch, known[i]) == 0)
            return true;
    return false;
}

/* ---- the kernels of a network and its training step -------------------------- */

typedef struct Gpu {
    DlcCtx *ctx;
    const DlcModule *m;
    const DlcNetwork *infer, *train;
    DlcArena arena;
    NvKernels nk;
    int first_train;           /* the first launch of the training step */
    char *ptx;                 /* malloc'd */
    LLVMContextRef llvm;
    LLVMModuleRef mod;
    const DlcBucketPlan *dist; /* while the distributed step is written: its
                                  gradients live in net->grads, in this plan */
    int64_t *step_at;          /* [launch * 4 + scalar]: the byte offset of a
                                  step scalar's slot in the step values */
    int64_t step_bytes;        /* the step values' size */
} Gpu;

static bool build_kernels(Gpu *g) {
    bool ok = true;
    const DlcNetwork *nets[2] = {g->infer, g->train};
    const char *tags[2] = {"infer", "train"};
    for (int k = 0; k < 2; k++) {
        if (k == 1)
            g->first_train = g->nk.nlaunches;
        for (int i = 0; nets[k] && i < nets[k]->nops; i++) {
            char tag[64];
            snprintf(tag, sizeof tag, "%s_op%d", tags[k], i);
            ok &= nv_op_kernels(&g->nk, nets[k]->ops[i], tag);
        }
    }
    return ok;
}

/* LLVM IR to PTX: verify, optimize, emit. */
static bool to_ptx(Gpu *g, const char *arch) {
    static bool initialized;
    if (!initialized) {
        LLVMInitializeNVPTXTargetInfo();
        LLVMInitializeNVPTXTarget();
        LLVMInitializeNVPTXTargetMC();
        LLVMInitializeNVPTXAsmPrinter();
        initialized = true;
    }
    const char *triple = "nvptx64-nvidia-cuda";
    char *msg = NULL;
    /* the kernels' LLVM IR as built, for tests/gpu/Inputs/emu, which runs
       them on the CPU where there is no GPU */
    const char *ll = getenv("DLC_NVPTX_DUMP_LL");
    if (ll && *ll && LLVMPrintModuleToFile(g->mod, ll, &msg)) {
        dlc_error(g->ctx, DLC_NOLOC, "nvptx: cannot write %s: %s", ll, msg);
        LLVMDisposeMessage(msg);
        return false;
    }
    if (LLVMVerifyModule(g->mod, LLVMReturnStatusAction, &msg)) {
        fprintf(stderr, "%s\n", msg);
        LLVMDisposeMessage(msg);
        dlc_unreachable("nvptx: the kernels' LLVM IR does not verify");
    }
    LLVMDisposeMessage(msg);
    LLVMTargetRef target;
    if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
        dlc_error(g->ctx, DLC_NOLOC, "nvptx: LLVM has no NVPTX backend: %s", msg);
        LLVMDisposeMessage(msg);
        return false;
    }
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, arch, ptx_features(arch),
                                                      LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                                      LLVMCodeModelDefault);
    LLVMSetTarget(g->mod, triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(g->mod, layout);
    LLVMDisposeTargetData(layout);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(g->mod, "default<O3>", tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (e) {
        char *text = LLVMGetErrorMessage(e);
        dlc_error(g->ctx, DLC_NOLOC, "nvptx: LLVM's optimizer failed: %s", text);
        LLVMDisposeErrorMessage(text);
        LLVMDisposeTargetMachine(tm);
        return false;
    }
    LLVMMemoryBufferRef buf;
    bool ok = !LLVMTargetMachineEmitToMemoryBuffer(tm, g->mod, LLVMAssemblyFile, &msg, &buf);
    if (ok) {
        size_t len = LLVMGetBufferSize(buf);
        g->ptx = malloc(len + 1);
        memcpy(g->ptx, LLVMGetBufferStart(buf), len);
        g->ptx[len] = 0;
        LLVMDisposeMemoryBuffer(buf);
    } else {
        dlc_error(g->ctx, DLC_NOLOC, "nvptx: the NVPTX backend failed: %s", msg);
        LLVMDisposeMessage(msg);
    }
    LLVMDisposeTargetMachine(tm);
    return ok;
}

static bool gpu_init(Gpu *g, DlcCtx *ctx, const DlcModule *m, const DlcNetwork *net,
                     const DlcEmitOptions *opt) {
    *g = (Gpu){.ctx = ctx, .m = m, .infer = net};
    char train_name[512];
    snprintf(train_name, sizeof train_name, "%s.train", net->name);
    g->train = dlc_module_find_network(m, train_name);
    g->llvm = LLVMContextCreate();
    g->mod = LLVMModuleCreateWithNameInContext(net->name, g->llvm);
    g->nk.arena = &g->arena;
    g->nk.ctx = ctx;
    g->nk.multiprocessors = 132; /* an H100's; the split of weight gradients aims at it */
    g->nk.math = opt->gpu_math;
    const char *tile = getenv("DLC_NVPTX_TILE");
    g->nk.big_tiles = tile && strcmp(tile, "128") == 0;
    g->nk.sm = atoi(opt->gpu_arch + 3);
    kb_init(&g->nk.kb, g->llvm, g->mod);
    bool ok = build_kernels(g);
    return ok && to_ptx(g, opt->gpu_arch);
}

static void gpu_free(Gpu *g) {
    kb_dispose(&g->nk.kb);
    LLVMDisposeModule(g->mod);
    LLVMContextDispose(g->llvm);
    free(g->ptx);
    dlc_arena_free(&g->arena);
}

/* ---- output ------------------------------------------------------------------ */

/* The generated C is written as the C target writes its own (out.h), and
 * each output file through dlc_write_file. */
#define put dlc_cpu_put

/* ---- --emit=ptx ---------------------------------------------------------------- */

static bool nvptx_emit_ptx(DlcCtx *ctx, const DlcModule *m, const DlcEmitOptions *opt, const char *path) {
    const DlcNetwork *net = NULL;
    int count = 0;
    for (int i = 0; i < m->nnetworks; i++)
        if (!dlc_is_derived_network(m->networks[i]->name)) {
            net = net ? net : m->networks[i];
            count++;
        }
    if (count != 1) {
        dlc_error(ctx, DLC_NOLOC, "--emit=ptx writes the kernels of one network; the input has %d",
                  count);
        return false;
    }
    Gpu g;
    bool ok = gpu_init(&g, ctx, m, net, opt);
    if (ok)
        ok = strcmp(path, "-") == 0 ? fputs(g.ptx, stdout) >= 0 : dlc_write_file(ctx, path, g.ptx, strlen(g.ptx));
    gpu_free(&g);
    return ok;
}

/* ---- the generated C --------------------------------------------------------------- */

/* Every parameter and buffer in the order of the CPU target's parameter
 * block (cpu.c: the network's, then those only the training step has),
 * with their offsets; NAME_cuda_create checks at run time that the CPU
 * code agrees. */
typedef struct Params {
    DlcMap off;             /* name -> offset + 1 */
    const DlcValue **order; /* in block order: tensor i of the API */
    int count, cap;
    int64_t floats;
} Params;

static void add_params(DlcArena *arena, Params *p, const DlcNetwork *net) {
    for (int i = 0; net && i < net->nparams; i++) {
        const DlcValue *v = net->params[i];
        if (dlc_map_get(&p->off, v->name))
            continue;
        dlc_map_put(&p->off, v->name, (void *)(intptr_t)(p->floats + 1));
        p->floats += dlc_plan_elements(v);
        DLC_PUSH(arena, p->order, p->count, p->cap, v);
    }
}

/* The device address of value v (in bytes from the named base). */
static const char *device_ptr(Gpu *g, const Params *pp, const DlcMemPlan *plan, const DlcValue *v) {
    const DlcBucketGrad *bg = g->dist ? dlc_bucket_of_value(g->dist, v) : NULL;
    if (bg) /* the distributed step: a gradient where its bucket holds it */
        return dlc_arena_printf(&g->arena, "net->grads + 4u * %lld", (long long)bg->offset);
    switch (v->kind) {
    case DLC_VAL_PARAM:
        return dlc_arena_printf(&g->arena, "net->params + 4u * %lld",
                                (long long)((intptr_t)dlc_map_get(&pp->off, v->name) - 1));
    case DLC_VAL_INPUT:
        /* the network's input (token ids too), or the training step's labels */
        return strcmp(v->name, g->infer->inputs[0]->name) == 0 ? "net->x" : "net->labels";
    case DLC_VAL_OP: {
        int64_t off = dlc_plan_offset(plan, v);
        if (v->type.batched)
            return dlc_arena_printf(&g->arena, "net->act + 4u * (%lld * net->max_batch)", (long long)off);
        return dlc_arena_printf(&g->arena, "net->act + 4u * (%lld * net->max_batch + %lld)",
                                (long long)plan->size[0], (long long)off);
    }
    }
    return "0";
}

/* The index of op in net. */
static int op_index(const DlcNetwork *net, const DlcOp *op) {
    int index = 0;
    while (net->ops[index] != op)
        index++;
    return index;
}

/* Launch k, as a block of statements; `guard` puts an update's (or
 * clipping's) under `if (update)`: the step without it skips both. */
static void put_launch(Gpu *g, Out *o, const Params *pp, const DlcMemPlan *plan, int k,
                       bool guard) {
    const NvLaunch *l = &g->nk.launches[k];
    const DlcOp *op = l->op;
    bool in_update = guard && (dlc_op_is_update(op->kind) || dlc_op_is_clip(op->kind));
    put(o, "    %s{ /* %s */\n", in_update ? "if (update) " : "", dlc_op_info(op->kind)->name);
    for (int i = 0; i < l->nptrs; i++) {
        int s = l->ptrs[i];
        bool ws_start = l->ws_per_n[i] == 0 && l->ws_fixed[i] == 0;
        const char *at = s == NV_WORKSPACE
                             ? ws_start ? "net->work"
                                        : dlc_arena_printf(&g->arena, "net->work + 4u * (%lld * net->max_batch + %lld)",
                                                           (long long)l->ws_per_n[i], (long long)l->ws_fixed[i])
                         : s >= NV_RESULT ? device_ptr(g, pp, plan, op->out[s - NV_RESULT])
                                          : device_ptr(g, pp, plan, op->in[s]);
        put(o, "        DlrtDevicePtr p%d = %s;\n", i, at);
    }
    for (int i = 1; i < l->nscalars; i++) {
        int s = l->scalars[i];
        if (s == NV_SC_LOOP)
            put(o, "        int32_t s%d = loop;\n", i);
        else /* a step scalar: its slot, which put_step_values fills */
            put(o, "        DlrtDevicePtr s%d = net->steps + %lld;\n", i, (long long)g->step_at[k * 4 + i]);
    }
    put(o, "        void *args[] = {");
    for (int i = 0; i < l->nptrs; i++)
        put(o, "&p%d, ", i);
    put(o, "&n32");
    for (int i = 1; i < l->nscalars; i++)
        put(o, ", &s%d", i);
    put(o, "};\n");
    put(o, "        int64_t items = %lld * n + %lld;\n", (long long)l->gx_per_n, (long long)l->gx_fixed);
    put(o, "        const unsigned grid[3] = {(unsigned)((items + %lld) / %lld), %lld, %lld};\n",
        (long long)(l->gx_div - 1), (long long)l->gx_div, (long long)l->gy, (long long)l->gz);
    put(o, "        const unsigned block[3] = {%d, 1, 1};\n", l->block);
    /* what the launch is for, in messages and profiles: "c1.1 (conv2d, kernel train_op0)" */
    const char *name = op->nout ? op->out[0]->name : dlc_op_info(op->kind)->name;
    put(o, "        if (grid[0] > 0 && (st = dlrt_cuda_launch(net->cu, net->fn[%d], grid, block, 0, args, \"%s (%s, kernel %s)\", err)))\n"
           "            return st;\n    }\n", k, name, dlc_op_info(op->kind)->name, l->kernel);
}

/* Gives each step scalar of every launch (nv_step_scalar: the learning
 * rate, Adam's step, dropout's seed, the clipping norm) a slot of 8 bytes
 * in the step values, which the host fills and uploads before the launches
 * (put_step_values), so that a graph of them stays valid from step to step. */
static void place_step_values(Gpu *g) {
    g->step_at = dlc_arena_alloc(&g->arena, sizeof *g->step_at * 4 * (size_t)(g->nk.nlaunches + 1));
    g->step_bytes = 0;
    for (int k = 0; k < g->nk.nlaunches; k++)
        for (int i = 1; i < g->nk.launches[k].nscalars; i++)
            if (nv_step_scalar(g->nk.launches[k].scalars[i])) {
                g->step_at[k * 4 + i] = g->step_bytes;
                g->step_bytes += 8;
            }
}

/* The step values of launches [first, end), written into the pinned copy
 * and uploaded: what each launch used to take by value. */
static void put_step_values(Gpu *g, Out *o, const DlcNetwork *net, int first, int end) {
    int64_t lo = -1, hi = 0;
    for (int k = first; k < end; k++) {
        const NvLaunch *l = &g->nk.launches[k];
        const DlcOp *op = l->op;
        for (int i = 1; i < l->nscalars; i++) {
            int s = l->scalars[i];
            if (!nv_step_scalar(s))
                continue;
            const char *v = s == NV_SC_SEED ? dlc_arena_printf(&g->arena, "uint64_t v = dlrt_rng_derive(net->seed, (uint64_t)net->step, %d)", op_index(net, op))
                          : op->in[s - NV_SCALAR]->type.dtype == DLC_I32 ? "int32_t v = net->step"
                          : op->kind == DLC_OP_CLIP_NORM /* its largest norm, kept by the host's network */
                              ? dlc_arena_printf(&g->arena, "float v = %s_clip(net->host)", g->infer->name)
                              : "float v = lr";
            int64_t at = g->step_at[k * 4 + i];
            put(o, "    { %s; memcpy(net->pinned_steps + %lld, &v, sizeof v); }\n", v, (long long)at);
            lo = lo < 0 || at < lo ? at : lo;
            hi = at + 8 > hi ? at + 8 : hi;
        }
    }
    if (lo >= 0)
        put(o, "    DlrtStatus up = dlrt_cuda_upload(net->cu, net->steps + %lld, net->pinned_steps + %lld, %lld, \"the step's values\", err);\n"
               "    if (up)\n        return up;\n", (long long)lo, (long long)lo, (long long)(hi - lo));
}

/* The launches of one network, in order, as a function (launches_TAG), and
 * run_TAG: the step values, then the launches, replayed from a graph where
 * graphs are used (replay). */
static void put_run(Gpu *g, Out *o, const Params *pp, const DlcNetwork *net, const DlcMemPlan *plan,
                    int first, int end, const char *tag, bool train) {
    put(o, "\nstatic DlrtStatus launches_%s(%sCuda *net, int64_t n, bool update, DlrtError *err) {\n"
           "    int32_t n32 = (int32_t)n;\n    DlrtStatus st;\n    (void)update;\n", tag, g->infer->name);
    int loop_end = -1; /* the last launch of the loop being written */
    for (int k = first; k < end; k++) {
        const NvLaunch *l = &g->nk.launches[k];
        if (l->loop_steps > 0) { /* a recurrent layer's steps, one after the other */
            put(o, "    for (int32_t loop = 0; loop < %lld; loop++) {\n", (long long)l->loop_steps);
            loop_end = k + l->loop_len - 1;
        }
        put_launch(g, o, pp, plan, k, train);
        if (k == loop_end)
            put(o, "    }\n");
    }
    put(o, "    return DLRT_OK;\n}\n");
    put(o, "\nstatic DlrtStatus run_%s(%sCuda *net, int64_t n%s, DlrtError *err) {\n%s", tag,
        g->infer->name, train ? ", bool update, float lr" : "", train ? "    (void)lr;\n" : "");
    put_step_values(g, o, net, first, end);
    if (train)
        put(o, "    return replay(net, update ? GRAPH_UPDATE : GRAPH_GRADIENTS, n, update, launches_%s, err);\n}\n", tag);
    else
        put(o, "    return replay(net, GRAPH_INFER, n, false, launches_%s, err);\n}\n", tag);
}

/* ---- data-parallel training: the step of one rank ---------------------------------- */

/* Whether op belongs to the update phase, which runs once the sums are
 * there: updates and clipping (which needs every gradient's sum); as the
 * CPU's distributed step (codegen/cpu/cpu.c) has it. */
static bool dist_deferred(const DlcOp *op) {
    return dlc_op_is_update(op->kind) || dlc_op_is_clip(op->kind) ||
           op->kind == DLC_OP_PARAM_GRAD;
}

/* The update phase's launches of bucket `bucket`'s updates, in order; -1:
 * those of no bucket (with clipping, all of them, after every sum). */
static void put_updates(Gpu *g, Out *o, const Params *pp, const DlcMemPlan *plan, int bucket,
                        bool clips) {
    for (int k = g->first_train; k < g->nk.nlaunches; k++) {
        const DlcOp *op = g->nk.launches[k].op;
        const DlcBucketGrad *bg = dlc_bucket_of_update(g->dist, op);
        if (!dist_deferred(op))
            continue;
        bool mine = bucket >= 0 ? !clips && bg && bg->bucket == bucket : clips || !bg;
        if (mine)
            put_launch(g, o, pp, plan, k, false);
    }
}

/* run_dist: the training step's launches with every gradient in its bucket
 * of net->grads (the CPU's plan, passes/plan_buckets.c).  After the last
 * launch of the op that completes a bucket, r->ready queues its sum behind
 * the kernels queued so far; before a bucket's updates, r->wait makes the
 * stream wait for it.  Nothing here blocks: the host queues the whole step
 * and the GPU overlaps each bucket's sum with the backward pass after it. */
static void put_run_dist(Gpu *g, Out *o, const Params *pp, const DlcNetwork *net,
                         const DlcMemPlan *plan, const DlcBucketPlan *bp) {
    g->dist = bp;
    bool clips = false;
    for (int i = 0; i < net->nops; i++)
        clips |= dlc_op_is_clip(net->ops[i]->kind);
    put(o, "\nstatic DlrtStatus run_dist(%sCuda *net, int64_t n, float lr, float scale,\n"
           "                           const DlrtCudaReducer *r, DlrtError *err) {\n"
           "    int32_t n32 = (int32_t)n;\n    DlrtStatus st;\n", g->infer->name);
    put_step_values(g, o, net, g->first_train, g->nk.nlaunches);
    put(o, "    if (n == 0) { /* no sample for this rank: it adds zeros */\n"
           "        if ((st = dlrt_cuda_zero(net->cu, net->grads, sizeof(float) * GRAD_FLOATS, \"the gradients\", err)))\n"
           "            return st;\n"
           "        for (int b = 0; r && b < NBUCKETS; b++)\n"
           "            if ((st = r->ready(r->ctx, net->cu, b, net->grads + 4u * DIST_PLAN[b][0], DIST_PLAN[b][1], scale, err)))\n"
           "                return st;\n"
           "    } else {\n");
    int loop_end = -1;
    bool *due = calloc((size_t)bp->nbuckets + 1, sizeof *due); /* complete, not yet handed over */
    for (int k = g->first_train; k < g->nk.nlaunches; k++) {
        const NvLaunch *l = &g->nk.launches[k];
        if (l->loop_steps > 0) {
            put(o, "    for (int32_t loop = 0; loop < %lld; loop++) {\n", (long long)l->loop_steps);
            loop_end = k + l->loop_len - 1;
        }
        if (!dist_deferred(l->op))
            put_launch(g, o, pp, plan, k, false);
        if (k == loop_end)
            put(o, "    }\n");
        bool last = k + 1 == g->nk.nlaunches || g->nk.launches[k + 1].op != l->op;
        for (int b = 0; last && b < bp->nbuckets; b++)
            due[b] |= bp->buckets[b].ready == op_index(net, l->op);
        if (loop_end >= k && k != loop_end)
            continue; /* inside a recurrent layer's loop: after it */
        for (int b = 0; b < bp->nbuckets; b++)
            if (due[b]) {
                put(o, "    if (r && (st = r->ready(r->ctx, net->cu, %d, net->grads + 4u * %lld, %lld, scale, err))) /* bucket %d is complete */\n"
                       "        return st;\n", b, (long long)bp->buckets[b].offset,
                    (long long)bp->buckets[b].count, b);
                due[b] = false;
            }
    }
    free(due);
    put(o, "    }\n");
    /* the update phase: each bucket's updates behind its sum; with
       clipping, all of them behind every sum */
    for (int b = 0; b < bp->nbuckets; b++) {
        put(o, "    if (r && (st = r->wait(r->ctx, net->cu, %d, err)))\n        return st;\n", b);
        put_updates(g, o, pp, plan, b, clips);
    }
    put_updates(g, o, pp, plan, -1, clips);
    put(o, "    return DLRT_OK;\n}\n");
    g->dist = NULL;
}

/* The input's values per sample: floats, or token ids (i32, as many). */
static int64_t max_input_floats(const DlcNetwork *net) {
    const DlcValue *in = net->ninputs ? net->inputs[0] : NULL;
    return in && in->type.batched ? dlc_type_numel(&in->type) : 0;
}

/* The vocabulary of the embeddings that read input `in` (the smallest), or
 * 0 when `in` holds values, not token ids. */
static int64_t token_vocab(const DlcNetwork *net, const DlcValue *in) {
    int64_t vocab = 0;
    for (int i = 0; in->type.dtype == DLC_I32 && i < net->nops; i++) {
        const DlcOp *op = net->ops[i];
        if (op->kind != DLC_OP_EMBEDDING || !dlc_op_reads(op, in))
            continue;
        int64_t v = dlc_attr_int(op, DLC_A_VOCAB);
        vocab = vocab == 0 || v < vocab ? v : vocab;
    }
    return vocab;
}

/* The training step's labels per sample: 1, or a language model's one per
 * step (labels i32[T]). */
static int64_t labels_per_sample(const DlcNetwork *tn, const DlcValue *input) {
    for (int i = 0; tn && i < tn->ninputs; i++) {
        const DlcValue *v = tn->inputs[i];
        if (v->type.batched && strcmp(v->name, input->name) != 0)
            return v->type.rank ? dlc_type_numel(&v->type) : 1;
    }
    return 1;
}

/* The largest tensor, per sample and fixed, for the 32-bit index check. */
static void largest(const DlcNetwork *net, int64_t *per, int64_t *fix) {
    for (int i = 0; net && i < net->nops; i++)
        for (int r = 0; r < net->ops[i]->nout; r++) {
            const DlcValue *v = net->ops[i]->out[r];
            int64_t e = dlc_type_numel(&v->type);
            if (v->type.batched && e > *per)
                *per = e;
            if (!v->type.batched && e > *fix)
                *fix = e;
        }
}

static bool emit_host(Gpu *g, const DlcEmitOptions *opt, const char *dir) {
    const DlcNetwork *net = g->infer, *tn = g->train;
    const char *p = net->name, *T = dlc_arena_printf(&g->arena, "%c%s", net->name[0] >= 'a' && net->name[0] <= 'z' ? net->name[0] - 'a' + 'A' : net->name[0], net->name + 1);
    Params pp = {0};
    dlc_map_init(&pp.off, &g->arena);
    add_params(&g->arena, &pp, net);
    add_params(&g->arena, &pp, tn);
    DlcPlanKind kind = opt->plan_memory ? DLC_PLAN_SHARED : DLC_PLAN_OWN;
    DlcMemPlan si, st;
    dlc_plan_memory(&g->arena, net, kind, true, &si);
    if (tn)
        dlc_plan_memory(&g->arena, tn, kind, true, &st);
    int64_t part0 = si.size[0], part1 = si.size[1];
    if (tn) {
        part0 = st.size[0] > part0 ? st.size[0] : part0;
        part1 = st.size[1] > part1 ? st.size[1] : part1;
    }
    if (net->ninputs != 1) {
        /* a sequence's lengths beside it: the host code uploads one input */
        dlc_error(g->ctx, net->loc, "nvptx: network '%s' has %d inputs; the GPU's host code takes one "
                  "(--emit=ptx writes its kernels)", net->name, net->ninputs);
        return false;
    }
    int64_t work = 0, work_per_n = 0;
    for (int k = 0; k < g->nk.nlaunches; k++) {
        const NvLaunch *l = &g->nk.launches[k];
        work = l->workspace > work ? l->workspace : work;
        work_per_n = l->workspace_per_n > work_per_n ? l->workspace_per_n : work_per_n;
    }
    int64_t per = work_per_n, fix = work;
    largest(net, &per, &fix);
    largest(tn, &per, &fix);
    int64_t vocab = token_vocab(net, net->inputs[0]), label_steps = labels_per_sample(tn, net->inputs[0]);
    const DlcValue *loss = NULL;
    for (int i = 0; tn && i < tn->noutputs; i++)
        if (tn->outputs[i]->type.rank == 0)
            loss = tn->outputs[i];
    const DlcValue *out0 = net->outputs[0];

    Out o = {0};
    o.f = open_memstream(&o.buf, &o.len);
    put(&o, "/* %s_cuda.c — generated by dlc %s from %s; do not edit.\n *\n"
            " * The network '%s' on an NVIDIA GPU: its PTX (from LLVM's NVPTX backend,\n"
            " * for %s) and the code that runs it through libdlrt's CUDA layer.\n"
            " * See codegen/nvptx/nvptx.c. */\n"
            "#include <stdlib.h>\n#include <string.h>\n\n#include \"%s.h\"\n\n",
        p, DLC_VERSION, g->m->source ? g->m->source : "IR", p, opt->gpu_arch, p);
    put(&o, "static const char PTX[] =\n");
    for (const char *s = g->ptx; *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        put(&o, "    \"");
        for (size_t i = 0; i < len; i++)
            put(&o, "%s", s[i] == '"' ? "\\\"" : s[i] == '\\' ? "\\\\" : s[i] == '\t' ? "\\t" : (char[2]){s[i], 0});
        put(&o, "\\n\"\n");
        s += len + (nl ? 1 : 0);
    }
    put(&o, "    ;\n\n");
    put(&o, "static const char *const KERNELS[%d] = {\n", g->nk.nlaunches ? g->nk.nlaunches : 1);
    for (int k = 0; k < g->nk.nlaunches; k++)
        put(&o, "    \"%s\",\n", g->nk.launches[k].kernel);
    put(&o, "};\n\n");
    put(&o, "#define PARAM_FLOATS %lld\n#define ARENA_PER_SAMPLE %lld\n#define ARENA_FIXED %lld\n"
            "#define WORK_FLOATS %lld\n#define INPUT_SIZE %lld\n#define OUTPUT_SIZE %lld\n"
            "#define NTENSORS %d\n#define LARGEST_PER_SAMPLE %lld\n#define LARGEST_FIXED %lld\n"
            "#define WORK_PER_SAMPLE %lld\n#define LABELS_PER_SAMPLE %lld\n#define VOCAB %lld\n\n",
        (long long)pp.floats, (long long)part0, (long long)part1, (long long)work,
        (long long)max_input_floats(net), (long long)dlc_type_numel(&out0->type), pp.count,
        (long long)per, (long long)fix, (long long)work_per_n, (long long)label_steps, (long long)vocab);
    /* the CPU's bucket plan, planned again from the same network and cap:
       the step checks at run time that the CPU's table agrees */
    DlcBucketPlan bp = {0};
    if (tn && loss)
        dlc_plan_buckets(&g->arena, tn, opt->bucket_bytes, &bp);
    put(&o, "#define NBUCKETS %d\n#define GRAD_FLOATS %lld\n", bp.nbuckets, (long long)bp.floats);
    put(&o, "static const int64_t DIST_PLAN[%d][2] = {", bp.nbuckets ? bp.nbuckets : 1);
    for (int b = 0; b < bp.nbuckets; b++)
        put(&o, "%s{%lld, %lld}", b ? ", " : "", (long long)bp.buckets[b].offset,
            (long long)bp.buckets[b].count);
    put(&o, "%s};\n\n", bp.nbuckets ? "" : "{0, 0}");
    put(&o, "typedef struct %sCuda {\n"
            "    %s *host;            /* batch 1 on the CPU: initialization, checkpoints */\n"
            "    DlrtCuda *cu;\n"
            "    DlrtCudaFunction fn[%d];\n"
            "    DlrtDevicePtr params, act, work, x, labels, out;\n"
            "    DlrtDevicePtr grads;     /* the distributed step's gradients, in buckets (0 until it runs) */\n"
            "    float *pinned_x, *pinned_out;  /* staging for batches and results: */\n"
            "    int32_t *pinned_labels;\n"
            "    float *pinned_loss;      /* x, labels, loss and steps: the half in use (use_half) */\n"
            "    struct {\n"
            "        float *x, *loss;\n        int32_t *labels;\n        unsigned char *steps;\n"
            "        DlrtCudaEvent done;  /* recorded after its step's loss */\n"
            "    } half[2];               /* the staging of two steps (train_step_start) */\n"
            "    int64_t started, finished; /* train_step_start's steps, and those finished */\n"
            "    DlrtDevicePtr steps;     /* the step values: each launch's learning rate, step, seed */\n"
            "    unsigned char *pinned_steps;\n"
            "    DlrtCudaGraph graph[3];  /* the launches of run_infer, and of run_train without and with\n"
            "                                the update, recorded at batch graph_n[i] (replay) */\n"
            "    int64_t graph_n[3];\n"
            "    int64_t max_batch;\n"
            "    int32_t step;\n"
            "    uint64_t seed;\n"
            "    bool host_stale;     /* the device's parameters are newer */\n"
            "} %sCuda;\n", p, T, g->nk.nlaunches ? g->nk.nlaunches : 1, p);
    put(&o,
        "\nenum { GRAPH_INFER, GRAPH_GRADIENTS, GRAPH_UPDATE };\n"
        "typedef DlrtStatus Launches(%sCuda *net, int64_t n, bool update, DlrtError *err);\n\n"
        "/* The launches at batch n, recorded as graph `which` the first time (and\n"
        " * again when n changes) and replayed with one call; one by one where\n"
        " * graphs are not used (dlrt_cuda_graphs: DLRT_CUDA_GRAPHS=0, DLRT_CUDA_SYNC=1,\n"
        " * DLRT_CUDA_PROFILE=1).  What changes from step to step is in the step\n"
        " * values, which the kernels read from device memory. */\n"
        "static DlrtStatus replay(%sCuda *net, int which, int64_t n, bool update, Launches *launches,\n"
        "                         DlrtError *err) {\n"
        "    if (!dlrt_cuda_graphs(net->cu))\n        return launches(net, n, update, err);\n"
        "    if (net->graph[which] && net->graph_n[which] != n) {\n"
        "        dlrt_cuda_graph_free(net->cu, net->graph[which]);\n        net->graph[which] = NULL;\n    }\n"
        "    if (!net->graph[which]) {\n"
        "        DlrtStatus st = dlrt_cuda_capture_begin(net->cu, \"the step's graph\", err);\n"
        "        if (st)\n            return st;\n"
        "        st = launches(net, n, update, err);\n"
        "        if (st) {\n            dlrt_cuda_capture_end(net->cu, NULL, \"the step's graph\", NULL);\n            return st;\n        }\n"
        "        if ((st = dlrt_cuda_capture_end(net->cu, &net->graph[which], \"the step's graph\", err)))\n            return st;\n"
        "        net->graph_n[which] = n;\n    }\n"
        "    return dlrt_cuda_graph_launch(net->cu, net->graph[which], \"the step's graph\", err);\n}\n", p, p);
    place_step_values(g);
    put(&o, "#define STEP_BYTES %lld\n", (long long)g->step_bytes);
    put(&o, "\n/* ---- inference: network @%s ---- */\n", net->name);
    put_run(g, &o, &pp, net, &si, 0, tn ? g->first_train : g->nk.nlaunches, "infer", false);
    if (tn) {
        put(&o, "\n/* ---- training step: network @%s ---- */\n", tn->name);
        put_run(g, &o, &pp, tn, &st, g->first_train, g->nk.nlaunches, "train", true);
        if (loss)
            put_run_dist(g, &o, &pp, tn, &st, &bp);
    }
    put(&o, "\n/* ---- the API, as a DlrtModel ---- */\n\n");
    put(&o,
        "static void cuda_free(void *v) {\n"
        "    %sCuda *net = v;\n"
        "    if (!net)\n        return;\n"
        "    if (net->cu) {\n"
        "        dlrt_cuda_free(net->cu, net->params);\n        dlrt_cuda_free(net->cu, net->act);\n"
        "        dlrt_cuda_free(net->cu, net->work);\n        dlrt_cuda_free(net->cu, net->x);\n"
        "        dlrt_cuda_free(net->cu, net->labels);\n        dlrt_cuda_free(net->cu, net->out);\n"
        "        dlrt_cuda_free(net->cu, net->grads);\n"
        "        dlrt_cuda_host_free(net->cu, net->pinned_out);\n"
        "        for (int h = 0; h < 2; h++) {\n"
        "            dlrt_cuda_host_free(net->cu, net->half[h].x);\n            dlrt_cuda_host_free(net->cu, net->half[h].labels);\n"
        "            dlrt_cuda_host_free(net->cu, net->half[h].loss);\n            dlrt_cuda_host_free(net->cu, net->half[h].steps);\n"
        "            dlrt_cuda_event_free(net->cu, net->half[h].done);\n        }\n"
        "        dlrt_cuda_free(net->cu, net->steps);\n"
        "        for (int i = 0; i < 3; i++)\n            dlrt_cuda_graph_free(net->cu, net->graph[i]);\n"
        "        dlrt_cuda_close(net->cu);\n    }\n"
        "    %s_free(net->host);\n    free(net);\n}\n\n", p, p);
    put(&o,
        "/* The staging the next upload, step values and loss use. */\n"
        "static void use_half(%sCuda *net, int h) {\n"
        "    net->pinned_x = net->half[h].x, net->pinned_labels = net->half[h].labels;\n"
        "    net->pinned_loss = net->half[h].loss, net->pinned_steps = net->half[h].steps;\n}\n\n"
        "/* Whether no step of train_step_start is unfinished, as every other call needs. */\n"
        "static DlrtStatus idle(%sCuda *net, DlrtError *err) {\n"
        "    if (net->started != net->finished)\n"
        "        return dlrt_fail(err, DLRT_E_ARG, \"%%lld training steps started are not finished (train_step_finish)\",\n"
        "                         (long long)(net->started - net->finished));\n"
        "    return DLRT_OK;\n}\n\n", p, p);
    put(&o,
        "/* Parameters, buffers and optimizer state from the host's block to the device's. */\n"
        "static DlrtStatus upload_params(%sCuda *net, DlrtError *err) {\n"
        "    DlrtStatus st = dlrt_cuda_upload(net->cu, net->params, %s_tensor(net->host, 0).data,\n"
        "                                     sizeof(float) * PARAM_FLOATS, \"the parameters\", err);\n"
        "    return st ? st : dlrt_cuda_sync(net->cu, \"the parameters' upload\", err);\n}\n\n"
        "static DlrtStatus download_params(%sCuda *net, DlrtError *err) {\n"
        "    if (!net->host_stale)\n        return DLRT_OK;\n"
        "    DlrtStatus st = dlrt_cuda_download(net->cu, %s_tensor(net->host, 0).data, net->params,\n"
        "                                       sizeof(float) * PARAM_FLOATS, \"the parameters\", err);\n"
        "    if (!st)\n        st = dlrt_cuda_sync(net->cu, \"the parameters' download\", err);\n"
        "    if (!st) {\n        net->host_stale = false;\n        %s_set_step(net->host, net->step);\n    }\n"
        "    return st;\n}\n\n", p, p, p, p, p);
    put(&o,
        "static DlrtStatus cuda_create(void **out, int64_t max_batch, uint64_t seed, DlrtError *err) {\n"
        "    *out = NULL;\n"
        "    if (max_batch < 1)\n"
        "        return dlrt_fail(err, DLRT_E_ARG, \"the largest batch must be at least 1, not %%lld\", (long long)max_batch);\n"
        "    /* the kernels index in 32 bits */\n"
        "    if (LARGEST_PER_SAMPLE * max_batch + LARGEST_FIXED >= ((int64_t)1 << 31))\n"
        "        return dlrt_fail(err, DLRT_E_RANGE, \"a batch of %%lld makes a tensor of 2^31 elements or more, \"\n"
        "                         \"more than the GPU kernels index; use a smaller batch\", (long long)max_batch);\n"
        "    %sCuda *net = calloc(1, sizeof *net);\n"
        "    if (!net)\n        return dlrt_fail(err, DLRT_E_NOMEM, \"out of memory\");\n"
        "    net->max_batch = max_batch;\n    net->seed = seed;\n"
        "    DlrtStatus st = %s_create(&net->host, 1, seed, err);\n"
        "    if (!st) {\n"
        "        DlrtTensor first = %s_tensor(net->host, 0), last = %s_tensor(net->host, NTENSORS - 1);\n"
        "        int64_t count = 1;\n"
        "        for (int d = 0; d < last.rank; d++)\n            count *= last.dims[d];\n"
        "        int64_t size = last.dtype == DLRT_I8 || last.dtype == DLRT_U8 ? 1 : last.dtype == DLRT_F64 || last.dtype == DLRT_I64 ? 8 : 4;\n"
        "        if ((int64_t)((char *)last.data + count * size - (char *)first.data) > (int64_t)sizeof(float) * PARAM_FLOATS) /* int8 weights: 1 byte each */\n"
        "            st = dlrt_fail(err, DLRT_E_ARG, \"internal error: the CPU and GPU code disagree on the parameters' layout\");\n"
        "    }\n",
        p, p, p, p);
    /* a second call: a put writes at most 4 KiB, and p may be long */
    put(&o,
        "    if (!st)\n        st = dlrt_cuda_open(&net->cu, PTX, err);\n"
        "    for (int k = 0; !st && k < %d; k++)\n"
        "        st = dlrt_cuda_function(net->cu, KERNELS[k], &net->fn[k], err);\n"
        "    if (!st) { /* the whole need first: a clear message before any allocation */\n"
        "        size_t need = sizeof(float) * (size_t)(PARAM_FLOATS + ARENA_PER_SAMPLE * max_batch + ARENA_FIXED\n"
        "                                             + WORK_FLOATS + WORK_PER_SAMPLE * max_batch\n"
        "                                             + (INPUT_SIZE + OUTPUT_SIZE + LABELS_PER_SAMPLE) * max_batch);\n"
        "        size_t free_bytes, total;\n"
        "        st = dlrt_cuda_mem_info(net->cu, &free_bytes, &total, err);\n"
        "        if (!st && need > free_bytes)\n"
        "            st = dlrt_fail(err, DLRT_E_NOMEM, \"%s needs %%.1f MiB on the GPU at a batch of %%lld; \"\n"
        "                           \"%%s has %%.1f MiB free of %%.1f MiB\", need / 1048576.0, (long long)max_batch,\n"
        "                           dlrt_cuda_device_name(net->cu), free_bytes / 1048576.0, total / 1048576.0);\n"
        "    }\n"
        "    if (!st) st = dlrt_cuda_alloc(net->cu, sizeof(float) * PARAM_FLOATS + 4, &net->params, \"the parameters\", err);\n"
        "    if (!st) st = dlrt_cuda_alloc(net->cu, sizeof(float) * (size_t)(ARENA_PER_SAMPLE * max_batch + ARENA_FIXED) + 4, &net->act, \"the activations\", err);\n"
        "    if (!st) st = dlrt_cuda_alloc(net->cu, sizeof(float) * (size_t)(WORK_FLOATS + WORK_PER_SAMPLE * max_batch) + 4, &net->work, \"the scratch memory\", err);\n"
        "    if (!st) st = dlrt_cuda_alloc(net->cu, sizeof(float) * (size_t)(INPUT_SIZE * max_batch) + 4, &net->x, \"the input batch\", err);\n"
        "    if (!st) st = dlrt_cuda_alloc(net->cu, sizeof(int32_t) * (size_t)(LABELS_PER_SAMPLE * max_batch) + 4, &net->labels, \"the labels\", err);\n"
        "    if (!st) st = dlrt_cuda_host_alloc(net->cu, sizeof(float) * (size_t)(OUTPUT_SIZE * max_batch) + 4, (void **)&net->pinned_out, err);\n"
        "    for (int h = 0; !st && h < 2; h++) {\n"
        "        st = dlrt_cuda_host_alloc(net->cu, sizeof(float) * (size_t)(INPUT_SIZE * max_batch) + 4, (void **)&net->half[h].x, err);\n"
        "        if (!st) st = dlrt_cuda_host_alloc(net->cu, sizeof(int32_t) * (size_t)(LABELS_PER_SAMPLE * max_batch) + 4, (void **)&net->half[h].labels, err);\n"
        "        if (!st) st = dlrt_cuda_host_alloc(net->cu, sizeof(float), (void **)&net->half[h].loss, err);\n"
        "        if (!st) st = dlrt_cuda_host_alloc(net->cu, STEP_BYTES + 8, (void **)&net->half[h].steps, err);\n"
        "        if (!st) st = dlrt_cuda_event_new(net->cu, &net->half[h].done, \"a step's end\", err);\n"
        "    }\n"
        "    if (!st) use_half(net, 0);\n"
        "    if (!st) st = dlrt_cuda_alloc(net->cu, STEP_BYTES + 8, &net->steps, \"the step values\", err);\n"
        "    if (!st) st = upload_params(net, err);\n"
        "    if (st) {\n        cuda_free(net);\n        return st;\n    }\n"
        "    *out = net;\n    return DLRT_OK;\n}\n\n",
        g->nk.nlaunches, p);
    put(&o,
        "static DlrtStatus check_batch(%sCuda *net, int64_t n, DlrtError *err) {\n"
        "    if (n < 1 || n > net->max_batch)\n"
        "        return dlrt_fail(err, DLRT_E_ARG, \"batch of %%lld samples; this network takes 1 to %%lld\", (long long)n, (long long)net->max_batch);\n"
        "    return DLRT_OK;\n}\n\n"
        "static DlrtStatus upload_batch(%sCuda *net, int64_t n, const float *x, const int32_t *labels, DlrtError *err) {\n", p, p);
    if (vocab > 0) /* token ids, passed as floats: checked as the CPU's API checks them */
        put(&o,
            "    int32_t *ids = (int32_t *)(void *)net->pinned_x;\n"
            "    DlrtStatus st = dlrt_tokens_from_floats(x, n * INPUT_SIZE, ids, err);\n"
            "    if (!st) st = dlrt_check_tokens(ids, n, INPUT_SIZE, VOCAB, \"%s\", err);\n"
            "    if (!st) st = dlrt_cuda_upload(net->cu, net->x, ids, sizeof(int32_t) * (size_t)(n * INPUT_SIZE), \"the input batch\", err);\n",
            net->inputs[0]->name);
    else
        put(&o, "    DlrtStatus st = dlrt_cuda_upload_staged(net->cu, net->x, x, net->pinned_x, sizeof(float) * (size_t)(n * INPUT_SIZE), \"the input batch\", err);\n");
    put(&o,
        "    if (!st && labels) {\n"
        "        memcpy(net->pinned_labels, labels, sizeof(int32_t) * (size_t)(n * LABELS_PER_SAMPLE));\n"
        "        st = dlrt_cuda_upload(net->cu, net->labels, net->pinned_labels, sizeof(int32_t) * (size_t)(n * LABELS_PER_SAMPLE), \"the labels\", err);\n"
        "    }\n    return st;\n}\n\n");
    const char *out_ptr = device_ptr(g, &pp, &si, out0);
    put(&o,
        "static DlrtStatus cuda_forward(void *v, int64_t n, const float *x, float *out, DlrtError *err) {\n"
        "    %sCuda *net = v;\n"
        "    DlrtStatus st = idle(net, err);\n"
        "    if (!st) st = check_batch(net, n, err);\n"
        "    if (!st) st = upload_batch(net, n, x, NULL, err);\n"
        "    if (!st) st = run_infer(net, n, err);\n"
        "    if (!st) st = dlrt_cuda_download(net->cu, net->pinned_out, %s, sizeof(float) * (size_t)(n * OUTPUT_SIZE), \"the outputs\", err);\n"
        "    if (!st) st = dlrt_cuda_sync(net->cu, \"the forward pass\", err);\n"
        "    if (!st) memcpy(out, net->pinned_out, sizeof(float) * (size_t)(n * OUTPUT_SIZE));\n"
        "    return st;\n}\n\n", p, out_ptr);
    if (tn && loss) {
        const char *loss_ptr = device_ptr(g, &pp, &st, loss);
        put(&o,
            "/* A training step queued: the batch's upload, the launches and the\n"
            " * loss's download into the pinned staging in use. */\n"
            "static DlrtStatus queue_step(%sCuda *net, int64_t n, const float *x, const int32_t *labels,\n"
            "                             bool update, float lr, DlrtError *err) {\n"
            "    DlrtStatus st = check_batch(net, n, err);\n"
            "    if (!st) st = upload_batch(net, n, x, labels, err);\n"
            "    if (!st && update) {\n        net->step++;\n        net->host_stale = true;\n    }\n"
            "    if (!st) st = run_train(net, n, update, lr, err);\n"
            "    if (!st) st = dlrt_cuda_download(net->cu, net->pinned_loss, %s, sizeof(float), \"the loss\", err);\n"
            "    return st;\n}\n\n"
            "static DlrtStatus step(%sCuda *net, int64_t n, const float *x, const int32_t *labels, bool update,\n"
            "                       float lr, float *loss, DlrtError *err) {\n"
            "    DlrtStatus st = idle(net, err);\n"
            "    if (!st) st = queue_step(net, n, x, labels, update, lr, err);\n"
            "    if (!st) st = dlrt_cuda_sync(net->cu, \"the training step\", err);\n"
            "    if (!st) *loss = *net->pinned_loss;\n"
            "    return st;\n}\n\n", p, loss_ptr, p);
        put(&o,
            "/* train_step_start: the batch into half `started %% 2` of the staging,\n"
            " * its upload, the step and its loss's download queued, and an event\n"
            " * after them; the host goes on while the device works.  The stream\n"
            " * orders this step after the one before, and the staging of that one\n"
            " * is the other half, which its upload may still be reading. */\n"
            "static DlrtStatus cuda_train_step_start(void *v, int64_t n, const float *x, const int32_t *labels,\n"
            "                                        float lr, DlrtError *err) {\n"
            "    %sCuda *net = v;\n"
            "    if (net->started - net->finished >= 2)\n"
            "        return dlrt_fail(err, DLRT_E_ARG, \"two training steps are started already; finish one first\");\n"
            "    int h = (int)(net->started %% 2);\n"
            "    use_half(net, h);\n"
            "    DlrtStatus st = queue_step(net, n, x, labels, true, lr, err);\n"
            "    if (!st) st = dlrt_cuda_record(net->cu, NULL, net->half[h].done, \"the training step\", err);\n"
            "    if (!st)\n        net->started++;\n"
            "    return st;\n}\n\n"
            "/* train_step_finish: the oldest step started, waited for; its loss. */\n"
            "static DlrtStatus cuda_train_step_finish(void *v, float *loss, DlrtError *err) {\n"
            "    %sCuda *net = v;\n"
            "    if (net->started == net->finished)\n"
            "        return dlrt_fail(err, DLRT_E_ARG, \"no training step is started\");\n"
            "    int h = (int)(net->finished %% 2);\n"
            "    DlrtStatus st = dlrt_cuda_event_sync(net->cu, net->half[h].done, \"the training step\", err);\n"
            "    net->finished++; /* failed or not: the program stops on a failure */\n"
            "    if (!st) *loss = *net->half[h].loss;\n"
            "    return st;\n}\n\n", p, p);
        put(&o,
            "static DlrtStatus cuda_train_step(void *net, int64_t n, const float *x, const int32_t *labels,\n"
            "                                  float lr, float *loss, DlrtError *err) {\n"
            "    return step(net, n, x, labels, true, lr, loss, err);\n}\n\n"
            "static DlrtStatus cuda_gradients(void *net, int64_t n, const float *x, const int32_t *labels,\n"
            "                                 float *loss, DlrtError *err) {\n"
            "    return step(net, n, x, labels, false, 0, loss, err);\n}\n\n");
        put(&o,
            "/* One rank's step of data-parallel training (docs/distributed.md): its n\n"
            " * rows of a batch of total, the gradients in the CPU's buckets on the\n"
            " * device, summed through r (NULL: this rank's alone), each rank's part\n"
            " * weighted by n / total, as its loss is. */\n"
            "static DlrtStatus cuda_train_step_dist(void *v, int64_t n, int64_t total, const float *x,\n"
            "                                       const int32_t *labels, float lr, float *loss,\n"
            "                                       const DlrtCudaReducer *r, DlrtError *err) {\n"
            "    %sCuda *net = v;\n"
            "    bool same = %s_model.nbuckets == NBUCKETS && %s_model.grad_floats == GRAD_FLOATS;\n"
            "    for (int b = 0; same && b < NBUCKETS; b++)\n"
            "        same = %s_model.buckets[b].offset == DIST_PLAN[b][0] && %s_model.buckets[b].count == DIST_PLAN[b][1];\n"
            "    if (!same)\n"
            "        return dlrt_fail(err, DLRT_E_ARG, \"internal error: the CPU and GPU code disagree on the gradients' buckets\");\n"
            "    if (n < 0 || n > net->max_batch || total < n || total < 1)\n"
            "        return dlrt_fail(err, DLRT_E_ARG, \"%%lld samples of a batch of %%lld; this network takes 0 to %%lld\", (long long)n, (long long)total, (long long)net->max_batch);\n"
            "    DlrtStatus st = DLRT_OK;\n"
            "    if (!net->grads)\n"
            "        st = dlrt_cuda_alloc(net->cu, sizeof(float) * GRAD_FLOATS + 4, &net->grads, \"the gradients' buckets\", err);\n"
            "    if (!st && n > 0)\n        st = upload_batch(net, n, x, labels, err);\n"
            "    if (st)\n        return st;\n"
            "    net->step++;\n    net->host_stale = true;\n"
            "    float scale = (float)n / (float)total;\n"
            "    st = run_dist(net, n, lr, scale, r, err);\n"
            "    if (!st && n > 0) st = dlrt_cuda_download(net->cu, net->pinned_loss, %s, sizeof(float), \"the loss\", err);\n"
            "    if (!st) st = dlrt_cuda_sync(net->cu, \"the training step\", err);\n"
            "    if (!st) *loss = n > 0 ? *net->pinned_loss * scale : 0;\n"
            "    return st;\n}\n\n", p, p, p, p, p, loss_ptr);
        /* where each tensor's gradient lives on the device */
        put(&o, "static DlrtTensor cuda_gradient(void *v, int i) {\n    %sCuda *net = v;\n"
                "    static const int64_t at[%d] = {", p, pp.count ? pp.count : 1);
        for (int i = 0; i < pp.count; i++) {
            const DlcValue *gv = dlc_param_gradient(tn, pp.order[i]);
            put(&o, "%s%lld", i ? ", " : "", gv ? (long long)dlc_plan_offset(&st, gv) : -1LL);
        }
        put(&o, "};\n"
                "    DlrtTensor t = %s_gradient(net->host, i);\n"
                "    if (t.data && at[i] >= 0) {\n"
                "        int64_t count = 1;\n"
                "        for (int d = 0; d < t.rank; d++)\n            count *= t.dims[d];\n"
                "        DlrtError err;\n"
                "        if (dlrt_cuda_download(net->cu, t.data, net->act + 4u * (%lld * net->max_batch + at[i]),\n"
                "                               sizeof(float) * (size_t)count, t.name, &err) ||\n"
                "            dlrt_cuda_sync(net->cu, t.name, &err))\n"
                "            t.data = NULL;\n"
                "    }\n    return t;\n}\n\n", p, (long long)st.size[0]);
    }
    put(&o,
        "static DlrtTensor cuda_tensor(void *v, int i) {\n    %sCuda *net = v;\n"
        "    DlrtError err;\n"
        "    DlrtTensor t = %s_tensor(net->host, i);\n"
        "    if (download_params(net, &err))\n        t.data = NULL;\n"
        "    return t;\n}\n\n"
        "static DlrtStatus cuda_save(const void *v, const char *path, const DlrtMeta *extra, int nextra,\n"
        "                            DlrtError *err) {\n"
        "    %sCuda *net = (%sCuda *)v;\n"
        "    DlrtStatus st = download_params(net, err);\n"
        "    return st ? st : %s_save_with(net->host, path, extra, nextra, err);\n}\n\n"
        "static DlrtStatus cuda_load(void *v, const char *path, DlrtMeta **meta, int *nmeta, DlrtError *err) {\n"
        "    %sCuda *net = v;\n"
        "    DlrtStatus st = download_params(net, err);\n"
        "    if (!st) st = %s_load_with(net->host, path, meta, nmeta, err);\n"
        "    if (!st) {\n        net->step = %s_step(net->host);\n        st = upload_params(net, err);\n    }\n"
        "    return st;\n}\n\n", p, p, p, p, p, p, p, p);
    bool clip = false; /* the step clips its gradients: their largest norm is the host's */
    for (int i = 0; tn && i < tn->nops; i++)
        clip |= tn->ops[i]->kind == DLC_OP_CLIP_NORM;
    if (clip)
        put(&o, "static void cuda_set_clip(void *v, double clip) {\n"
                "    %sCuda *net = v;\n    %s_set_clip(net->host, (float)clip);\n}\n\n", p, p);
    put(&o,
        "static DlrtModel table;\n"
        "const DlrtModel *%s_cuda_model(void) {\n"
        "    /* the CPU table's description, this file's functions */\n"
        "    if (!table.name) {\n"
        "        table = %s_model;\n"
        "        table.cuda = NULL;\n"
        "        table.device = \"cuda\";\n"
        "        table.create = cuda_create;\n        table.free = cuda_free;\n"
        "        table.forward = cuda_forward;\n        table.tensor = cuda_tensor;\n"
        "        table.save = cuda_save;\n        table.load = cuda_load;\n"
        "        table.check = NULL;\n"
        "        table.freeze = NULL; /* the CPU's packing of weights; the GPU's kernels read them as stored */\n"
        "        table.train_step_dist = NULL; /* the GPU's is train_step_dist_cuda */\n", p, p);
    if (tn && loss)
        put(&o, "        table.train_step = cuda_train_step;\n        table.gradients = cuda_gradients;\n"
                "        table.train_step_start = cuda_train_step_start;\n        table.train_step_finish = cuda_train_step_finish;\n"
                "        table.gradient = cuda_gradient;\n"
                "        /* where the CPU's code has a distributed step, so has the GPU's */\n"
                "        table.train_step_dist_cuda = %s_model.train_step_dist ? cuda_train_step_dist : NULL;\n", p);
    if (clip)
        put(&o, "        table.set_clip = cuda_set_clip;\n");
    put(&o, "    }\n    return &table;\n}\n");
    fclose(o.f);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s_cuda.c", dir, p);
    bool ok = dlc_write_file(g->ctx, path, o.buf, o.len);
    free(o.buf);
    return ok;
}

static bool nvptx_emit(DlcCtx *ctx, const DlcModule *m, const DlcEmitOptions *opt, const char *dir) {
    bool ok = true;
    for (int i = 0; i < m->nnetworks && ok; i++) {
        if (dlc_is_derived_network(m->networks[i]->name))
            continue;
        Gpu g;
        ok = gpu_init(&g, ctx, m, m->networks[i], opt) && emit_host(&g, opt, dir);
        gpu_free(&g);
    }
    return ok;
}

const DlcTarget dlc_target_nvptx = {
    .name = "cuda",
    .emit_kind = "ptx",
    .summary = "PTX for NVIDIA GPUs (NAME_cuda.c, with the CPU's NAME.c and NAME.h)",
    .passes = dlc_cpu_passes, /* the GPU runs the IR the C target's pipeline makes */
    .emit = nvptx_emit,
    .emit_file = nvptx_emit_ptx,
    .arch_ok = nvptx_arch_ok,
};
