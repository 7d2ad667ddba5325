/* print.c — the IR's text form.
 *
 *   network @lenet5(%image: f32[N,1,28,28]) {
 *     param @x.weight: f32[6,1,5,5] init=kaiming_uniform
 *     param @h.weight_ih_l0: f32[512,28] init=kaiming_uniform fan_in=128
 *     %x = conv2d(%image, @x.weight, @x.bias) {filters=6, kernel=5, pad=2} : f32[N,6,28,28] loc("lenet5.dl":3:9)
 *     return %x.9
 *   }
 *
 * One op per line with its operands, the attributes that differ from their
 * defaults (in schema order), its result types and its source location.
 * The output is stable (it depends only on the module) and parse.c reads it
 * back to the same module, so print(parse(print(m))) == print(m).  docs/ir.md
 * describes the format. */
#include "ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dlc_format_double(char *buf, size_t size, double x) {
    if (!isfinite(x)) {
        snprintf(buf, size, "%s", isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    if (!strpbrk(buf, ".eE") && strlen(buf) + 3 < size)
        strcat(buf, ".0");
}

void dlc_print_string(FILE *out, const char *s);
void dlc_print_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c == '\t')
            fputs("\\t", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static void print_type(FILE *out, const DlcType *t) {
    char buf[DLC_TYPE_STR_MAX];
    fputs(dlc_type_str(t, buf, sizeof buf), out);
}

static void print_value_ref(FILE *out, const DlcValue *v) {
    fprintf(out, "%c%s", v->kind == DLC_VAL_PARAM ? '@' : '%', v->name);
}

static void print_attr(FILE *out, const DlcAttr *a) {
    char buf[64];
    switch (a->type) {
    case DLC_ATTR_INT:
        fprintf(out, "%lld", (long long)a->i);
        break;
    case DLC_ATTR_FLOAT:
        dlc_format_double(buf, sizeof buf, a->f);
        fputs(buf, out);
        break;
    case DLC_ATTR_BOOL:
        fputs(a->b ? "true" : "false", out);
        break;
    case DLC_ATTR_PAIR:
        if (a->pair[0] == a->pair[1])
            fprintf(out, "%lld", (long long)a->pair[0]);
        else
            fprintf(out, "[%lld,%lld]", (long long)a->pair[0], (long long)a->pair[1]);
        break;
    }
}

static void print_loc(FILE *out, const DlcModule *m, DlcLoc loc) {
    if (loc.file < 0 || loc.file >= m->ctx->nfiles || m->ctx->files[loc.file].is_ir)
        return;
    fputs(" loc(", out);
    dlc_print_string(out, dlc_ctx_path(m->ctx, loc));
    fprintf(out, ":%d:%d)", loc.line, loc.col);
}

static void print_op(FILE *out, const DlcModule *m, const DlcOp *op) {
    const DlcOpInfo *info = dlc_op_info(op->kind);
    fputs("  ", out);
    for (int i = 0; i < op->nout; i++) {
        fputs(i ? ", " : "", out);
        print_value_ref(out, op->out[i]);
    }
    fprintf(out, "%s%s(", op->nout ? " = " : "", info->name);
    for (int i = 0; i < op->nin; i++) {
        fputs(i ? ", " : "", out);
        print_value_ref(out, op->in[i]);
    }
    fputc(')', out);
    bool first = true;
    for (int i = 0; i < info->nattrs; i++) {
        if (dlc_op_attr_is_default(op->kind, op->attrs, i))
            continue;
        fprintf(out, "%s%s=", first ? " {" : ", ", info->attrs[i].name);
        print_attr(out, &op->attrs[i]);
        first = false;
    }
    if (!first)
        fputc('}', out);
    if (op->nout)
        fputs(" : ", out);
    for (int i = 0; i < op->nout; i++) {
        fputs(i ? ", " : "", out);
        print_type(out, &op->out[i]->type);
    }
    print_loc(out, m, op->loc);
    fputc('\n', out);
}

static void print_network(FILE *out, const DlcModule *m, const DlcNetwork *net) {
    fprintf(out, "network @%s(", net->name);
    for (int i = 0; i < net->ninputs; i++) {
        fprintf(out, "%s%%%s: ", i ? ", " : "", net->inputs[i]->name);
        print_type(out, &net->inputs[i]->type);
    }
    fputs(") {\n", out);
    for (int i = 0; i < net->nparams; i++) {
        const DlcValue *p = net->params[i];
        fprintf(out, "  %s @%s: ", p->trainable ? "param" : "buffer", p->name);
        print_type(out, &p->type);
        fprintf(out, " init=%s", dlc_init_name(p->init));
        if (p->fan_in)
            fprintf(out, " fan_in=%lld", (long long)p->fan_in);
        fputc('\n', out);
    }
    for (int i = 0; i < net->nops; i++)
        print_op(out, m, net->ops[i]);
    fputs("  return", out);
    for (int i = 0; i < net->noutputs; i++) {
        fputs(i ? ", " : " ", out);
        print_value_ref(out, net->outputs[i]);
    }
    fputs("\n}\n", out);
}

static void print_cfg(FILE *out, const DlcCfg *v) {
    char buf[64];
    switch (v->kind) {
    case DLC_CFG_INT:
        fprintf(out, "%lld", (long long)v->i);
        break;
    case DLC_CFG_FLOAT:
        dlc_format_double(buf, sizeof buf, v->f);
        fputs(buf, out);
        break;
    case DLC_CFG_BOOL:
        fputs(v->b ? "true" : "false", out);
        break;
    case DLC_CFG_STR:
        dlc_print_string(out, v->s);
        break;
    case DLC_CFG_SYM:
        fputs(v->s, out);
        break;
    case DLC_CFG_CALL:
        fprintf(out, "%s(", v->s);
        for (int i = 0; i < v->nargs; i++) {
            fputs(i ? ", " : "", out);
            if (v->args[i].key)
                fprintf(out, "%s=", v->args[i].key);
            print_cfg(out, &v->args[i].val);
        }
        fputc(')', out);
        break;
    case DLC_CFG_LIST:
        fputc('[', out);
        for (int i = 0; i < v->nargs; i++) {
            fputs(i ? ", " : "", out);
            print_cfg(out, &v->args[i].val);
        }
        fputc(']', out);
        break;
    }
}

static void print_train(FILE *out, const DlcTrain *t) {
    fprintf(out, "train @%s {\n", t->network);
    for (int i = 0; i < t->nentries; i++) {
        fprintf(out, "  %s = ", t->entries[i].key);
        print_cfg(out, &t->entries[i].val);
        fputc('\n', out);
    }
    fputs("}\n", out);
}

void dlc_print_module(FILE *out, const DlcModule *m) {
    for (int i = 0; i < m->nnetworks; i++) {
        if (i)
            fputc('\n', out);
        print_network(out, m, m->networks[i]);
    }
    for (int i = 0; i < m->ntrains; i++) {
        fputc('\n', out);
        print_train(out, m->trains[i]);
    }
}
