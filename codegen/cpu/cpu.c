/* cpu.c — the CPU target: readable C for each network.
 *
 * For a network NAME (and NAME.train, when autodiff and optimizer made
 * one) it writes NAME.h, the API a product embeds, and NAME.c:
 *
 *   - one static function per op, with every size a constant, `restrict`
 *     pointers, calling the kernels of libdlrt (runtime/dlrt.h) — BLAS for
 *     the GEMMs of dense layers and convolutions — or, for the convolutions
 *     the tile pass gave a register block, dlc's own loops (direct_conv.c);
 *     preceded by a #line directive naming the op's .dl line, so that a
 *     debugger or profiler points at the model.  Its body is the op's
 *     emission function's (emit.h), which the cpu column of ir/ops.def
 *     names;
 *   - NAME_forward (inference) and NAME_train_step (forward, loss,
 *     backward, weight update), which call those functions in IR order;
 *   - NAME_create (fresh initialization from a seed, as PyTorch initializes),
 *     NAME_load / NAME_save (safetensors checkpoints of every parameter and
 *     buffer, named as in the IR), NAME_memory (bytes needed for a given
 *     batch, known before anything runs) and NAME_free.
 *
 * Memory: all parameters and buffers in one block; the values of both
 * networks in one activation block sized for the largest batch, where
 * passes/plan_memory.c places them (values that are never live at the same
 * time share memory; the two networks never run at the same time, so each
 * plan starts at 0).  Nothing is allocated after NAME_create, except the
 * copy of every parameter's gradient that NAME_gradients (gradient checks)
 * fills (a gradient dies at its weight update in the plan, so the step
 * without updates copies it out there instead), and the weights NAME_freeze
 * packs for the inference network's convolutions in filter lanes, which
 * read them from that copy until NAME_train_step, NAME_load or NAME_tensor
 * says the weights may have changed (net->frozen).
 *
 * The target's files: cpu.c (this one: the program's structure, the
 * table of emission functions), emit_<family>.c (each op's body, by op
 * family) and emit.c (what they share) behind emit.h, direct_conv.c (dlc's
 * own convolution loops, direct_conv.h), out.c (the writer, out.h).
 *
 * Preconditions: the module verifies. */
#include <stdlib.h>
#include <string.h>

#include "../codegen.h"
#include "../../passes/plan_buckets.h"
#include "../../passes/plan_memory.h"
#include "direct_conv.h"
#include "emit.h"

#define put dlc_cpu_put

/* ---- the emitter's state ------------------------------------------------- */

typedef struct Cpu {
    DlcCtx *ctx;
    const DlcModule *m;
    const DlcNetwork *infer, *train;
    const DlcNetwork *step; /* NAME.step (passes/step.c): NAME at one step, for
                               NAME_forward_step; NULL where it has none */
    const DlcNetwork *calib; /* NAME.calib (passes/quantize.c): the f32 network of
                               an int8 one, for calibration; NULL where there is
                               none, and in f64 code */
    const DlcValue *clip;   /* the training step's largest gradient norm (the
                               scalar input its clip_norm reads), which lives in
                               net->clip (NAME_set_clip); NULL without clipping */
    const char *prefix;     /* lenet5: functions are lenet5_forward, ... */
    char type[128];         /* Lenet5 */
    char upper[128];        /* LENET5 */
    DlcMap param_off;       /* param name -> offset + 1 in the parameter block */
    const DlcValue **params; /* every parameter and buffer, in block order */
    int nparams, capparams;
    int64_t param_floats;
    DlcMap grad_off;        /* parameter name -> offset + 1 of its gradient in the copy */
    int64_t grad_floats;    /* the gradient copy's size (NAME_gradients) */
    int64_t packed_floats;  /* the inference network's weights packed by NAME_freeze */
    const char *real;       /* the element type in C: float, double */
    const char *k;          /* the kernels' suffix for it: "", "_f64" */
    bool f64;
    bool cuda;              /* the program also runs on a GPU: NAME_cuda.c */
    const char **scratch;   /* what each op that takes scratch says it needs
                               (Emit.scratch), in the order of the functions:
                               the inference network's, then the training
                               step's */
    int nscratch, capscratch;
    const char **op_rows;   /* each op's row of the profile (DLRT_PROFILE=1): the
                               inference network's ops, then the training step's
                               (put_network appends them) */
    int nop_rows;
    DlcMap state_off;       /* a stateful recurrent layer's weight_hh name ->
                               offset + 1 of its rows in net->state, in units of
                               max_batch (its h, then an LSTM's c) */
    int64_t state_rows;     /* net->state's elements per sample: the states
                               the stateful layers' next chunks start from;
                               as many again follow for a training step's */
    DlcArena arena;         /* names and slots */
    bool ok;
    /* data-parallel training (put_dist): the training step's gradient
       buckets, and its op functions, as put_network wrote them */
    bool dist;              /* NAME_train_step_dist is written */
    DlcBucketPlan buckets;
    const struct OpFunction *train_fns;
} Cpu;

/* Where a network's values live in the activation block is its DlcMemPlan:
 * batched values take numel * max_batch floats, from their offset in units
 * of max_batch (the plan's part 0), unbatched ones numel floats, after the
 * network's batched part (the plan's part 1). */

static int64_t numel(const DlcValue *v) { return dlc_value_numel(v); }

/* A C identifier from an IR name: dots become underscores. */
static const char *ident(Cpu *cpu, const char *name) {
    char *s = dlc_arena_strdup(&cpu->arena, name);
    for (char *p = s; *p; p++)
        if (*p == '.')
            *p = '_';
    return s;
}

static void add_param(Cpu *cpu, const DlcValue *p) {
    if (dlc_map_get(&cpu->param_off, p->name))
        return;
    dlc_map_put(&cpu->param_off, p->name, (void *)(intptr_t)(cpu->param_floats + 1));
    cpu->param_floats += dlc_plan_elements(p);
    DLC_PUSH(&cpu->arena, cpu->params, cpu->nparams, cpu->capparams, p);
}

/* Where the gradient of each trained parameter goes when NAME_gradients
 * copies it out at its update (in parameter order). */
static void add_gradient_copies(Cpu *cpu) {
    dlc_map_init(&cpu->grad_off, &cpu->arena);
    for (int i = 0; cpu->train && i < cpu->nparams; i++) {
        const DlcValue *p = cpu->params[i];
        if (!dlc_param_update(cpu->train, p))
            continue;
        dlc_map_put(&cpu->grad_off, p->name, (void *)(intptr_t)(cpu->grad_floats + 1));
        cpu->grad_floats += dlc_plan_elements(p);
    }
}

/* The offset of parameter p's gradient in the copy; -1 if it has none. */
static int64_t gradient_copy_offset(const Cpu *cpu, const DlcValue *p) {
    return (intptr_t)dlc_map_get(&cpu->grad_off, p->name) - 1;
}

/* The scalar input of the training step's clip_norm (the largest norm of
 * its gradients), or NULL where the step does not clip them. */
/* The parameter that names a stateful recurrent op's state (its weight_hh,
 * which the layer's forward, training form and gradient all read), or NULL
 * for an op without state. */
static const DlcValue *state_key(const DlcOp *op) {
    if (dlc_recurrent_cell(op->kind) == DLC_OP_COUNT || !dlc_attr_bool(op, DLC_A_STATEFUL))
        return NULL;
    return dlc_op_is_recurrent_grad(op->kind) ? op->in[op->nin - 1]
                                              : op->in[op->nin - op->nparams + 1];
}

/* The offset, in units of max_batch, of a stateful op's h (part 0) or an
 * LSTM's c (part 1) in net->state: the state a call starts from, or with
 * next the training step's final one, beside it. */
static int64_t state_at(const Cpu *cpu, const DlcOp *op, bool next, int part) {
    int64_t at = (intptr_t)dlc_map_get(&cpu->state_off, state_key(op)->name) - 1;
    return at + (next ? cpu->state_rows : 0) + part * dlc_attr_int(op, DLC_A_HIDDEN);
}

/* Gives the stateful layers of net their rows of net->state. */
static void add_states(Cpu *cpu, const DlcNetwork *net) {
    for (int i = 0; net && i < net->nops; i++) {
        const DlcValue *key = state_key(net->ops[i]);
        if (!key || dlc_map_get(&cpu->state_off, key->name))
            continue;
        dlc_map_put(&cpu->state_off, key->name, (void *)(intptr_t)(cpu->state_rows + 1));
        int64_t h = dlc_attr_int(net->ops[i], DLC_A_HIDDEN);
        cpu->state_rows += dlc_recurrent_cell(net->ops[i]->kind) == DLC_OP_LSTM ? 2 * h : h;
    }
}

static const DlcValue *clip_input(const DlcNetwork *train) {
    for (int i = 0; train && i < train->nops; i++)
        if (train->ops[i]->kind == DLC_OP_CLIP_NORM)
            return train->ops[i]->in[train->ops[i]->nin - 1];
    return NULL;
}

/* The train section's clip, the largest norm a network starts with (0,
 * no clipping, where it has none). */
static double clip_default(const Cpu *cpu) {
    const DlcTrain *tr = dlc_module_find_train(cpu->m, cpu->infer->name);
    const DlcCfg *v = tr ? dlc_train_get(tr, "clip") : NULL;
    return !v ? 0 : v->kind == DLC_CFG_INT ? (double)v->i : v->f;
}

/* The plan figures of the activation block, which both networks share:
 * the larger of the two in each part. */
typedef struct Figures {
    int64_t arena[2], naive[2], lower[2];
} Figures;

static Figures figures(const DlcMemPlan *a, const DlcMemPlan *b) {
    Figures f;
    for (int k = 0; k < 2; k++) {
        f.arena[k] = a->size[k] > b->size[k] ? a->size[k] : b->size[k];
        f.naive[k] = a->naive[k] > b->naive[k] ? a->naive[k] : b->naive[k];
        f.lower[k] = a->lower[k] > b->lower[k] ? a->lower[k] : b->lower[k];
    }
    return f;
}

/* The C expression for a value's storage in the network's functions. */
static const char *where(Cpu *cpu, const DlcMemPlan *plan, const DlcValue *v) {
    switch (v->kind) {
    case DLC_VAL_PARAM:
        return dlc_arena_printf(&cpu->arena, "%s(net->params + %lld)",
                                v->type.dtype == DLC_I8 ? "(int8_t *)" : "",
                                (long long)((intptr_t)dlc_map_get(&cpu->param_off, v->name) - 1));
    case DLC_VAL_INPUT:
        if (!v->type.batched)
            return v->type.dtype == DLC_I32 ? "net->step" : v == cpu->clip ? "net->clip"
                                                                           : ident(cpu, v->name);
        return ident(cpu, v->name);
    case DLC_VAL_OP: {
        int64_t off = dlc_plan_offset(plan, v);
        if (v->type.dtype == DLC_I32 && v->type.batched) /* maxpool_train's argmax */
            return dlc_arena_printf(&cpu->arena, "(int32_t *)(net->act + %lld * net->max_batch)",
                                    (long long)off);
        if (v->type.dtype == DLC_I8) /* int8 inference: always batched */
            return dlc_arena_printf(&cpu->arena, "(int8_t *)(net->act + %lld * net->max_batch)",
                                    (long long)off);
        if (v->type.batched)
            return dlc_arena_printf(&cpu->arena, "(net->act + %lld * net->max_batch)",
                                    (long long)off);
        return dlc_arena_printf(&cpu->arena, "(net->act + %lld * net->max_batch + %lld)",
                                (long long)plan->size[0], (long long)off);
    }
    }
    return "?";
}

static const char *ctype(const Cpu *cpu, const DlcValue *v) {
    return v->type.dtype == DLC_I32 ? "int32_t" : v->type.dtype == DLC_I8 ? "int8_t" : cpu->real;
}

/* ---- one function per op -------------------------------------------------- */

/* Each op's emission function (emit.h), from the cpu column of ir/ops.def:
 * a row naming a function that does not exist does not build. */
typedef void (*EmitFn)(Emit *e, Out *o, const DlcOp *op);
static const EmitFn emit_op[DLC_OP_COUNT] = {
#define CPU(x) dlc_cpu_emit_##x
#define OP(id, name, arity, flags, schema, infer, grad, cpu, ptx) [DLC_OP_##id] = cpu,
#include "../../ir/ops.def"
#undef OP
#undef CPU
};

/* What an op's emission function reads of the network being written. */
static Emit emit_state(Cpu *cpu) {
    return (Emit){.arena = &cpu->arena, .real = cpu->real, .k = cpu->k, .f64 = cpu->f64};
}

/* The body text of an op's function into o, with the kernels of the
 * element type: an emission function writes the f32 kernels' names
 * (dlrt_relu_forward), which f64 code calls with the suffix _f64 (every
 * call in such a body is a kernel's; one that has the suffix keeps it). */
static void put_kernel_calls(Cpu *cpu, Out *o, const char *body) {
    size_t k = strlen(cpu->k);
    for (const char *p = body; *p;) {
        const char *call = k ? strstr(p, "dlrt_") : NULL;
        if (!call) {
            dlc_cpu_write(o, p, strlen(p));
            break;
        }
        size_t len = strspn(call, "abcdefghijklmnopqrstuvwxyz0123456789_");
        bool suffixed = len >= k && memcmp(call + len - k, cpu->k, k) == 0;
        dlc_cpu_write(o, p, (size_t)(call + len - p));
        if (call[len] == '(' && !suffixed)
            put(o, "%s", cpu->k);
        p = call + len;
    }
}

/* An op's function: its name, and what it takes besides its operands and
 * results (as its emission said). */
typedef struct OpFunction {
    const char *name;
    bool work; /* scratch: `work` and `threads` */
    bool seed; /* `seed` */
    int state; /* Emit.state: a stateful layer's rows of net->state */
} OpFunction;

/* static void opK_name(int64_t n, const float *restrict a0, ..., float *restrict r0)
 *
 * Its body comes first, from the op's emission function or, for a
 * convolution the tile pass gave a register block, dlc's own loops, since
 * what the body needs decides the function's parameters. */
