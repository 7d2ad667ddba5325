/* plan_memory.h — the memory plan: an analysis, not a pass.
 *
 * The code generators run it on each network to place every value in the
 * activation arena; the recompute pass runs it to measure a step's peak.
 * It changes no IR, so it is not in the pass registry (passes.h), and a code
 * generator that reads it includes this header alone. */
#ifndef DLC_PLAN_MEMORY_H
#define DLC_PLAN_MEMORY_H

#include "../ir/ir.h"

/* Where each op result lives in the activation arena.  Values in a batch
 * are in part 0, in floats per sample (the arena holds max_batch samples of
 * it); the others in part 1, in floats. */
typedef struct DlcMemPlan {
    DlcMap offset;    /* value name -> offset in its part + 1 */
    int64_t size[2];  /* the arena's parts */
    int64_t naive[2]; /* each value in a slot of its own */
    int64_t lower[2]; /* the most live at any one op: no plan needs less */
    int64_t *live[2]; /* what is live during each op */
    DlcMap last;      /* op result name -> the last op that needs it + 1 (the
                         end for outputs, and for parameter gradients when
                         they are kept), before in-place sharing joins it to
                         another value */
} DlcMemPlan;

typedef enum DlcPlanKind {
    DLC_PLAN_SHARED,  /* values share memory over time, and in place where the
                         op allows it */
    DLC_PLAN_OWN,     /* a slot of its own for each value (-fno-plan-memory) */
    DLC_PLAN_MEASURE, /* the figures of SHARED (live, lower, naive) without
                         placing anything: no offsets, no sizes */
} DlcPlanKind;

/* Plans net's results as the generated code runs it: the outputs live to
 * the end; the gradient of each parameter dies at its weight update, or
 * with keep_gradients lives to the end too, for a code generator whose
 * NAME_gradient shows it in the arena after NAME_gradients (the GPU's; the
 * CPU's copies each gradient out at its update instead). */
void dlc_plan_memory(DlcArena *arena, const DlcNetwork *net, DlcPlanKind kind,
                     bool keep_gradients, DlcMemPlan *plan);
/* The elements a value (or parameter) takes in the arena: numel (a quarter
 * of it for int8, four to an element) rounded up to 16, so that every
 * buffer starts 64-byte aligned. */
int64_t dlc_plan_elements(const DlcValue *v);
/* The last op that needs an op result, as the plan counts it. */
int dlc_plan_last_use(const DlcMemPlan *plan, const DlcValue *v);
/* A planned value's offset in its part. */
int64_t dlc_plan_offset(const DlcMemPlan *plan, const DlcValue *v);
/* The op that consumes the gradient of parameter p in a training network:
 * its weight update (or its param_grad, before the optimizer pass); NULL
 * for buffers and for networks without a backward pass. */
const DlcOp *dlc_param_update(const DlcNetwork *net, const DlcValue *p);
/* The gradient of p that its update consumes: the update's first operand,
 * or where that is the gradient clipped (clip_scale), the gradient before
 * clipping; NULL also for a dense_sgd_update or dense_adam_update, which
 * compute the gradient themselves. */
const DlcValue *dlc_param_gradient(const DlcNetwork *net, const DlcValue *p);

#endif /* DLC_PLAN_MEMORY_H */