static OpFunction op_function(Cpu *cpu, Out *o, const DlcOp *op, int k, const char *net_tag) {
    const char *fname = dlc_arena_printf(&cpu->arena, "%s_op%d_%s", net_tag, k,
                                         op->nout ? ident(cpu, op->out[0]->name)
                                                  : dlc_op_info(op->kind)->name);
    const char *path = dlc_ctx_path(cpu->ctx, op->loc);
    Emit e = emit_state(cpu);
    bool direct = dlc_cpu_is_direct_conv(op);
    const char *pack = dlc_cpu_packed(&e, op)
                           ? dlc_arena_printf(&cpu->arena, "%s_pack", fname)
                           : NULL;
    Out body = {.name = o->name};
    body.f = open_memstream(&body.buf, &body.len);
    if (direct)
        dlc_cpu_direct_conv(&e, &body, op, pack);
    else
        emit_op[op->kind](&e, &body, op);
    fclose(body.f);
    if (e.scratch)
        DLC_PUSH(&cpu->arena, cpu->scratch, cpu->nscratch, cpu->capscratch, e.scratch);

    if (pack)
        dlc_cpu_pack(&e, o, op, pack);
    put(o, "\n");
    if (direct)
        dlc_cpu_direct_conv_contract(o, true);
    put(o, "/* ");
    char buf[DLC_TYPE_STR_MAX];
    for (int r = 0; r < op->nout; r++)
        put(o, "%%%s : %s = ", op->out[r]->name, dlc_type_str(&op->out[r]->type, buf, sizeof buf));
    put(o, "%s(", dlc_op_info(op->kind)->name);
    for (int i = 0; i < op->nin; i++)
        put(o, "%s%c%s", i ? ", " : "", op->in[i]->kind == DLC_VAL_PARAM ? '@' : '%',
            op->in[i]->name);
    put(o, ") */\n");
    bool located = op->loc.file >= 0 && !cpu->ctx->files[op->loc.file].is_ir;
    if (located) {
        put(o, "#line %d \"", op->loc.line);
        for (const char *p = path; *p; p++)
            put(o, "%s", *p == '"' || *p == '\\' ? (*p == '"' ? "\\\"" : "\\\\") : (char[2]){*p, 0});
        put(o, "\"\n");
    }
    /* the plan may give the result of an in-place op an operand's memory */
    const char *restrict_kw = dlc_op_in_place(op) ? "" : "restrict ";
    put(o, "static void %s(int64_t n", fname);
    for (int i = 0; i < op->nin; i++) {
        const DlcValue *v = op->in[i];
        if (!v->type.batched && v->type.rank == 0 && v->kind == DLC_VAL_INPUT)
            put(o, ", %s a%d", ctype(cpu, v), i); /* a scalar input: lr, step */
        else
            put(o, ", %s%s *%sa%d", i >= op->nin - e.written ? "" : "const ", ctype(cpu, v),
                restrict_kw, i);
    }
    for (int r = 0; r < op->nout; r++)
        put(o, ", %s *%sr%d", ctype(cpu, op->out[r]), restrict_kw, r);
    if (e.scratch)
        put(o, ", %s *restrict work, int threads", cpu->real);
    if (pack)
        put(o, ", const %s *restrict packed", cpu->real);
    if (e.seed)
        put(o, ", uint64_t seed");
    /* not restrict: at inference the final states overwrite the first */
    if (e.state)
        put(o, ", %s *state_h, %s *state_c", cpu->real, cpu->real);
    if (e.state == 2)
        put(o, ", %s *next_h, %s *next_c", cpu->real, cpu->real);
    put(o, ") {\n");
    put(o, "    (void)n;\n");
    if (direct) /* calls no kernel of libdlrt's */
        dlc_cpu_write(o, body.buf, body.len);
    else
        put_kernel_calls(cpu, o, body.buf);
    free(body.buf);
    put(o, "}\n");
    if (located) /* back to this file's own lines */
        put(o, "#line %d \"%s\"\n", o->line + 2, o->name);
    if (direct)
        dlc_cpu_direct_conv_contract(o, false);
    return (OpFunction){.name = fname, .work = e.scratch != NULL, .seed = e.seed,
                        .state = e.state};
}

const char *dlc_cpu_op_function(DlcCtx *ctx, DlcArena *arena, Out *o, const DlcOp *op, int k,
                                const char *tag, const char **scratch) {
    Cpu cpu = {.ctx = ctx, .real = "float", .k = "", .ok = true};
    OpFunction fn = op_function(&cpu, o, op, k, tag);
    const char *name = dlc_arena_strdup(arena, fn.name);
    *scratch = cpu.nscratch ? dlc_arena_strdup(arena, cpu.scratch[0]) : NULL;
    dlc_arena_free(&cpu.arena);
    return name;
}

/* An op's share of net->packed (NAME_freeze): its packed weights, rounded
 * up to whole cache lines, so that each op's weights start on a line as
 * the buffer does (dlrt_alloc); 0 for an op that packs none. */
static int64_t packed_span(Cpu *cpu, const DlcOp *op) {
    int64_t line = 64 / (cpu->f64 ? 8 : 4); /* DLRT_ALIGN bytes, in elements */
    Emit e = emit_state(cpu);
    int64_t n = dlc_cpu_packed(&e, op);
    return (n + line - 1) / line * line;
}

/* An op's row of the profile, as a C string literal: "conv1.out (conv2d,
 * infer_op0_conv1_out)", or for an op without a result "sgd_update
 * (train_op12_sgd_update)". */
static const char *op_row(Cpu *cpu, const DlcOp *op, const char *fname) {
    const char *kind = dlc_op_info(op->kind)->name;
    const char *row = op->nout ? dlc_arena_printf(&cpu->arena, "%s (%s, %s)", op->out[0]->name,
                                                  kind, fname)
                               : dlc_arena_printf(&cpu->arena, "%s (%s)", kind, fname);
    char *lit = dlc_arena_alloc(&cpu->arena, 2 * strlen(row) + 3), *q = lit;
    *q++ = '"';
    for (const char *c = row; *c; c++) {
        if (*c == '"' || *c == '\\')
            *q++ = '\\';
        *q++ = *c;
    }
    *q++ = '"', *q = 0;
    return lit;
}

/* The update (or param_grad) whose parameter's gradient dies at op, which
 * the step without updates (NAME_gradients) copies out there, as op's first
 * operand: op itself for param_grad and for an update of a gradient that
 * is not clipped; for clip_scale, the update that reads its result (the
 * gradient is copied before clipping, which that step skips); else NULL. */
static const DlcOp *gradient_dies_at(const DlcNetwork *net, const DlcOp *op) {
    if (op->kind == DLC_OP_CLIP_SCALE) {
        for (int i = 0; i < net->nops; i++)
            if (dlc_op_is_update(net->ops[i]->kind) && net->ops[i]->in[0] == op->out[0])
                return net->ops[i];
        return NULL;
    }
    const DlcValue *g = op->nin ? op->in[0] : NULL;
    bool clipped = g && g->kind == DLC_VAL_OP && g->def->kind == DLC_OP_CLIP_SCALE;
    return op->kind == DLC_OP_PARAM_GRAD || (dlc_op_is_update(op->kind) && !clipped) ? op : NULL;
}

/* The step without updates copies the gradient that op reads (as its
 * first operand) for the parameter of update `up`; dense_sgd_update and
 * dense_adam_update compute it there. */
static void put_gradient_copy(Cpu *cpu, Out *o, const DlcOp *op, const DlcOp *up,
                              const DlcMemPlan *plan) {
    const DlcValue *p = up->in[up->nin - up->nparams];
    long long off = (long long)gradient_copy_offset(cpu, p);
    if (dlc_op_is_dense_update(op->kind))
        put(o, "dlrt_dense_backward_weight%s(n, %lld, %lld, %s, %s, net->grads + %lld);\n", cpu->k,
            (long long)numel(op->in[1]), (long long)numel(op->in[0]), where(cpu, plan, op->in[0]),
            where(cpu, plan, op->in[1]), off);
    else
        put(o, "memcpy(net->grads + %lld, %s, sizeof *net->grads * %lld);\n", off,
            where(cpu, plan, op->in[0]), (long long)numel(op->in[0]));
}

/* The functions of one network, and the function that runs them in order. */
static void put_network(Cpu *cpu, Out *o, const DlcNetwork *net, const DlcMemPlan *plan,
                        const char *tag) {
    OpFunction *fn = dlc_arena_alloc(&cpu->arena, sizeof *fn * (size_t)(net->nops + 1));
    for (int i = 0; i < net->nops; i++)
        fn[i] = op_function(cpu, o, net->ops[i], i, tag);
    bool train = net == cpu->train;
    if (train)
        cpu->train_fns = fn;
    /* the ops' rows of the profile, after those of a network put before */
    int first_row = cpu->nop_rows;
    for (int i = 0; i < net->nops; i++)
        cpu->op_rows[cpu->nop_rows++] = op_row(cpu, net->ops[i], fn[i].name);
    /* the inference network's packed weights: each op's offset in
       net->packed, given to it in run_infer and to its packing function in
       pack_weights (NAME_freeze), which packs them all */
    int64_t packed_at = 0;
    const char **pack_calls = dlc_arena_alloc(&cpu->arena, sizeof(char *) * (size_t)(net->nops + 1));
    int npack_calls = 0;
    put(o, "\nstatic void run_%s(%s *net, int64_t n%s", tag, cpu->type,
        train ? ", bool update" : "");
    for (int i = 0; i < net->ninputs; i++) {
        const DlcValue *v = net->inputs[i];
        if (v->type.batched)
            put(o, ", const %s *restrict %s", ctype(cpu, v), ident(cpu, v->name));
        else if (v->type.dtype != DLC_I32 && v != cpu->clip)
            put(o, ", %s %s", ctype(cpu, v), ident(cpu, v->name));
    }
    put(o, ") {\n");
    if (net->nops)
        put(o, "    double lap = net->profile ? dlrt_clock() : 0;\n");
    else { /* a network that returns its inputs: nothing to run */
        put(o, "    (void)net;\n    (void)n;\n%s", train ? "    (void)update;\n" : "");
        for (int i = 0; i < net->ninputs; i++)
            if (net->inputs[i]->type.batched ||
                (net->inputs[i]->type.dtype != DLC_I32 && net->inputs[i] != cpu->clip))
                put(o, "    (void)%s;\n", ident(cpu, net->inputs[i]->name));
    }
    for (int i = 0; i < net->nops; i++) {
        const DlcOp *op = net->ops[i];
        /* clipping belongs to the update: the step without it skips both */
        bool in_update = dlc_op_is_update(op->kind) || dlc_op_is_clip(op->kind);
        put(o, "    %s%s(n", in_update ? "if (update)\n        " : "", fn[i].name);
        for (int j = 0; j < op->nin; j++)
            put(o, ", %s", where(cpu, plan, op->in[j]));
        for (int r = 0; r < op->nout; r++)
            put(o, ", %s", where(cpu, plan, op->out[r]));
        if (fn[i].work)
            put(o, ", net->work, net->threads");
        int64_t packed = packed_span(cpu, op);
        if (packed && net != cpu->infer)
            put(o, ", NULL");
        else if (packed) {
            put(o, ", net->frozen ? net->packed + %lld : NULL", (long long)packed_at);
            const char *args = ""; /* its weight, and the parameters after it it reads */
            for (int j = 0; j < dlc_cpu_pack_operands(op); j++)
                args = dlc_arena_printf(&cpu->arena, "%s%s, ", args,
                                        where(cpu, plan, op->in[op->nin - op->nparams + j]));
            pack_calls[npack_calls++] = dlc_arena_printf(
                &cpu->arena, "    %s_pack(%snet->packed + %lld, 0, 1);\n", fn[i].name, args,
                (long long)packed_at);
            packed_at += packed;
        }
        if (fn[i].seed)
            put(o, ", dlrt_rng_derive(net->seed, (uint64_t)net->step, %d)", i);
        bool lstm = dlc_recurrent_cell(op->kind) == DLC_OP_LSTM;
        for (int next = 0; next < fn[i].state; next++) {
            put(o, ", net->state + %lld * net->max_batch", (long long)state_at(cpu, op, next, 0));
            if (lstm)
                put(o, ", net->state + %lld * net->max_batch", (long long)state_at(cpu, op, next, 1));
            else
                put(o, ", NULL");
        }
        put(o, ");\n");
        /* the gradient dies here: NAME_gradients keeps a copy */
        const DlcOp *up = gradient_dies_at(net, op);
        if (up) {
            put(o, op->kind == DLC_OP_PARAM_GRAD ? "    if (!update)\n        " : "    else\n        ");
            put_gradient_copy(cpu, o, op, up, plan);
        }
        put(o, "    LAP(%d);\n", first_row + i);
    }
    put(o, "}\n");
    if (net != cpu->infer)
        return;
    if (packed_at != cpu->packed_floats)
        dlc_unreachable("cpu: the packed weights' offsets disagree with their size");
    put(o, "\nstatic void pack_weights(%s *net) {\n    (void)net;\n", cpu->type);
    for (int i = 0; i < npack_calls; i++)
        put(o, "%s", pack_calls[i]);
    put(o, "}\n");
}

/* ---- the header ---------------------------------------------------------- */

/* The vocabulary that an i32 input of token ids must stay within: the
 * smallest of the embeddings that read it; -1 when an op other than an
 * embedding reads it, or none does (labels: the training network's). */
static int64_t token_vocab(const DlcNetwork *net, const DlcValue *in) {
    int64_t vocab = -1;
    for (int i = 0; i < net->nops; i++) {
        const DlcOp *op = net->ops[i];
        if (!dlc_op_reads(op, in))
            continue;
        if (op->kind != DLC_OP_EMBEDDING)
            return -1;
        int64_t v = dlc_attr_int(op, DLC_A_VOCAB);
        vocab = vocab < 0 || v < vocab ? v : vocab;
    }
    return vocab;
}

/* The steps of the sequences whose lengths an i32 input is (lengths=true
 * on every recurrent op that reads it, as that operand); -1 when another op
 * reads it, or none does. */
static int64_t lengths_of(const DlcNetwork *net, const DlcValue *in) {
    int64_t steps = -1;
    for (int i = 0; i < net->nops; i++) {
        const DlcOp *op = net->ops[i];
        if (!dlc_op_reads(op, in))
            continue;
        if (dlc_recurrent_cell(op->kind) == DLC_OP_COUNT || !dlc_attr_bool(op, DLC_A_LENGTHS) ||
            op->in[op->nin - op->nparams - 1] != in)
            return -1;
        int64_t t = op->in[dlc_op_is_recurrent_grad(op->kind) ? 2 : 0]->type.dims[0];
        steps = steps < 0 || t < steps ? t : steps;
    }
    return steps;
}

/* The API function's check of its token inputs (dlrt_check_tokens) and
 * sequence lengths (dlrt_check_lengths), before it runs net: an id outside
 * the vocabulary or a length outside 0 to T is an error, never a read out
 * of bounds. */
static void put_token_checks(Cpu *cpu, Out *o, const DlcNetwork *net) {
    for (int i = 0; i < net->ninputs; i++) {
        const DlcValue *v = net->inputs[i];
        if (!v->type.batched || v->type.dtype != DLC_I32)
            continue;
        int64_t steps = lengths_of(net, v), vocab = token_vocab(net, v);
        const char *call =
            steps >= 0 ? dlc_arena_printf(&cpu->arena, "dlrt_check_lengths(%s, n, %lld, \"%s\", err)",
                                          ident(cpu, v->name), (long long)steps, v->name)
            : vocab >= 0
                ? dlc_arena_printf(&cpu->arena, "dlrt_check_tokens(%s, n, %lld, %lld, \"%s\", err)",
                                   ident(cpu, v->name),
                                   (long long)(v->type.rank ? v->type.dims[0] : 1),
                                   (long long)vocab, v->name)
                : NULL;
        if (call)
            put(o, "    {\n        DlrtStatus st = %s;\n        if (st != DLRT_OK)\n"
                   "            return st;\n    }\n", call);
    }
}

/* The batched inputs of a network, as API parameters. */
static void put_inputs(Cpu *cpu, Out *o, const DlcNetwork *net) {
    for (int i = 0; i < net->ninputs; i++) {
        const DlcValue *v = net->inputs[i];
        if (v->type.batched)
            put(o, ", const %s *%s", ctype(cpu, v), ident(cpu, v->name));
    }
}

static void put_header(Cpu *cpu, Out *o, const Figures *fig) {
    const char *p = cpu->prefix, *T = cpu->type, *U = cpu->upper;
    const DlcNetwork *net = cpu->infer;
    put(o, "/* %s.h — generated by dlc %s from %s; do not edit.\n *\n"
           " * The network '%s' compiled for the CPU.  See docs/embedding.md. */\n",
        p, DLC_VERSION, cpu->m->source ? cpu->m->source : "IR", net->name);
    /* C linkage for C++ products, as dlrt.h has it */
    put(o, "#ifndef %s_H\n#define %s_H\n\n#include \"dlrt.h\"\n\n"
           "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n", U, U);
    put(o, "typedef struct %s %s;\n\n", T, T);
    for (int i = 0; i < net->ninputs; i++)
        put(o, "#define %s_%s_SIZE %lld /* elements per sample of input '%s' */\n", U,
            ident(cpu, net->inputs[i]->name), (long long)numel(net->inputs[i]),
            net->inputs[i]->name);
    for (int i = 0; i < net->noutputs; i++)
        put(o, "#define %s_OUTPUT%d_SIZE %lld /* elements per sample of output %d */\n", U, i,
            (long long)numel(net->outputs[i]), i);
    int64_t trainable = 0;
    for (int i = 0; i < cpu->nparams; i++)
        if (cpu->params[i]->trainable)
            trainable += numel(cpu->params[i]);
    put(o, "#define %s_TRAINABLE %lld /* trainable parameters */\n", U, (long long)trainable);
    put(o, "#define %s_TENSORS %d /* parameters and buffers in a checkpoint */\n\n", U,
        cpu->nparams);
    put(o, "/* The activations' memory plan, in elements: each figure is\n"
           " * PER_SAMPLE * max_batch + FIXED.  ARENA is what %s_create allocates\n"
           " * for them; NAIVE is what a slot for every value would take; LOWER_BOUND\n"
           " * is the most that is live during any one op, which no plan that keeps\n"
           " * the batched values apart from the others can go below. */\n", p);
    const char *what[3] = {"ARENA", "NAIVE", "LOWER_BOUND"};
    const int64_t *val[3] = {fig->arena, fig->naive, fig->lower};
    for (int k = 0; k < 3; k++)
        put(o, "#define %s_%s_PER_SAMPLE %lld\n#define %s_%s_FIXED %lld\n", U, what[k],
            (long long)val[k][0], U, what[k], (long long)val[k][1]);
    put(o, "\n");
    put(o, "/* Bytes of memory for batches of up to max_batch samples: parameters,\n"
           " * optimizer state, activations and scratch (for dlrt_threads() threads);\n"
           " * all of it is allocated by %s_create, which uses that many threads at\n"
           " * most: set the thread count (dlrt_set_threads) before creating. */\n", p);
    put(o, "size_t %s_memory(int64_t max_batch);\n", p);
    put(o, "/* Bytes that %s_freeze allocates at its first call, beyond %s_memory. */\n"
           "#define %s_FREEZE_BYTES ((size_t)%lld)\n", p, p, U,
        (long long)(cpu->packed_floats * (cpu->f64 ? 8 : 4)));
    put(o, "/* A network with fresh parameters (PyTorch's initialization, from seed). */\n");
    put(o, "DlrtStatus %s_create(%s **net, int64_t max_batch, uint64_t seed, DlrtError *err);\n", p, T);
    put(o, "void %s_free(%s *net);\n", p, T);
    put(o, "/* Inference on n <= max_batch samples; out%s receive%s n * %s_OUTPUT*_SIZE floats. */\n",
        net->noutputs > 1 ? "*" : "0", net->noutputs > 1 ? "" : "s", U);
    put(o, "DlrtStatus %s_forward(%s *net, int64_t n", p, T);
    put_inputs(cpu, o, net);
    for (int i = 0; i < net->noutputs; i++)
        put(o, ", %s *out%d", cpu->real, i);
    put(o, ", DlrtError *err);\n");
    if (cpu->step) {
        put(o, "/* One step of n <= max_batch sequences: the next %s of each in (one\n"
               " * per sample), the scores of the step out (%lld per sample), each row\n"
               " * going on from the state the last call left in its row (%s_reset_state\n"
               " * starts anew): generating text a token at a time, at the cost of one\n"
               " * step instead of %s_forward's %lld. */\n",
            cpu->step->inputs[0]->type.dtype == DLC_I32 ? "token" : "step",
            (long long)numel(cpu->step->outputs[0]), p, p,
            (long long)net->inputs[0]->type.dims[0]);
        put(o, "DlrtStatus %s_forward_step(%s *net, int64_t n", p, T);
        put_inputs(cpu, o, cpu->step);
        put(o, ", %s *out0, DlrtError *err);\n", cpu->real);
    }
    if (cpu->state_rows)
        put(o, "/* The stateful recurrent layers (stateful=true) start each call from the\n"
               " * state the last call ended in, sample by sample (row i of a batch\n"
               " * continues row i of the last), and %s_train_step carries it on without\n"
               " * a gradient (truncated backpropagation through time).  reset_state\n"
               " * sets it to zero, the state of a new network. */\n"
               "void %s_reset_state(%s *net);\n", p, p, T);
    put(o, "/* Packs the weights for %s_forward: the convolutions that read them in\n"
           " * another order than they are stored (dlc's filter lanes) get their copy\n"
           " * now instead of at every call.  It lasts until the weights may change:\n"
           " * %s_train_step, %s_load and %s_tensor end it (forward then copies\n"
           " * per call again).  Change weights only through a %s_tensor pointer\n"
           " * taken after the last freeze, or freeze again afterwards.  Fails\n"
           " * (DLRT_E_NOMEM) only when the copy cannot be allocated. */\n"
           "DlrtStatus %s_freeze(%s *net, DlrtError *err);\n", p, p, p, p, p, p, T);
    if (cpu->train) {
        put(o, "/* One training step on n <= max_batch samples with learning rate lr:\n"
               " * forward, loss (into *loss), backward, weight update. */\n");
        put(o, "DlrtStatus %s_train_step(%s *net, int64_t n", p, T);
        put_inputs(cpu, o, cpu->train);
        put(o, ", %s lr, %s *loss, DlrtError *err);\n", cpu->real, cpu->real);
        put(o, "/* The same step without the update and without counting a step: the loss\n"
               " * and every gradient, which %s_gradient then shows (for gradient checks). */\n", p);
        put(o, "DlrtStatus %s_gradients(%s *net, int64_t n", p, T);
        put_inputs(cpu, o, cpu->train);
        put(o, ", %s *loss, DlrtError *err);\n", cpu->real);
        put(o, "/* The gradient of tensor i from the last %s_gradients (zeros before it; data\n"
               " * NULL for a buffer, or when the copy the gradients go to cannot be made). */\n", p);
        put(o, "DlrtTensor %s_gradient(%s *net, int i);\n", p, T);
    }
    put(o, "/* Checkpoints: every parameter and buffer, by name, in safetensors.  load\n"
           " * also takes a file of the inference network's tensors only (weights),\n"
           " * and then resets the optimizer's state. */\n");
    put(o, "DlrtStatus %s_save(const %s *net, const char *path, DlrtError *err);\n", p, T);
    put(o, "DlrtStatus %s_load(%s *net, const char *path, DlrtError *err);\n", p, T);
    put(o, "/* The same, with metadata: save_with adds up to DLRT_MAX_META entries to the\n"
           " * file's; load_with returns the file's (free them with dlrt_meta_free). */\n");
    put(o, "DlrtStatus %s_save_with(const %s *net, const char *path, const DlrtMeta *extra, "
           "int nextra,\n                        DlrtError *err);\n", p, T);
    put(o, "DlrtStatus %s_load_with(%s *net, const char *path, DlrtMeta **meta, int *nmeta,\n"
           "                        DlrtError *err);\n", p, T);
    put(o, "/* Parameter or buffer i (0 <= i < %s_TENSORS), for inspection or for\n"
           " * changing its values in place (which ends %s_freeze's copy). */\n", U, p);
    put(o, "DlrtTensor %s_tensor(%s *net, int i);\n", p, T);
    if (cpu->calib)
        put(o, "/* int8 (dlc --quantize=int8; docs/quantization.md): load_with refuses f32\n"
               " * weights and scales that are not positive and finite.  Calibration: the\n"
               " * f32 weights (a checkpoint of the f32 network, or its weights alone); the\n"
               " * f32 network on n samples, its scores and the f32 tensor each activation\n"
               " * scale is calibrated on; every int8 layer's weights from the f32 ones, a\n"
               " * batchnorm folded in (sqnr: each layer's weights' SQNR in dB); the int8\n"
               " * network's tensors alone, as safetensors. */\n"
               "DlrtStatus %s_load_f32(%s *net, const char *path, DlrtError *err);\n"
               "DlrtStatus %s_calib_forward(%s *net, int64_t n, const float *x, float *scores,\n"
               "                            float *const *observed, DlrtError *err);\n"
               "void %s_quantize_weights(%s *net, double *sqnr);\n"
               "DlrtStatus %s_save_int8(const %s *net, const char *path, const DlrtMeta *extra, int nextra,\n"
               "                        DlrtError *err);\n",
            p, T, p, T, p, T, p, T);
    put(o, "/* Training steps taken (Adam's count, saved in checkpoints), and setting\n"
           " * it, for a copy of the network kept elsewhere (on a GPU). */\n"
           "int32_t %s_step(const %s *net);\nvoid %s_set_step(%s *net, int32_t step);\n", p, T, p, T);
    if (cpu->clip)
        put(o, "/* Gradient clipping: the largest total norm of the gradients, to which\n"
               " * each training step scales them down before its update (as\n"
               " * torch.nn.utils.clip_grad_norm_); the train section's clip (%g) when\n"
               " * created.  0 turns clipping off. */\n"
               "%s %s_clip(const %s *net);\nvoid %s_set_clip(%s *net, %s clip);\n",
            clip_default(cpu), cpu->real, p, T, p, T, cpu->real);
}

/* ---- the API functions --------------------------------------------------- */

/* train_step, and gradients/gradient: the same step without the update,
 * for gradient checks, copying each gradient out where its update would
 * be (the copy is made at the first call, or by gradient). */
static void put_train_api(Cpu *cpu, Out *o, const DlcMemPlan *st) {
    const char *p = cpu->prefix, *T = cpu->type, *R = cpu->real;
    const DlcNetwork *tn = cpu->train;
    put(o, "static %s *gradient_copy(%s *net) {\n"
           "    if (!net->grads)\n        net->grads = dlrt_alloc(%lld + 1, sizeof *net->grads);\n"
           "    return net->grads;\n}\n\n", R, T, (long long)cpu->grad_floats);
    /* a step's final states become the next step's first once its backward
       pass, which reads the first (c0), is done */
    bool carries = false; /* the step has a stateful layer (NAME.step may alone) */
    for (int i = 0; i < tn->nops; i++)
        carries |= state_key(tn->ops[i]) != NULL;
    if (carries) {
        put(o, "static void carry_state(%s *net, int64_t n) {\n"
               "    int64_t b = net->max_batch;\n", T);
        for (int i = 0; i < tn->nops; i++) {
            const DlcOp *op = tn->ops[i];
            const DlcValue *key = state_key(op);
            if (!key || !dlc_op_is_recurrent_train(op->kind))
                continue;
            int parts = dlc_recurrent_cell(op->kind) == DLC_OP_LSTM ? 2 : 1;
            for (int k = 0; k < parts; k++)
                put(o, "    memcpy(net->state + %lld * b, net->state + %lld * b, sizeof *net->state "
                       "* (size_t)(n * %lld)); /* %s's %s */\n",
                    (long long)state_at(cpu, op, false, k), (long long)state_at(cpu, op, true, k),
                    (long long)dlc_attr_int(op, DLC_A_HIDDEN), key->name, k ? "c" : "h");
        }
        put(o, "}\n\n");
    }
    const char *names[2] = {"train_step", "gradients"};
    for (int k = 0; k < 2; k++) {
        put(o, "DlrtStatus %s_%s(%s *net, int64_t n", p, names[k], T);
        put_inputs(cpu, o, tn);
        put(o, "%s, %s *loss, DlrtError *err) {\n"
               "    if (n < 1 || n > net->max_batch)\n"
               "        return dlrt_fail(err, DLRT_E_ARG, \"batch of %%lld samples; this network takes 1 to %%lld\", (long long)n, (long long)net->max_batch);\n",
            k == 0 ? dlc_arena_printf(&cpu->arena, ", %s lr", R) : "", R);
        put_token_checks(cpu, o, tn);
        put(o, "%s    run_train(net, n, %s",
            k == 0 ? "    net->step++;\n    net->frozen = false; /* the update changes the weights */\n"
                   : dlc_arena_printf(&cpu->arena,
                                      "    if (!gradient_copy(net))\n"
                                      "        return dlrt_fail(err, DLRT_E_NOMEM, \"out of memory: %%zu bytes for the gradients\", sizeof *net->grads * (size_t)%lld);\n",
                                      (long long)cpu->grad_floats),
            k == 0 ? "true" : "false");
        for (int i = 0; i < tn->ninputs; i++) {
            const DlcValue *v = tn->inputs[i];
            if (v->type.batched || (v->type.dtype != DLC_I32 && v != cpu->clip))
                put(o, ", %s", v->type.batched ? ident(cpu, v->name) : k == 0 ? "lr" : "0");
        }
        put(o, ");\n%s    *loss = %s[0];\n    return DLRT_OK;\n}\n\n",
            k == 0 && carries ? "    carry_state(net, n);\n" : "",
            where(cpu, st, tn->outputs[0]));
    }
    put(o, "DlrtTensor %s_gradient(%s *net, int i) {\n"
           "    static const int64_t at[%d] = {", p, T, cpu->nparams ? cpu->nparams : 1);
    for (int i = 0; i < cpu->nparams; i++)
        put(o, "%s%lld", i ? ", " : "", (long long)gradient_copy_offset(cpu, cpu->params[i]));
    put(o, "};\n"
           "    DlrtTensor t = tensor_at(net, i);\n"
           "    t.data = at[i] < 0 || !gradient_copy(net) ? NULL : net->grads + at[i];\n"
           "    return t;\n}\n\n");
}

/* forward_step: NAME_forward at one step, going on from the state. */
static void put_step_api(Cpu *cpu, Out *o, const DlcMemPlan *ss) {
    const char *p = cpu->prefix, *T = cpu->type;
    const DlcNetwork *sn = cpu->step;
    const DlcValue *in = sn->inputs[0], *out = sn->outputs[0];
    put(o, "DlrtStatus %s_forward_step(%s *net, int64_t n", p, T);
    put_inputs(cpu, o, sn);
    put(o, ", %s *out0, DlrtError *err) {\n"
           "    if (n < 1 || n > net->max_batch)\n"
           "        return dlrt_fail(err, DLRT_E_ARG, \"batch of %%lld samples; this network takes 1 to %%lld\", (long long)n, (long long)net->max_batch);\n",
        cpu->real);
    put_token_checks(cpu, o, sn);
    put(o, "    run_step(net, n, %s);\n", ident(cpu, in->name));
    put(o, "    memcpy(out0, %s, sizeof *out0 * (size_t)(n * %lld));\n"
           "    return DLRT_OK;\n}\n\n", where(cpu, ss, out), (long long)numel(out));
}

/* Whether a parameter of the network starts with init (the create
 * function calls its initializer only then). */
static bool any_init(const Cpu *cpu, DlcInit init) {
    for (int i = 0; i < cpu->nparams; i++)
        if (cpu->params[i]->init == init)
            return true;
    return false;
}

/* Whether an int8 program's tensor i is an f32 one, which its f32
 * checkpoints hold: not the int8 network's own (F32_TENSORS). */
static bool is_f32_tensor(const Cpu *cpu, int i) {
    return i >= cpu->infer->nparams || dlc_map_get(&cpu->calib->names, cpu->params[i]->name);
}

static void put_api(Cpu *cpu, Out *o, const DlcMemPlan *si, const DlcMemPlan *st,
                    const DlcMemPlan *ss, const Figures *fig) {
    const char *p = cpu->prefix, *T = cpu->type;
    const DlcNetwork *net = cpu->infer;
    /* the two networks run one at a time, so they share the activations:
       a network's unbatched slots start after its own batched ones, so the
       larger of each part covers both */
    int64_t act_b = fig->arena[0], act_u = fig->arena[1];
    put(o, "\n/* ---- the API (%s.h) ---- */\n\n", p);
    /* the most scratch any op's function takes (the convolutions', the
       recurrent layers') */
    put(o, "/* Scratch for the ops run by `threads` workers, on batches of up to max_batch. */\n"
           "static int64_t work_floats(int threads, int64_t max_batch) {\n    int64_t most = 0;\n    (void)threads;\n    (void)max_batch;\n");
    for (int i = 0; i < cpu->nscratch; i++) {
        put(o, "    {\n");
        put(o, "%s", cpu->scratch[i]);
        put(o, "    if (w > most)\n        most = w;\n    }\n");
    }
    put(o, "    return most;\n}\n\n");
    put(o, "size_t %s_memory(int64_t max_batch) {\n"
           "    return sizeof(%s) * (size_t)(%lld + %lld * max_batch + %lld + work_floats(dlrt_threads(), max_batch));\n}\n\n",
        p, cpu->real, (long long)cpu->param_floats, (long long)(act_b + 2 * cpu->state_rows),
        (long long)act_u);

    /* tensors */
    put(o, "static const struct { const char *name; int rank; int64_t dims[6]; int64_t offset; "
           "int init; int64_t fan_in; bool int8; } TENSORS[] = {\n");
    for (int i = 0; i < cpu->nparams; i++) {
        const DlcValue *v = cpu->params[i];
        put(o, "    {\"%s\", %d, {", v->name, v->type.rank);
        for (int d = 0; d < v->type.rank; d++)
            put(o, "%s%lld", d ? ", " : "", (long long)v->type.dims[d]);
        put(o, "}, %lld, %d, %lld, %s},\n",
            (long long)((intptr_t)dlc_map_get(&cpu->param_off, v->name) - 1), (int)v->init,
            (long long)(v->fan_in ? v->fan_in : v->type.rank ? numel(v) / v->type.dims[0] : 1),
            v->type.dtype == DLC_I8 ? "true" : "false");
    }
    if (!cpu->nparams)
        put(o, "    {NULL, 0, {0}, 0, 0, 0, false}, /* no tensor: ISO C has no empty array */\n");
    put(o, "};\n\n");
    put(o, "int32_t %s_step(const %s *net) { return net->step; }\n"
           "void %s_set_step(%s *net, int32_t step) { net->step = step; }\n\n", p, T, p, T);
    if (cpu->clip)
        put(o, "%s %s_clip(const %s *net) { return net->clip; }\n"
               "void %s_set_clip(%s *net, %s clip) { net->clip = clip; }\n\n",
            cpu->real, p, T, p, T, cpu->real);
    put(o, "static DlrtTensor tensor_at(const %s *net, int i) {\n"
           "    DlrtTensor t = {TENSORS[i].name, TENSORS[i].int8 ? DLRT_I8 : %s, TENSORS[i].rank, {0}, net->params + TENSORS[i].offset};\n"
           "    for (int d = 0; d < t.rank; d++)\n        t.dims[d] = TENSORS[i].dims[d];\n"
           "    return t;\n}\n\n", T, cpu->f64 ? "DLRT_F64" : "DLRT_F32");
    put(o, "DlrtTensor %s_tensor(%s *net, int i) {\n"
           "    net->frozen = false; /* the caller may change the weights through it */\n"
           "    return tensor_at(net, i);\n}\n\n", p, T);
    put(o, "DlrtStatus %s_create(%s **out, int64_t max_batch, uint64_t seed, DlrtError *err) {\n"
           "    *out = NULL;\n"
           "    if (max_batch < 1)\n"
           "        return dlrt_fail(err, DLRT_E_ARG, \"the largest batch must be at least 1, not %%lld\", (long long)max_batch);\n"
           "    %s *net = calloc(1, sizeof *net);\n"
           "    if (!net)\n        return dlrt_fail(err, DLRT_E_NOMEM, \"out of memory\");\n"
           "    net->max_batch = max_batch;\n"
           "    net->seed = seed;\n"
           "    net->threads = dlrt_threads();\n"
           "    net->work_floats = work_floats(net->threads, max_batch);\n"
           "    net->params = dlrt_alloc(%lld + 1, sizeof *net->params);\n"
           "    net->act = dlrt_alloc((size_t)(%lld * max_batch + %lld + 1), sizeof *net->act);\n"
           "    net->work = dlrt_alloc((size_t)net->work_floats + 1, sizeof *net->work);\n"
           "%s"
           "    if (!net->params || !net->act || !net->work%s) {\n"
           "        %s_free(net);\n"
           "        return dlrt_fail(err, DLRT_E_NOMEM, \"out of memory: %%zu bytes needed\", %s_memory(max_batch));\n"
           "    }\n"
           "    DlrtRng rng;\n    dlrt_rng_seed(&rng, seed);\n"
           "    for (int i = 0; i < %d; i++) {\n"
           "        DlrtTensor t = tensor_at(net, i);\n"
           "        int64_t count = 1;\n        for (int d = 0; d < t.rank; d++)\n            count *= t.dims[d];\n"
           "        if (TENSORS[i].int8)\n            memset(t.data, 0, (size_t)count);\n"
           "        else if (TENSORS[i].init == %d)\n            dlrt_init_kaiming_uniform%s(t.data, count, TENSORS[i].fan_in, &rng);\n"
           "%s"
           "        else\n            dlrt_init_constant%s(t.data, count, TENSORS[i].init == %d ? 1 : 0);\n"
           "    }\n"
           "    net->profile = dlrt_profile_open(\"DLRT_PROFILE\", %d, OP_ROWS);\n"
           "%s"
           "    *out = net;\n    return DLRT_OK;\n}\n\n",
        p, T, T, (long long)cpu->param_floats, (long long)act_b, (long long)act_u,
        cpu->state_rows ? dlc_arena_printf(&cpu->arena, "    net->state = dlrt_alloc((size_t)(%lld * max_batch), sizeof *net->state);\n",
                                           (long long)(2 * cpu->state_rows))
                        : "",
        cpu->state_rows ? " || !net->state" : "", p, p,
        cpu->nparams, (int)DLC_INIT_KAIMING_UNIFORM, cpu->k,
        any_init(cpu, DLC_INIT_NORMAL)
            ? dlc_arena_printf(&cpu->arena, "        else if (TENSORS[i].init == %d)\n"
                               "            dlrt_init_normal%s(t.data, count, &rng);\n",
                               (int)DLC_INIT_NORMAL, cpu->k)
            : "",
        cpu->k, (int)DLC_INIT_ONES,
        cpu->nop_rows,
        cpu->clip ? dlc_arena_printf(&cpu->arena, "    net->clip = (%s)%.17g;\n", cpu->real,
                                     clip_default(cpu))
                  : "");
    put(o, "void %s_free(%s *net) {\n    if (!net)\n        return;\n"
           "    dlrt_profile_close(net->profile); /* prints it */\n"
           "    free(net->params);\n    free(net->act);\n    free(net->work);\n    free(net->grads);\n"
           "    free(net->packed);\n%s"
           "    free(net);\n}\n\n", p, T, cpu->state_rows ? "    free(net->state);\n" : "");
    if (cpu->state_rows)
        put(o, "void %s_reset_state(%s *net) {\n"
               "    memset(net->state, 0, sizeof *net->state * (size_t)(%lld * net->max_batch));\n}\n\n",
            p, T, (long long)cpu->state_rows);

    /* forward */
    put(o, "DlrtStatus %s_forward(%s *net, int64_t n", p, T);
    put_inputs(cpu, o, net);
    for (int i = 0; i < net->noutputs; i++)
        put(o, ", %s *out%d", cpu->real, i);
    put(o, ", DlrtError *err) {\n"
           "    if (n < 1 || n > net->max_batch)\n"
           "        return dlrt_fail(err, DLRT_E_ARG, \"batch of %%lld samples; this network takes 1 to %%lld\", (long long)n, (long long)net->max_batch);\n");
    put_token_checks(cpu, o, net);
    put(o, "    run_infer(net, n");
    for (int i = 0; i < net->ninputs; i++)
        if (net->inputs[i]->type.batched)
            put(o, ", %s", ident(cpu, net->inputs[i]->name));
    put(o, ");\n");
    for (int i = 0; i < net->noutputs; i++) {
        const DlcValue *v = net->outputs[i];
        put(o, "    memcpy(out%d, %s, sizeof *out%d * (size_t)(%s%lld));\n", i, where(cpu, si, v), i,
            v->type.batched ? "n * " : "", (long long)numel(v));
    }
    put(o, "    return DLRT_OK;\n}\n\n");
    put(o, "DlrtStatus %s_freeze(%s *net, DlrtError *err) {\n"
           "    if (%lld > 0 && !net->packed) {\n"
           "        net->packed = dlrt_alloc((size_t)%lld, sizeof *net->packed);\n"
           "        if (!net->packed)\n"
           "            return dlrt_fail(err, DLRT_E_NOMEM, \"out of memory: %%zu bytes for the packed weights\", %s_FREEZE_BYTES);\n"
           "    }\n"
           "    pack_weights(net);\n"
           "    net->frozen = true;\n"
           "    return DLRT_OK;\n}\n\n",
        p, T, (long long)cpu->packed_floats, (long long)cpu->packed_floats, cpu->upper);

    if (cpu->train)
        put_train_api(cpu, o, st);
    if (cpu->step)
        put_step_api(cpu, o, ss);

    /* checkpoints: the tensors, and in the metadata the network, the dlc
       version and the steps taken (Adam's bias correction and dropout's
       masks depend on it, so resuming must restore it) */
    /* an int8 program's: the f32 tensors, those its int8 network does not
       have of its own, as the f32 program saves them (calibrate reads them) */
    int nsaved = cpu->nparams;
    if (cpu->calib) {
        put(o, "static const int F32_TENSORS[] = {");
        nsaved = 0;
        for (int i = 0; i < cpu->nparams; i++)
            if (is_f32_tensor(cpu, i))
                put(o, "%s%d", nsaved++ ? ", " : "", i);
        put(o, "%s};\n\n", nsaved ? "" : "0");
    }
    put(o, "DlrtStatus %s_save_with(const %s *net, const char *path, const DlrtMeta *extra, int nextra,\n"
           "                        DlrtError *err) {\n"
           "    DlrtTensor t[%d];\n"
           "    for (int i = 0; i < %d; i++)\n        t[i] = tensor_at(net, %s);\n"
           "    char step[32];\n"
           "    snprintf(step, sizeof step, \"%%lld\", (long long)net->step);\n"
           "    DlrtMeta meta[3 + DLRT_MAX_META];\n"
           "    meta[0] = (DlrtMeta){\"network\", \"%s\"};\n"
           "    meta[1] = (DlrtMeta){\"dlc_version\", \"%s\"};\n"
           "    meta[2] = (DlrtMeta){\"step\", step};\n"
           "    if (nextra < 0 || nextra > DLRT_MAX_META)\n"
           "        return dlrt_fail(err, DLRT_E_ARG, \"%%d metadata entries; at most %%d\", nextra, DLRT_MAX_META);\n"
           "    for (int i = 0; i < nextra; i++)\n        meta[3 + i] = extra[i];\n"
           "    return dlrt_save_safetensors(path, t, %d, meta, 3 + nextra, err);\n}\n\n"
           "DlrtStatus %s_save(const %s *net, const char *path, DlrtError *err) {\n"
           "    return %s_save_with(net, path, NULL, 0, err);\n}\n\n",
        p, T, nsaved ? nsaved : 1, nsaved, cpu->calib ? "F32_TENSORS[i]" : "i", net->name,
        DLC_VERSION, nsaved, p, T, p);
    /* a full checkpoint restores the optimizer state too; a file of the
       inference network's tensors only (weights, as PyTorch saves them)
       loads with the optimizer state reset */
    int ninfer = cpu->infer->nparams;
    /* an int8 program's checks its loads (put_quant_api) */
    put(o, "%sDlrtStatus %s_load_%s(%s *net, const char *path, DlrtMeta **meta, int *nmeta,\n"
           "                        DlrtError *err) {\n"
           "    DlrtTensor t[%d];\n"
           "    net->frozen = false; /* even a load that fails may change the weights */\n"
           "    for (int i = 0; i < %d; i++)\n        t[i] = tensor_at(net, i);\n"
           "    DlrtMeta *m = NULL;\n    int nm = 0;\n"
           "    DlrtStatus st = dlrt_load_safetensors(path, t, %d, &m, &nm, err);\n"
           "    net->step = 0;\n"
           "    if (st == DLRT_E_SHAPE && %d != %d) {\n"
           "        DlrtError weights_only;\n"
           "        if (dlrt_load_safetensors(path, t, %d, &m, &nm, &weights_only) != DLRT_OK)\n"
           "            return st; /* the first message says what the file lacks */\n"
           "        for (int i = %d; i < %d; i++) {\n"
           "            int64_t count = 1;\n            for (int d = 0; d < t[i].rank; d++)\n                count *= t[i].dims[d];\n"
           "            %s(t[i].data, count, 0);\n        }\n"
           "        st = DLRT_OK;\n"
           "    } else if (st == DLRT_OK) {\n"
           "        for (int i = 0; i < nm; i++)\n"
           "            if (strcmp(m[i].key, \"step\") == 0)\n"
           "                net->step = (int32_t)strtol(m[i].value, NULL, 10);\n"
           "    }\n"
           "    if (st == DLRT_OK && meta) {\n        *meta = m;\n        *nmeta = nm;\n"
           "    } else\n        dlrt_meta_free(m, nm);\n"
           "    return st;\n}\n\n"
           "%s",
        cpu->calib ? "static " : "", p, cpu->calib ? "tensors" : "with", T,
        cpu->nparams ? cpu->nparams : 1, cpu->nparams, cpu->nparams, ninfer,
        cpu->nparams, ninfer, ninfer, cpu->nparams, cpu->f64 ? "dlrt_init_constant_f64" : "dlrt_init_constant",
        cpu->calib ? "" : dlc_arena_printf(&cpu->arena,
                                           "DlrtStatus %s_load(%s *net, const char *path, DlrtError *err) {\n"
                                           "    return %s_load_with(net, path, NULL, NULL, err);\n}\n",
                                           p, T, p));
}

/* ---- int8 programs: calibration (dlc --quantize=int8) --------------------- */

static bool is_classifier(const DlcNetwork *net, const DlcNetwork *tn);

/* p's index in TENSORS */
static int tensor_index(const Cpu *cpu, const DlcValue *p) {
    for (int i = 0; i < cpu->nparams; i++)
        if (strcmp(cpu->params[i]->name, p->name) == 0)
            return i;
    dlc_unreachable("cpu: no tensor %s", p->name);
}

static bool is_int8_layer(const DlcOp *op) {
    return op->kind == DLC_OP_QCONV2D || op->kind == DLC_OP_QDENSE;
}

/* The op of NAME.calib that an int8 layer of NAME came from: the one whose
 * result has its name (passes/quantize.c). */
static const DlcOp *f32_layer(const Cpu *cpu, const DlcOp *q) {
    const DlcValue *v = dlc_map_get(&cpu->calib->names, q->out[0]->name);
    if (!v || v->kind != DLC_VAL_OP)
        dlc_unreachable("cpu: %s has no f32 layer in %s", q->out[0]->name, cpu->calib->name);
    return v->def;
}

/* NAME_load_f32, NAME_calib_forward, NAME_quantize_weights, NAME_save_int8
 * and NAME_load_with, which refuses an f32 checkpoint and bad scales: the
 * DlrtQuant of an int8 program (runtime/dlrt.h). */
static void put_quant_api(Cpu *cpu, Out *o, const DlcMemPlan *sc) {
    const char *p = cpu->prefix, *T = cpu->type;
    const DlcNetwork *net = cpu->infer, *cal = cpu->calib;
    int ninfer = net->nparams;
    put(o, "\n/* ---- int8: calibration (dlc --quantize=int8; network @%s) ---- */\n\n", cal->name);
    /* the f32 tensors (F32_TENSORS, put_api): those that are not the int8
       network's own */
    int nf32 = 0;
    for (int i = 0; i < cpu->nparams; i++)
        nf32 += is_f32_tensor(cpu, i);
    put(o, "static const int CALIB_TENSORS[] = {");
    for (int i = 0; i < cal->nparams; i++)
        put(o, "%s%d", i ? ", " : "", tensor_index(cpu, cal->params[i]));
    put(o, "%s};\n", cal->nparams ? "" : "0");
    /* the table's arrays (the command line's): the activation scales, in
       order (NAME's scalar parameters), and the layers' names */
    bool table = is_classifier(net, cpu->train);
    Out none = {.name = o->name};
    none.f = open_memstream(&none.buf, &none.len);
    Out *to = table ? o : &none;
    int nscales = 0;
    put(to, "static const int SCALES[] = {");
    for (int i = 0; i < ninfer; i++)
        if (net->params[i]->type.rank == 0)
            put(to, "%s%d", nscales++ ? ", " : "", tensor_index(cpu, net->params[i]));
    put(to, "%s};\nstatic const int64_t OBSERVED[] = {", nscales ? "" : "0");
    if (cal->noutputs != net->noutputs + nscales)
        dlc_unreachable("cpu: %s returns %d tensors for %d scales", cal->name, cal->noutputs, nscales);
    for (int j = 0; j < nscales; j++)
        put(to, "%s%lld", j ? ", " : "", (long long)numel(cal->outputs[net->noutputs + j]));
    put(to, "%s};\n", nscales ? "" : "0");
    int nlayers = 0;
    put(to, "static const char *const QLAYERS[] = {");
    for (int i = 0; i < net->nops; i++)
        if (is_int8_layer(net->ops[i])) {
            const char *w = net->ops[i]->in[1]->name;
            put(to, "%s\"%.*s\"", nlayers++ ? ", " : "", (int)(strlen(w) - strlen(".qweight")), w);
        }
    put(to, "%s};\n", nlayers ? "" : "NULL");
    /* every scale of the layers, which a load checks */
    put(o, "static const int QLAYER_SCALES[] = {");
    int k = 0;
    for (int i = 0; i < net->nops; i++) {
        const DlcOp *op = net->ops[i];
        if (is_int8_layer(op))
            put(o, "%s%d, %d, %d", k++ ? ", " : "", tensor_index(cpu, op->in[2]),
                tensor_index(cpu, op->in[4]), op->nin > 5 ? tensor_index(cpu, op->in[5]) : -1);
    }
    put(o, "%s};\n", k ? "" : "0");
    /* and the result scales of the ops between the layers (qadd, qconcat,
       qglobalavgpool: their last parameter), which a load checks too */
    put(o, "static const int QJOIN_SCALES[] = {");
    int njoins = 0;
    for (int i = 0; i < net->nops; i++) {
        const DlcOp *op = net->ops[i];
        if (op->kind == DLC_OP_QADD || op->kind == DLC_OP_QCONCAT ||
            op->kind == DLC_OP_QGLOBALAVGPOOL)
            put(o, "%s%d", njoins++ ? ", " : "", tensor_index(cpu, op->in[op->nin - 1]));
    }
    put(o, "%s};\n\n", njoins ? "" : "-1");

    put(o, "DlrtStatus %s_load_f32(%s *net, const char *path, DlrtError *err) {\n"
           "    DlrtTensor t[%d];\n"
           "    net->frozen = false;\n"
           "    for (int i = 0; i < %d; i++)\n        t[i] = tensor_at(net, F32_TENSORS[i]);\n"
           "    DlrtStatus st = dlrt_load_safetensors(path, t, %d, NULL, NULL, err);\n"
           "    if (st == DLRT_E_SHAPE) { /* the f32 network's weights alone, whose message says\n"
           "                                 what the file lacks of them */\n"
           "        for (int i = 0; i < %d; i++)\n            t[i] = tensor_at(net, CALIB_TENSORS[i]);\n"
           "        st = dlrt_load_safetensors(path, t, %d, NULL, NULL, err);\n"
           "    }\n"
           "    return st;\n}\n\n",
        p, T, nf32 ? nf32 : 1, nf32, nf32, cal->nparams, cal->nparams);

    put(o, "DlrtStatus %s_calib_forward(%s *net, int64_t n, const float *x, float *scores,\n"
           "                            float *const *observed, DlrtError *err) {\n"
           "    if (n < 1 || n > net->max_batch)\n"
           "        return dlrt_fail(err, DLRT_E_ARG, \"batch of %%lld samples; this network takes 1 to %%lld\", (long long)n, (long long)net->max_batch);\n"
           "    run_calib(net, n, x);\n", p, T);
    for (int i = 0; i < cal->noutputs; i++) {
        const DlcValue *v = cal->outputs[i];
        if (i < net->noutputs && i > 0)
            continue; /* the scores: the first output */
        put(o, "    memcpy(%s, %s, sizeof(float) * (size_t)(n * %lld));\n",
            i == 0 ? "scores" : dlc_arena_printf(&cpu->arena, "observed[%d]", i - net->noutputs),
            v->kind == DLC_VAL_INPUT ? "x" : where(cpu, sc, v), (long long)numel(v));
    }
    put(o, "    return DLRT_OK;\n}\n\n");

    put(o, "void %s_quantize_weights(%s *net, double *sqnr) {\n    net->frozen = false;\n", p, T);
    int l = 0;
    for (int i = 0; i < net->nops; i++) {
        const DlcOp *q = net->ops[i];
        if (!is_int8_layer(q))
            continue;
        const DlcOp *f = f32_layer(cpu, q);
        const DlcValue *w = f->in[f->nin - f->nparams], *b = dlc_op_bias(f);
        int bn = dlc_op_folded_batchnorm(f);
        int64_t filters = w->type.dims[0];
        put(o, "    sqnr[%d] = dlrt_quantize_weights(%lld, %lld, %s, %s, ", l++, (long long)filters,
            (long long)(numel(w) / filters), where(cpu, NULL, w), b ? where(cpu, NULL, b) : "NULL");
        if (bn >= 0)
            put(o, "%s, %s, %s, %s, %.17g, ", where(cpu, NULL, f->in[bn]),
                where(cpu, NULL, f->in[bn + 1]), where(cpu, NULL, f->in[bn + 2]),
                where(cpu, NULL, f->in[bn + 3]), dlc_attr_float(f, DLC_A_BN_EPS));
        else
            put(o, "NULL, NULL, NULL, NULL, 0, ");
        put(o, "%s, %s, %s);\n", where(cpu, NULL, q->in[1]), where(cpu, NULL, q->in[2]),
            where(cpu, NULL, q->in[3]));
    }
    put(o, "%s}\n\n", l ? "" : "    (void)sqnr;\n");

    put(o, "DlrtStatus %s_save_int8(const %s *net, const char *path, const DlrtMeta *extra, int nextra,\n"
           "                        DlrtError *err) {\n"
           "    DlrtTensor t[%d];\n"
           "    for (int i = 0; i < %d; i++)\n        t[i] = tensor_at(net, i);\n"
           "    DlrtMeta meta[3 + DLRT_MAX_META];\n"
           "    meta[0] = (DlrtMeta){\"network\", \"%s\"};\n"
           "    meta[1] = (DlrtMeta){\"dlc_version\", \"%s\"};\n"
           "    meta[2] = (DlrtMeta){\"quantized\", \"int8\"};\n"
           "    if (nextra < 0 || nextra > DLRT_MAX_META)\n"
           "        return dlrt_fail(err, DLRT_E_ARG, \"%%d metadata entries; at most %%d\", nextra, DLRT_MAX_META);\n"
           "    for (int i = 0; i < nextra; i++)\n        meta[3 + i] = extra[i];\n"
           "    return dlrt_save_safetensors(path, t, %d, meta, 3 + nextra, err);\n}\n\n",
        p, T, ninfer ? ninfer : 1, ninfer, net->name, DLC_VERSION, ninfer);

    /* the load: an f32 checkpoint is refused by name, and every scale
       must be positive and finite */
    put(o, "DlrtStatus %s_load_with(%s *net, const char *path, DlrtMeta **meta, int *nmeta,\n"
           "                        DlrtError *err) {\n"
           "    DlrtStatus st = %s_load_tensors(net, path, meta, nmeta, err);\n"
           "    DlrtError f32;\n"
           "    if (st == DLRT_E_SHAPE && %s_load_f32(net, path, &f32) == DLRT_OK)\n"
           "        return dlrt_fail(err, DLRT_E_SHAPE, \"%%s holds the f32 weights of %s, and this program \"\n"
           "                         \"runs it in int8 (dlc --quantize=int8): calibrate them first \"\n"
           "                         \"(calibrate --weights %%s --data DIR --save INT8.safetensors)\", path, path);\n"
           "    if (st != DLRT_OK)\n        return st;\n"
           "    for (int l = 0; l < %d * 3 + %d; l++) {\n"
           "        int at = l < %d * 3 ? QLAYER_SCALES[l] : QJOIN_SCALES[l - %d * 3];\n"
           "        if (at < 0)\n            continue;\n"
           "        DlrtTensor t = tensor_at(net, at);\n"
           "        int64_t count = t.rank ? t.dims[0] : 1;\n"
           "        for (int64_t i = 0; i < count; i++) {\n"
           "            float v = ((const float *)t.data)[i];\n"
           "            if (v > 0 && isfinite(v))\n                continue;\n"
           "            if (meta) {\n                dlrt_meta_free(*meta, *nmeta);\n"
           "                *meta = NULL;\n                *nmeta = 0;\n            }\n"
           "            return dlrt_fail(err, DLRT_E_FORMAT, \"%%s: the scale %%s[%%lld] is %%g: a scale must be \"\n"
           "                             \"positive and finite\", path, t.name, (long long)i, (double)v);\n"
           "        }\n"
           "    }\n"
           "    return DLRT_OK;\n}\n\n"
           "DlrtStatus %s_load(%s *net, const char *path, DlrtError *err) {\n"
           "    return %s_load_with(net, path, NULL, NULL, err);\n}\n",
        p, T, p, p, net->name, nlayers, njoins, nlayers, nlayers, p, T, p);

    fclose(none.f);
    free(none.buf);
    if (!table)
        return;
    put(o, "\nstatic DlrtStatus quant_load_f32(void *net, const char *path, DlrtError *err) {\n"
           "    return %s_load_f32(net, path, err);\n}\n"
           "static DlrtStatus quant_calib_forward(void *net, int64_t n, const float *x, float *scores,\n"
           "                                      float *const *observed, DlrtError *err) {\n"
           "    return %s_calib_forward(net, n, x, scores, observed, err);\n}\n"
           "static void quant_quantize_weights(void *net, double *sqnr) { %s_quantize_weights(net, sqnr); }\n"
           "static DlrtStatus quant_save(const void *net, const char *path, const DlrtMeta *extra, int nextra,\n"
           "                             DlrtError *err) {\n"
           "    return %s_save_int8(net, path, extra, nextra, err);\n}\n"
           "static const DlrtQuant QUANT = {\n"
           "    .ninfer = %d,\n    .nscales = %d,\n    .scales = SCALES,\n    .observed = OBSERVED,\n"
           "    .nlayers = %d,\n    .layers = QLAYERS,\n    .layer_scales = QLAYER_SCALES,\n"
           "    .load_f32 = quant_load_f32,\n    .calib_forward = quant_calib_forward,\n"
           "    .quantize_weights = quant_quantize_weights,\n    .save = quant_save,\n};\n",
        p, p, p, p, ninfer, nscales, nlayers);
}

static void put_call_with_ids(Cpu *cpu, Out *o, const DlcValue *in, const char *call);

/* ---- data-parallel training: NAME_train_step_dist -------------------------- */

/* Whether the network gets a distributed step: a program's classifier
 * trained with updates, in f32.  A stateful layer's rows of net->state
 * are the rank's rows of each batch, which stay the same from batch to
 * batch (runtime/program/distributed.c), so each rank carries its own. */
static bool dist_wanted(const Cpu *cpu) {
    return cpu->train && !cpu->f64 && is_classifier(cpu->infer, cpu->train);
}

/* The gradient buffer net->grads in the buckets' layout: NAME_gradients
 * copies into the same places, so one buffer serves both. */
static void use_bucket_layout(Cpu *cpu) {
    dlc_map_init(&cpu->grad_off, &cpu->arena);
    for (int i = 0; i < cpu->buckets.ngrads; i++)
        dlc_map_put(&cpu->grad_off, cpu->buckets.grads[i].param->name,
                    (void *)(intptr_t)(cpu->buckets.grads[i].offset + 1));
    cpu->grad_floats = cpu->buckets.floats;
}

/* A value's storage in the distributed step: a gradient is written where
 * its bucket holds it, everything else where the training step's plan
 * puts it. */
static const char *dist_where(Cpu *cpu, const DlcMemPlan *plan, const DlcValue *v) {
    const DlcBucketGrad *g = dlc_bucket_of_value(&cpu->buckets, v);
    return g ? dlc_arena_printf(&cpu->arena, "(net->grads + %lld)", (long long)g->offset)
             : where(cpu, plan, v);
}

/* A call of the training step's op function i, as run_train makes it,
 * with the gradients in their buckets. */
static void put_dist_call(Cpu *cpu, Out *o, const DlcMemPlan *plan, int i) {
    const DlcOp *op = cpu->train->ops[i];
    const OpFunction *fn = &cpu->train_fns[i];
    put(o, "    %s(n", fn->name);
    for (int j = 0; j < op->nin; j++)
        put(o, ", %s", dist_where(cpu, plan, op->in[j]));
    for (int r = 0; r < op->nout; r++)
        put(o, ", %s", dist_where(cpu, plan, op->out[r]));
    if (fn->work)
        put(o, ", net->work, net->threads");
    if (packed_span(cpu, op))
        put(o, ", NULL");
    if (fn->seed)
        put(o, ", dlrt_rng_derive(net->seed, (uint64_t)net->step, %d)", i);
    bool lstm = dlc_recurrent_cell(op->kind) == DLC_OP_LSTM;
    for (int next = 0; next < fn->state; next++) /* as run_train gives them */
        put(o, ", net->state + %lld * net->max_batch, %s", (long long)state_at(cpu, op, next, 0),
            lstm ? dlc_arena_printf(&cpu->arena, "net->state + %lld * net->max_batch",
                                    (long long)state_at(cpu, op, next, 1))
                 : "NULL");
    put(o, ");\n");
}

/* A cross-entropy (or its gradient) of one rank's rows, over the rows of
 * the whole batch: the ranks' losses and gradients add up to the batch's. */
static void put_dist_loss(Cpu *cpu, Out *o, const DlcMemPlan *plan, const DlcOp *op) {
    const DlcType *t = &op->in[0]->type;
    long long classes = (long long)t->dims[t->rank - 1];
    long long steps = t->rank == 2 ? (long long)t->dims[0] : 1;
    const char *x = where(cpu, plan, op->in[0]), *y = where(cpu, plan, op->in[1]);
    if (op->kind == DLC_OP_CROSS_ENTROPY)
        put(o, "    %s[0] = (float)dlrt_cross_entropy_part(%s, %s, n * %lld, %lld, total * %lld, "
               "NULL);\n", where(cpu, plan, op->out[0]), x, y, steps, classes, steps);
    else
        put(o, "    dlrt_cross_entropy_part(%s, %s, n * %lld, %lld, total * %lld, %s);\n", x, y,
            steps, classes, steps, where(cpu, plan, op->out[0]));
}

/* The update of a dense layer's weight whose gradient the distributed step
 * computed into its bucket (the fused dense_sgd_update or
 * dense_adam_update, taken apart). */
static void put_dist_dense_update(Cpu *cpu, Out *o, const DlcMemPlan *plan, const DlcOp *op,
                                  const DlcBucketGrad *g) {
    Emit e = emit_state(cpu);
    const char *p = where(cpu, plan, op->in[op->nin - op->nparams]);
    if (op->kind == DLC_OP_DENSE_SGD_UPDATE)
        put(o, "    dlrt_sgd_update(%lld, net->grads + %lld, %s, %s, false, %s, %s, %s);\n",
            (long long)g->count, (long long)g->offset, where(cpu, plan, op->in[2]),
            dlc_cpu_cfloat(&e, dlc_attr_float(op, DLC_A_MOMENTUM)),
            dlc_cpu_cfloat(&e, dlc_attr_float(op, DLC_A_WEIGHT_DECAY)), p,
            op->nparams == 2 ? where(cpu, plan, op->in[op->nin - 1]) : "NULL");
    else
        put(o, "    dlrt_adam_update(%lld, net->grads + %lld, %s, %s, %s, %s, %s, %s, %s, %s, %s);\n",
            (long long)g->count, (long long)g->offset, where(cpu, plan, op->in[2]),
            where(cpu, plan, op->in[3]), dlc_cpu_cfloat(&e, dlc_attr_float(op, DLC_A_BETA1)),
            dlc_cpu_cfloat(&e, dlc_attr_float(op, DLC_A_BETA2)),
            dlc_cpu_cfloat(&e, dlc_attr_float(op, DLC_A_EPS)),
            dlc_cpu_cfloat(&e, dlc_attr_float(op, DLC_A_WEIGHT_DECAY)), p,
            where(cpu, plan, op->in[op->nin - 2]), where(cpu, plan, op->in[op->nin - 1]));
}

/* An op of the update phase: clipping, or an update reading its gradient
 * from its bucket. */
static void put_dist_update(Cpu *cpu, Out *o, const DlcMemPlan *plan, int i, int first_row) {
    const DlcOp *op = cpu->train->ops[i];
    const DlcBucketGrad *g = dlc_bucket_of_update(&cpu->buckets, op);
    if (dlc_op_is_dense_update(op->kind) && g)
        put_dist_dense_update(cpu, o, plan, op, g);
    else
        put_dist_call(cpu, o, plan, i);
    put(o, "    LAP(%d);\n", first_row + i);
}

/* Whether op belongs to the update phase, which runs once the sums are
 * there: updates and clipping (which needs every gradient's sum). */
static bool dist_deferred(const DlcOp *op) {
    return dlc_op_is_update(op->kind) || dlc_op_is_clip(op->kind) ||
           op->kind == DLC_OP_PARAM_GRAD;
}

/* The bucket table, run_dist and NAME_train_step_dist. */
static void put_dist(Cpu *cpu, Out *o, const DlcMemPlan *plan) {
    const DlcNetwork *tn = cpu->train;
    const DlcBucketPlan *bp = &cpu->buckets;
    const char *p = cpu->prefix, *T = cpu->type;
    int first_row = cpu->infer->nops; /* the training step's rows follow inference's */
    put(o, "\n/* ---- data-parallel training: the gradients in %d bucket%s, in the order the\n"
           " * backward pass completes them (passes/plan_buckets.c) ---- */\n\n",
        bp->nbuckets, bp->nbuckets == 1 ? "" : "s");
    put(o, "static const DlrtBucket DIST_BUCKETS[%d] = {\n", bp->nbuckets ? bp->nbuckets : 1);
    for (int b = 0; b < bp->nbuckets; b++) {
        const DlcBucket *k = &bp->buckets[b];
        put(o, "    {%lld, %lld, \"", (long long)k->offset, (long long)k->count);
        for (int j = 0; j < k->ngrads; j++)
            put(o, "%s%s", j ? ", " : "", bp->grads[k->first + j].param->name);
        put(o, "\", %s},\n", cpu->op_rows[first_row + k->ready]);
    }
    if (!bp->nbuckets)
        put(o, "    {0, 0, \"\", \"\"}, /* no bucket: ISO C has no empty array */\n");
    put(o, "};\n\n");
    bool clips = false;
    for (int i = 0; i < tn->nops; i++)
        clips |= dlc_op_is_clip(tn->ops[i]->kind);

    put(o, "/* One rank's step: the backward pass hands each bucket to r once its last\n"
           " * gradient is there; each bucket's updates wait for its sum%s. */\n",
        clips ? " (clipping: for every bucket's, since the norm takes them all)" : "");
    put(o, "static DlrtStatus run_dist(%s *net, int64_t n, int64_t total", T);
    for (int i = 0; i < tn->ninputs; i++) {
        const DlcValue *v = tn->inputs[i];
        if (v->type.batched)
            put(o, ", const %s *restrict %s", ctype(cpu, v), ident(cpu, v->name));
        else if (v->type.dtype != DLC_I32 && v != cpu->clip)
            put(o, ", %s %s", ctype(cpu, v), ident(cpu, v->name));
    }
    put(o, ", const DlrtReducer *r, DlrtError *err) {\n"
           "    double lap = net->profile ? dlrt_clock() : 0;\n"
           "    (void)lap;\n    (void)total;\n    (void)r;\n    (void)err;\n"
           "    if (n == 0) { /* no sample for this rank: it adds zeros */\n"
           "        memset(net->grads, 0, sizeof *net->grads * (size_t)%lld);\n"
           "        for (int b = 0; r && b < %d; b++)\n"
           "            r->ready(r->ctx, b, net->grads + DIST_BUCKETS[b].offset, DIST_BUCKETS[b].count);\n"
           "    } else {\n", (long long)bp->floats, bp->nbuckets);
    for (int i = 0; i < tn->nops; i++) {
        const DlcOp *op = tn->ops[i];
        const DlcBucketGrad *g = dlc_bucket_of_update(bp, op);
        if (op->kind == DLC_OP_CROSS_ENTROPY || op->kind == DLC_OP_CROSS_ENTROPY_GRAD)
            put_dist_loss(cpu, o, plan, op);
        else if (dlc_op_is_dense_update(op->kind) && g) { /* its gradient, now */
            put(o, "    ");
            put_gradient_copy(cpu, o, op, op, plan);
        }
        else if (dist_deferred(op))
            continue;
        else
            put_dist_call(cpu, o, plan, i);
        put(o, "    LAP(%d);\n", first_row + i);
        for (int b = 0; b < bp->nbuckets; b++)
            if (bp->buckets[b].ready == i)
                put(o, "    if (r) /* bucket %d is complete */\n"
                       "        r->ready(r->ctx, %d, net->grads + %lld, %lld);\n", b, b,
                    (long long)bp->buckets[b].offset, (long long)bp->buckets[b].count);
        put(o, "    if (r)\n        r->progress(r->ctx);\n");
    }
    put(o, "    }\n");
    /* the update phase: a bucket's updates as soon as its sum is there,
       or, with clipping, every op of it in order once all are */
    for (int b = 0; b < bp->nbuckets; b++) {
        put(o, "    if (r) {\n"
               "        DlrtStatus st = r->wait(r->ctx, %d, err);\n"
               "        if (st != DLRT_OK)\n            return st;\n    }\n", b);
        for (int i = 0; !clips && i < tn->nops; i++) {
            const DlcBucketGrad *g = dlc_bucket_of_update(bp, tn->ops[i]);
            if (dist_deferred(tn->ops[i]) && g && g->bucket == b)
                put_dist_update(cpu, o, plan, i, first_row);
        }
    }
    for (int i = 0; i < tn->nops; i++) {
        const DlcBucketGrad *g = dlc_bucket_of_update(bp, tn->ops[i]);
        if (dist_deferred(tn->ops[i]) && (clips || !g))
            put_dist_update(cpu, o, plan, i, first_row);
    }
    put(o, "    return DLRT_OK;\n}\n\n");

    put(o, "DlrtStatus %s_train_step_dist(%s *net, int64_t n, int64_t total", p, T);
    put_inputs(cpu, o, tn);
    put(o, ", float lr, float *loss,\n                              const DlrtReducer *r, DlrtError *err) {\n"
           "    if (n < 0 || n > net->max_batch || total < n || total < 1)\n"
           "        return dlrt_fail(err, DLRT_E_ARG, \"%%lld samples of a batch of %%lld; this network takes 0 to %%lld\", (long long)n, (long long)total, (long long)net->max_batch);\n"
           "    if (!gradient_copy(net))\n"
           "        return dlrt_fail(err, DLRT_E_NOMEM, \"out of memory: %%zu bytes for the gradients\", sizeof *net->grads * (size_t)%lld);\n",
        (long long)bp->floats);
    put(o, "    if (n > 0) {\n");
    put_token_checks(cpu, o, tn);
    put(o, "    }\n");
    put(o, "    net->step++;\n    net->frozen = false; /* the update changes the weights */\n"
           "    DlrtStatus st = run_dist(net, n, total");
    for (int i = 0; i < tn->ninputs; i++) {
        const DlcValue *v = tn->inputs[i];
        if (v->type.batched || (v->type.dtype != DLC_I32 && v != cpu->clip))
            put(o, ", %s", v->type.batched ? ident(cpu, v->name) : "lr");
    }
    bool carries = false; /* as put_train_api: the step carries a state on */
    for (int i = 0; i < tn->nops; i++)
        carries |= state_key(tn->ops[i]) != NULL;
    put(o, ", r, err);\n%s"
           "    *loss = n > 0 ? %s[0] : 0;\n    return st;\n}\n",
        carries ? "    if (st == DLRT_OK && n > 0)\n        carry_state(net, n);\n" : "",
        where(cpu, plan, tn->outputs[0]));
}

/* The table's train_step_dist (token ids as floats, as model_train_step
 * takes them). */
static void put_dist_table_function(Cpu *cpu, Out *o) {
    const DlcValue *in = cpu->infer->inputs[0];
    put(o, "static DlrtStatus model_train_step_dist(void *net, int64_t n, int64_t total, const float *x,\n"
           "                                        const int32_t *labels, float lr, float *loss,\n"
           "                                        const DlrtReducer *r, DlrtError *err) {\n");
    if (in->type.dtype == DLC_I32) /* nothing to convert */
        put(o, "    if (n == 0)\n        return %s_train_step_dist(net, 0, total, NULL, labels, lr, loss, r, err);\n",
            cpu->prefix);
    put_call_with_ids(cpu, o, in, dlc_arena_printf(&cpu->arena, "%s_train_step_dist(net, n, total, x, labels, lr, loss, r, err)", cpu->prefix));
    put(o, "}\n");
}

/* Its declaration in NAME.h. */
static void put_dist_header(Cpu *cpu, Out *o) {
    const char *p = cpu->prefix;
    put(o, "/* Data-parallel training (docs/distributed.md): one rank's training step on\n"
           " * its n samples (0 <= n <= max_batch) of a batch of `total` samples\n"
           " * split among the ranks.  The gradients go to %lld floats laid out in %d\n"
           " * bucket%s (%s_BUCKETS), which r sums across the ranks while the\n"
           " * backward pass goes on; the updates use the sums (r NULL: this rank's\n"
           " * alone).  *loss is this rank's part of the batch's mean loss: its rows'\n"
           " * losses over `total`. */\n",
        (long long)cpu->buckets.floats, cpu->buckets.nbuckets,
        cpu->buckets.nbuckets == 1 ? "" : "s", cpu->upper);
    put(o, "#define %s_BUCKETS %d\n", cpu->upper, cpu->buckets.nbuckets);
    put(o, "DlrtStatus %s_train_step_dist(%s *net, int64_t n, int64_t total", p, cpu->type);
    put_inputs(cpu, o, cpu->train);
    put(o, ", float lr,\n                              float *loss, const DlrtReducer *r, DlrtError *err);\n");
}

/* FNV-1a of the module's IR text without its source locations: what ranks
 * compare before they train together (the same network compiled from
 * another path is the same network). */
static unsigned long long network_hash(const DlcModule *m) {
    char *text;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    dlc_print_module(f, m);
    fclose(f);
    unsigned long long h = 14695981039346656037ull;
    for (size_t i = 0; i < len; i++) {
        if (strncmp(text + i, " loc(", 5) == 0) { /* to the end of the line */
            while (i < len && text[i] != '\n')
                i++;
            if (i == len)
                break;
        }
        h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
    }
    free(text);
    return h;
}

/* ---- the program's view: DlrtModel ------------------------------------------ */

/* Whether dlrt_main can drive the network: one per-sample f32 input, one
 * [classes] output, trained with cross-entropy against labels. */
/* Whether the generated program's command line can run the network: one
 * input, f32 values or token ids (an embedding's), one output of class
 * scores, [classes] or [T, classes] at every step (a language model), and
 * a training network whose loss is the cross-entropy against labels. */
static bool is_classifier(const DlcNetwork *net, const DlcNetwork *tn) {
    if (!tn || net->ninputs != 1 || net->noutputs != 1 || net->inputs[0]->type.rank > 4 ||
        (net->inputs[0]->type.dtype != DLC_F32 && token_vocab(net, net->inputs[0]) < 0) ||
        net->outputs[0]->type.rank < 1 || net->outputs[0]->type.rank > 2 ||
        !net->outputs[0]->type.batched)
        return false;
    const DlcValue *loss = tn->outputs[0];
    return loss->kind == DLC_VAL_OP && loss->def->kind == DLC_OP_CROSS_ENTROPY &&
           loss->def->in[1]->kind == DLC_VAL_INPUT;
}

/* Whether each step of net's output depends on the steps up to it only:
 * no recurrent layer runs backwards (what `sample` needs, which reads the
 * scores of a context shorter than the network's steps). */
static bool is_causal(const DlcNetwork *net) {
    for (int i = 0; i < net->nops; i++)
        if (dlc_op_is_recurrent(net->ops[i]->kind) && dlc_attr_bool(net->ops[i], DLC_A_REVERSE))
            return false;
    return net->outputs[0]->type.rank == 2;
}

static bool cpu_is_program(const DlcModule *m, const DlcNetwork *net) {
    char train_name[512];
    snprintf(train_name, sizeof train_name, "%s.train", net->name);
    return is_classifier(net, dlc_module_find_network(m, train_name));
}

static double cfg_num(const DlcCfg *v, double def) {
    return !v ? def : v->kind == DLC_CFG_INT ? (double)v->i : v->kind == DLC_CFG_FLOAT ? v->f : def;
}

/* A C string literal of s. */
static void put_cstring(Out *o, const char *s) {
    put(o, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            put(o, "\\%c", *s);
        else if (*s == '\n')
            put(o, "\\n\"\n    \"");
        else if ((unsigned char)*s < 0x20)
            put(o, "\\%03o", (unsigned char)*s);
        else
            put(o, "%c", *s);
    }
    put(o, "\"");
}

/* Text for the optimizer of a train section: "sgd(lr=0.01, momentum=0.9)". */
static char *cfg_text(const DlcCfg *v) {
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    if (!v)
        fputs("sgd", f);
    else if (v->kind == DLC_CFG_SYM)
        fputs(v->s, f);
    else if (v->kind == DLC_CFG_CALL) {
        fprintf(f, "%s(", v->s);
        for (int i = 0; i < v->nargs; i++) {
            char num[64];
            const DlcCfg *a = &v->args[i].val;
            if (a->kind == DLC_CFG_INT)
                snprintf(num, sizeof num, "%lld", (long long)a->i);
            else if (a->kind == DLC_CFG_FLOAT)
                dlc_format_double(num, sizeof num, a->f);
            else
                snprintf(num, sizeof num, "%s", a->kind == DLC_CFG_BOOL ? (a->b ? "true" : "false") : "?");
            fprintf(f, "%s%s%s%s", i ? ", " : "", v->args[i].key ? v->args[i].key : "",
                    v->args[i].key ? "=" : "", num);
        }
        fputc(')', f);
    }
    fclose(f);
    return buf;
}

/* The body of a table function that returns call: for a network of token
 * ids, which the tables pass as floats (a dataset's), call takes x
 * converted to int32 ids, exactly (dlrt_tokens_from_floats). */
static void put_call_with_ids(Cpu *cpu, Out *o, const DlcValue *in, const char *call) {
    if (in->type.dtype != DLC_I32) {
        put(o, "    return %s;\n", call);
        return;
    }
    long long steps = (long long)(in->type.rank ? in->type.dims[0] : 1);
    put(o, "    if (n < 1 || n > INT64_MAX / %lld)\n"
           "        return dlrt_fail(err, DLRT_E_ARG, \"batch of %%lld samples\", (long long)n);\n"
           "    int32_t *ids = malloc(sizeof *ids * (size_t)(n * %lld));\n"
           "    if (!ids)\n        return dlrt_fail(err, DLRT_E_NOMEM, \"out of memory for the token ids\");\n"
           "    DlrtStatus st = dlrt_tokens_from_%s(x, n * %lld, ids, err);\n"
           "    if (st == DLRT_OK) {\n"
           "        const int32_t *x = ids; /* the call's x */\n"
           "        st = %s;\n    }\n"
           "    free(ids);\n    return st;\n",
        steps, steps, cpu->f64 ? "doubles" : "floats", steps, call);
}

/* The API's functions with void * for the network, as the tables of
 * dlrt_main take them. */
static void put_table_functions(Cpu *cpu, Out *o) {
    const char *p = cpu->prefix, *T = cpu->type, *R = cpu->real;
    put(o, "static DlrtStatus model_create(void **net, int64_t max_batch, uint64_t seed, DlrtError *err) {\n"
           "    return %s_create((%s **)net, max_batch, seed, err);\n}\n", p, T);
    put(o, "static void model_free(void *net) { %s_free(net); }\n", p);
    put(o, "static DlrtTensor model_tensor(void *net, int i) { return %s_tensor(net, i); }\n", p);
    put(o, "static DlrtTensor model_gradient(void *net, int i) { return %s_gradient(net, i); }\n", p);
    put(o, "static DlrtStatus model_gradients(void *net, int64_t n, const %s *x, const int32_t *labels,\n"
           "                                  %s *loss, DlrtError *err) {\n", R, R);
    put_call_with_ids(cpu, o, cpu->infer->inputs[0], dlc_arena_printf(&cpu->arena, "%s_gradients(net, n, x, labels, loss, err)", p));
    put(o, "}\n");
}

static void put_check(Cpu *cpu, Out *o) {
    put(o, "\n/* ---- the gradient check's view (dlrt_main) ---- */\n\n");
    put_table_functions(cpu, o);
    put(o, "\nconst DlrtCheck %s_check = {\n    .create = model_create,\n    .free = model_free,\n"
           "    .tensor = model_tensor,\n    .gradient = model_gradient,\n"
           "    .gradients = model_gradients,\n};\n", cpu->prefix);
}

static void put_model(Cpu *cpu, Out *o) {
    const char *p = cpu->prefix;
    const DlcNetwork *net = cpu->infer;
    const DlcTrain *tr = dlc_module_find_train(cpu->m, net->name);
    const DlcCfg *data = tr ? dlc_train_get(tr, "data") : NULL;
    const DlcCfg *opt = tr ? dlc_train_get(tr, "optimizer") : NULL;
    const DlcCfg *sched = tr ? dlc_train_get(tr, "schedule") : NULL;
    const DlcCfg *lr = opt && opt->kind == DLC_CFG_CALL ? dlc_cfg_arg(opt, "lr", 0) : NULL;
    bool adam = opt && strcmp(opt->s, "adam") == 0;
    const DlcValue *in = net->inputs[0];

    put(o, "\n/* ---- the command line (dlrt_main) ---- */\n\n");
    put_table_functions(cpu, o);
    put(o, "static DlrtStatus model_forward(void *net, int64_t n, const float *x, float *out, DlrtError *err) {\n");
    put_call_with_ids(cpu, o, cpu->infer->inputs[0], dlc_arena_printf(&cpu->arena, "%s_forward(net, n, x, out, err)", p));
    put(o, "}\n");
    put(o, "static DlrtStatus model_freeze(void *net, DlrtError *err) { return %s_freeze(net, err); }\n", p);
    put(o, "static DlrtStatus model_train_step(void *net, int64_t n, const float *x, const int32_t *labels,\n"
           "                                   float lr, float *loss, DlrtError *err) {\n");
    put_call_with_ids(cpu, o, cpu->infer->inputs[0], dlc_arena_printf(&cpu->arena, "%s_train_step(net, n, x, labels, lr, loss, err)", p));
    put(o, "}\n");
    if (cpu->dist)
        put_dist_table_function(cpu, o);
    if (cpu->clip)
        put(o, "static void model_set_clip(void *net, double clip) { %s_set_clip(net, (float)clip); }\n",
            p);
    if (cpu->state_rows)
        put(o, "static void model_reset_state(void *net) { %s_reset_state(net); }\n", p);
    if (cpu->step) {
        put(o, "static DlrtStatus model_forward_step(void *net, int64_t n, const float *x, float *out, DlrtError *err) {\n");
        put_call_with_ids(cpu, o, cpu->step->inputs[0],
                          dlc_arena_printf(&cpu->arena, "%s_forward_step(net, n, x, out, err)", p));
        put(o, "}\n");
    }
    put(o, "static DlrtStatus model_save(const void *net, const char *path, const DlrtMeta *extra,\n"
           "                             int nextra, DlrtError *err) {\n"
           "    return %s_save_with(net, path, extra, nextra, err);\n}\n", p);
    put(o, "static DlrtStatus model_load(void *net, const char *path, DlrtMeta **meta, int *nmeta,\n"
           "                             DlrtError *err) {\n"
           "    return %s_load_with(net, path, meta, nmeta, err);\n}\n\n", p);

    /* the layers, one line per op of the inference network */
    char *layers;
    size_t len;
    FILE *f = open_memstream(&layers, &len);
    for (int i = 0; i < net->nops; i++) {
        const DlcOp *op = net->ops[i];
        char ty[DLC_TYPE_STR_MAX];
        fprintf(f, "%s  %-14s %-18s", i ? "\n" : "", dlc_op_info(op->kind)->name,
                dlc_type_str(&op->out[0]->type, ty, sizeof ty));
        int64_t count = 0;
        for (int j = op->nin - op->nparams; j < op->nin; j++)
            count += op->in[j]->trainable ? numel(op->in[j]) : 0;
        if (count)
            fprintf(f, " %lld parameters", (long long)count);
    }
    fclose(f);

    int64_t trainable = 0;
    for (int i = 0; i < cpu->nparams; i++)
        trainable += cpu->params[i]->trainable ? numel(cpu->params[i]) : 0;
    char *optimizer = cfg_text(opt);
    bool images = data && data->kind == DLC_CFG_CALL && strcmp(data->s, "images") == 0;
    if (images) { /* the folder and its transforms, as libdlrt parses them */
        put(o, "static const DlrtImageSource %s_images = {\n    .path = ", p);
        put_cstring(o, dlc_cfg_arg(data, "path", 0)->s);
        put(o, ",\n    .val_fraction = %.17g", cfg_num(dlc_cfg_arg(data, "val", 1), 0.1));
        const char *which[2] = {"train", "eval"};
        const char *keys[2] = {"train_transform", "eval_transform"};
        for (int k = 0; k < 2; k++) {
            const DlcCfg *tf = dlc_cfg_arg(data, keys[k], 2 + k);
            char *text = tf ? dlc_train_transform_text(tf) : NULL;
            put(o, ",\n    .%s = ", which[k]);
            if (text)
                put_cstring(o, text);
            else
                put(o, "NULL");
            free(text);
        }
        put(o, ",\n};\n\n");
    }
    put(o, "const DlrtModel %s_model = {\n    .name = \"%s\",\n    .source = ", p, net->name);
    put_cstring(o, cpu->m->source ? cpu->m->source : "IR");
    put(o, ",\n    .layers = ");
    put_cstring(o, layers);
    put(o, ",\n    .rank = %d,\n    .dims = {", in->type.rank);
    for (int d = 0; d < in->type.rank; d++)
        put(o, "%s%lld", d ? ", " : "", (long long)in->type.dims[d]);
    const DlcType *scores = &net->outputs[0]->type;
    put(o, "},\n    .input_size = %lld,\n    .classes = %lld,\n    .steps = %lld,\n"
           "    .vocab = %lld,\n    .causal = %s,\n    .trainable = %lld,\n",
        (long long)numel(in), (long long)scores->dims[scores->rank - 1],
        (long long)(scores->rank == 2 ? scores->dims[0] : 1),
        (long long)(in->type.dtype == DLC_I32 ? token_vocab(net, in) : 0),
        is_causal(net) ? "true" : "false", (long long)trainable);
    bool text = data && data->kind == DLC_CFG_CALL && strcmp(data->s, "text") == 0;
    put(o, "    .data = ");
    if (data && data->kind == DLC_CFG_CALL && strcmp(data->s, "idx") == 0 && data->nargs)
        put_cstring(o, data->args[0].val.s);
    else
        put(o, "NULL");
    put(o, ",\n    .text = ");
    if (text)
        put_cstring(o, dlc_cfg_arg(data, "path", 0)->s);
    else
        put(o, "NULL");
    put(o, ",\n    .val_fraction = %.17g",
        cfg_num(text ? dlc_cfg_arg(data, "val", 1) : NULL, 0.1));
    if (images)
        put(o, ",\n    .images = &%s_images", p);
    const DlcCfg *every = sched && sched->kind == DLC_CFG_CALL ? dlc_cfg_arg(sched, "every", 0) : NULL;
    const DlcCfg *gamma = sched && sched->kind == DLC_CFG_CALL ? dlc_cfg_arg(sched, "gamma", 1) : NULL;
    const DlcCfg *min_lr = sched && sched->kind == DLC_CFG_CALL ? dlc_cfg_arg(sched, "min_lr", 0) : NULL;
    put(o, ",\n    .batch = %lld,\n    .epochs = %lld,\n    .lr = %.17g,\n    .seed = %lluu,\n",
        (long long)cfg_num(tr ? dlc_train_get(tr, "batch") : NULL, 64),
        (long long)cfg_num(tr ? dlc_train_get(tr, "epochs") : NULL, 10),
        cfg_num(lr, adam ? 0.001 : 0.01),
        (unsigned long long)cfg_num(tr ? dlc_train_get(tr, "seed") : NULL, 0));
    put(o, "    .schedule = \"%s\",\n    .step_every = %lld,\n    .gamma = %.17g,\n"
           "    .min_lr = %.17g,\n    .warmup = %lld,\n    .optimizer = ",
        sched ? sched->s : "constant", (long long)cfg_num(every, 0), cfg_num(gamma, 0.1),
        cfg_num(min_lr, 0), (long long)cfg_num(tr ? dlc_train_get(tr, "warmup") : NULL, 0));
    put_cstring(o, optimizer);
    if (cpu->clip)
        put(o, ",\n    .clip = %.17g,\n    .set_clip = model_set_clip", clip_default(cpu));
    if (cpu->state_rows)
        put(o, ",\n    .reset_state = model_reset_state");
    if (cpu->step)
        put(o, ",\n    .forward_step = model_forward_step");
    put(o, ",\n    .arena = {%s_ARENA_PER_SAMPLE, %s_ARENA_FIXED},\n"
           "    .naive = {%s_NAIVE_PER_SAMPLE, %s_NAIVE_FIXED},\n"
           "    .lower_bound = {%s_LOWER_BOUND_PER_SAMPLE, %s_LOWER_BOUND_FIXED}",
        cpu->upper, cpu->upper, cpu->upper, cpu->upper, cpu->upper, cpu->upper);
    put(o, ",\n    .memory = %s_memory,\n    .create = model_create,\n    .free = model_free,\n"
           "    .forward = model_forward,\n    .freeze = model_freeze,\n    .train_step = model_train_step,\n"
           "    .save = model_save,\n    .load = model_load,\n    .ntensors = %d,\n"
           "    .tensor = model_tensor,\n    .gradient = model_gradient,\n"
           "    .gradients = model_gradients,\n    .device = \"cpu\",\n", p, cpu->nparams);
    if (cpu->dist)
        put(o, "    .hash = 0x%016llxull,\n    .nbuckets = %d,\n    .buckets = DIST_BUCKETS,\n"
               "    .grad_floats = %lld,\n    .train_step_dist = model_train_step_dist,\n",
            network_hash(cpu->m), cpu->buckets.nbuckets, (long long)cpu->buckets.floats);
    if (cpu->calib)
        put(o, "    .quant = &QUANT,\n");
    put(o, "};\n");
    free(layers);
    free(optimizer);
}

/* ---- files ---------------------------------------------------------------- */

/* Writes o's text to dir/name (dlc_write_file: atomically). */
static bool write_out(DlcCtx *ctx, const char *dir, const Out *o) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, o->name);
    return dlc_write_file(ctx, path, o->buf, o->len);
}

static bool emit_network(DlcCtx *ctx, const DlcModule *m, const DlcNetwork *net,
                         const DlcEmitOptions *opt, const char *dir) {
    bool f64 = opt && opt->dtype == DLC_F64;
    const char *suffix = opt && opt->suffix ? opt->suffix : "";
    Cpu cpu = {.ctx = ctx, .m = m, .infer = net, .ok = true, .f64 = f64, .cuda = opt && opt->cuda,
               .real = f64 ? "double" : "float", .k = f64 ? "_f64" : ""};
    cpu.prefix = dlc_arena_printf(&cpu.arena, "%s%s", net->name, suffix);
    char train_name[512];
    snprintf(train_name, sizeof train_name, "%s.train", net->name);
    cpu.train = dlc_module_find_network(m, train_name);
    cpu.clip = clip_input(cpu.train);
    snprintf(train_name, sizeof train_name, "%s.step", net->name);
    cpu.step = dlc_module_find_network(m, train_name);
    snprintf(train_name, sizeof train_name, "%s.calib", net->name);
    cpu.calib = f64 ? NULL : dlc_module_find_network(m, train_name); /* gradcheck has no use of it */
    const char *pre = cpu.prefix;
    snprintf(cpu.type, sizeof cpu.type, "%c%s", pre[0] >= 'a' && pre[0] <= 'z' ? pre[0] - 'a' + 'A'
                                                                              : pre[0], pre + 1);
    for (size_t i = 0; pre[i] && i + 1 < sizeof cpu.upper; i++)
        cpu.upper[i] = (char)(pre[i] >= 'a' && pre[i] <= 'z' ? pre[i] - 'a' + 'A' : pre[i]);
    dlc_map_init(&cpu.param_off, &cpu.arena);
    for (int i = 0; i < net->nparams; i++)
        add_param(&cpu, net->params[i]);
    for (int i = 0; cpu.train && i < cpu.train->nparams; i++)
        add_param(&cpu, cpu.train->params[i]);
    for (int i = 0; cpu.calib && i < cpu.calib->nparams; i++)
        add_param(&cpu, cpu.calib->params[i]);
    dlc_map_init(&cpu.state_off, &cpu.arena);
    add_states(&cpu, net);
    add_states(&cpu, cpu.train);
    add_states(&cpu, cpu.step);
    for (int i = 0; i < net->ninputs; i++) {
        const DlcValue *in = net->inputs[i];
        if (in->type.batched && in->type.dtype == DLC_I32
                ? token_vocab(net, in) < 0 && lengths_of(net, in) < 0
                : in->type.dtype != DLC_F32) {
            /* labels belong to the training network only */
            dlc_error(ctx, in->loc, "cpu: input '%s' must be f32, or i32 token ids that only "
                      "embeddings read, or sequence lengths that only recurrent layers read "
                      "(f64 inputs are not generated yet)", in->name);
            cpu.ok = false;
        }
    }

    for (int i = 0; i < net->nops; i++)
        cpu.packed_floats += packed_span(&cpu, net->ops[i]);

    DlcMemPlan si, st, ss, sc;
    DlcPlanKind kind = !opt || opt->plan_memory ? DLC_PLAN_SHARED : DLC_PLAN_OWN;
    dlc_plan_memory(&cpu.arena, net, kind, false, &si);
    if (cpu.train)
        dlc_plan_memory(&cpu.arena, cpu.train, kind, false, &st);
    if (cpu.step)
        dlc_plan_memory(&cpu.arena, cpu.step, kind, false, &ss);
    if (cpu.calib)
        dlc_plan_memory(&cpu.arena, cpu.calib, kind, false, &sc);
    add_gradient_copies(&cpu);
    cpu.dist = dist_wanted(&cpu);
    if (cpu.dist) {
        dlc_plan_buckets(&cpu.arena, cpu.train, opt ? opt->bucket_bytes : 0, &cpu.buckets);
        use_bucket_layout(&cpu);
    }

    char hname[300], cname[300];
    snprintf(hname, sizeof hname, "%s.h", pre);
    snprintf(cname, sizeof cname, "%s.c", pre);
    Out h = {.name = hname}, c = {.name = cname};
    h.f = open_memstream(&h.buf, &h.len);
    c.f = open_memstream(&c.buf, &c.len);
    Figures fig = figures(&si, cpu.train ? &st : &si);
    if (cpu.step) /* the third network shares the activations too */
        fig = figures(&(DlcMemPlan){.size = {fig.arena[0], fig.arena[1]},
                                    .naive = {fig.naive[0], fig.naive[1]},
                                    .lower = {fig.lower[0], fig.lower[1]}},
                      &ss);
    if (cpu.calib) /* and the f32 network of an int8 one */
        fig = figures(&(DlcMemPlan){.size = {fig.arena[0], fig.arena[1]},
                                    .naive = {fig.naive[0], fig.naive[1]},
                                    .lower = {fig.lower[0], fig.lower[1]}},
                      &sc);
    put_header(&cpu, &h, &fig);
    if (cpu.dist)
        put_dist_header(&cpu, &h);
    put(&c, "/* %s — generated by dlc %s from %s; do not edit.\n *\n"
            " * One function per op (its IR in a comment above it, its .dl line in a\n"
            " * #line directive), the functions that run them in order, then the API\n"
            " * of %s. */\n#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\n#include \"%s\"\n",
        cname, DLC_VERSION, m->source ? m->source : "IR", hname, hname);
    put(&c, "\nstruct %s {\n    int64_t max_batch;\n    %s *params; /* parameters and buffers */\n"
            "    %s *act;    /* every value of a step, batch first */\n"
            "    %s *work;   /* convolution scratch, for `threads` workers */\n    int64_t work_floats;\n"
            "    %s *grads;  /* each parameter's gradient from NAME_gradients (made by its first call) */\n"
            "    %s *packed; /* the weights in the order of the loops that read them (NAME_freeze) */\n"
            "    bool frozen;   /* packed is up to date: NAME_forward reads it */\n"
            "    int threads;   /* the kernels' threads at most (dlrt_threads() when created) */\n"
            "    int32_t step;  /* training steps taken, for Adam */\n"
            "    uint64_t seed; /* of the initialization, and of dropout's masks */\n"
            "    DlrtProfile *profile; /* DLRT_PROFILE=1: each op's time (OP_ROWS), or NULL */\n%s%s};\n",
        cpu.type, cpu.real, cpu.real, cpu.real, cpu.real, cpu.real,
        cpu.clip ? dlc_arena_printf(&cpu.arena, "    %s clip;    /* the gradients' largest norm (NAME_set_clip) */\n",
                                    cpu.real)
                 : "",
        cpu.state_rows ? dlc_arena_printf(&cpu.arena, "    %s *state;  /* the stateful layers' states, each sample's row\n"
                                          "                      (NAME_reset_state), then a training step's next ones */\n",
                                          cpu.real)
                       : "");
    put(&c, "\n/* DLRT_PROFILE=1: the time since the last lap, added to row K of the\n"
            " * profile (OP_ROWS); run_infer and run_train lap after each op. */\n"
            "#define LAP(K) (net->profile ? (void)(lap = dlrt_profile_lap(net->profile, (K), lap)) : (void)0)\n");
    cpu.op_rows = dlc_arena_alloc(&cpu.arena, sizeof(char *) *
                                  (size_t)(net->nops + (cpu.train ? cpu.train->nops : 0) +
                                           (cpu.step ? cpu.step->nops : 0) +
                                           (cpu.calib ? cpu.calib->nops : 0) + 1));
    put(&c, "\n/* ---- inference: network @%s ---- */\n", net->name);
    put_network(&cpu, &c, net, &si, "infer");
    if (cpu.train) {
        put(&c, "\n/* ---- training step: network @%s ---- */\n", cpu.train->name);
        put_network(&cpu, &c, cpu.train, &st, "train");
    }
    if (cpu.step) {
        put(&c, "\n/* ---- one step: network @%s ---- */\n", cpu.step->name);
        put_network(&cpu, &c, cpu.step, &ss, "step");
    }
    if (cpu.calib) {
        put(&c, "\n/* ---- the f32 network, for calibration: network @%s ---- */\n", cpu.calib->name);
        put_network(&cpu, &c, cpu.calib, &sc, "calib");
    }
    put(&c, "\n/* The profile's rows (DLRT_PROFILE=1): the ops, in the order of LAP. */\n"
            "static const char *const OP_ROWS[%d] = {\n", cpu.nop_rows ? cpu.nop_rows : 1);
    for (int i = 0; i < cpu.nop_rows; i++)
        put(&c, "    %s,\n", cpu.op_rows[i]);
    if (!cpu.nop_rows)
        put(&c, "    NULL, /* no op: ISO C has no empty array */\n");
    put(&c, "};\n");
    put_api(&cpu, &c, &si, cpu.train ? &st : NULL, cpu.step ? &ss : NULL, &fig);
    if (cpu.calib)
        put_quant_api(&cpu, &c, &sc);
    if (cpu.dist)
        put_dist(&cpu, &c, &st);
    if (is_classifier(cpu.infer, cpu.train) && f64) {
        put_check(&cpu, &c);
        put(&h, "\n/* The network in f64, for the gradient check of a generated program. */\n"
                "extern const DlrtCheck %s_check;\n", cpu.prefix);
    } else if (is_classifier(cpu.infer, cpu.train)) {
        put_model(&cpu, &c);
        put(&h, "\n/* The network as the command line of a generated program sees it:\n"
                " * int main(int argc, char **argv) { return dlrt_main(argc, argv, &%s_model); } */\n"
                "extern const DlrtModel %s_model;\n", cpu.prefix, cpu.prefix);
        if (cpu.cuda)
            put(&h, "/* The same on an NVIDIA GPU (%s_cuda.c). */\n"
                    "const DlrtModel *%s_cuda_model(void);\n", cpu.prefix, cpu.prefix);
    }
    put(&h, "\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
    fclose(h.f);
    fclose(c.f);
    bool ok = cpu.ok && write_out(ctx, dir, &h) && write_out(ctx, dir, &c);
    free(h.buf);
    free(c.buf);
    dlc_arena_free(&cpu.arena);
    return ok;
}

static bool cpu_emit(DlcCtx *ctx, const DlcModule *m, const DlcEmitOptions *opt,
                     const char *dir) {
    bool ok = true;
    for (int i = 0; i < m->nnetworks; i++) {
        if (dlc_is_derived_network(m->networks[i]->name))
            continue; /* emitted with its network */
        ok &= emit_network(ctx, m, m->networks[i], opt, dir);
    }
    return ok;
}

const char *const dlc_cpu_passes[] = {"autodiff", "optimizer", "step", "cse", "dce",
                                      "fuse", "quantize", "layout", "fuse-residual", "tile",
                                      "recompute", NULL};

const DlcTarget dlc_target_cpu = {
    .name = "cpu",
    .emit_kind = "c",
    .summary = "C for the CPU (NAME.h and NAME.c), calling libdlrt",
    .passes = dlc_cpu_passes,
    .emit = cpu_emit,
    .is_program = cpu_is_program,
    .autotune = dlc_cpu_autotune,
};
