/* dot.c — the networks as a Graphviz digraph (dlc --emit=dot).
 *
 * One node per input and per op, labelled with the op, its non-default
 * attributes and result shape; parameters are folded into their op's label
 * rather than drawn, so a large network stays readable.  One cluster per
 * network. */
#include "ir.h"

static void dot_escape(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
}

static void node_id(FILE *out, int net, const DlcValue *v) {
    fprintf(out, "\"n%d_", net);
    dot_escape(out, v->name);
    fputc('"', out);
}

void dlc_print_dot(FILE *out, const DlcModule *m) {
    char buf[DLC_TYPE_STR_MAX];
    fputs("digraph dlc {\n  rankdir=TB;\n  node [shape=box, style=rounded, "
          "fontname=\"Helvetica\", fontsize=10];\n", out);
    for (int n = 0; n < m->nnetworks; n++) {
        const DlcNetwork *net = m->networks[n];
        fprintf(out, "  subgraph \"cluster_%d\" {\n    label=\"", n);
        dot_escape(out, net->name);
        fputs("\";\n", out);
        for (int i = 0; i < net->ninputs; i++) {
            const DlcValue *v = net->inputs[i];
            fputs("    ", out);
            node_id(out, n, v);
            fputs(" [shape=ellipse, label=\"", out);
            dot_escape(out, v->name);
            fprintf(out, "\\n%s\"];\n", dlc_type_str(&v->type, buf, sizeof buf));
        }
        for (int i = 0; i < net->nops; i++) {
            const DlcOp *op = net->ops[i];
            const DlcOpInfo *info = dlc_op_info(op->kind);
            fputs("    ", out);
            node_id(out, n, op->out[0]);
            fprintf(out, " [label=\"%s", info->name);
            for (int a = 0; a < info->nattrs; a++)
                if (!dlc_op_attr_is_default(op->kind, op->attrs, a)) {
                    const DlcAttr *at = &op->attrs[a];
                    fprintf(out, "\\n%s=", info->attrs[a].name);
                    if (at->type == DLC_ATTR_PAIR)
                        fprintf(out, "%lldx%lld", (long long)at->pair[0],
                                (long long)at->pair[1]);
                    else if (at->type == DLC_ATTR_INT)
                        fprintf(out, "%lld", (long long)at->i);
                    else if (at->type == DLC_ATTR_FLOAT)
                        fprintf(out, "%g", at->f);
                    else
                        fputs(at->b ? "true" : "false", out);
                }
            for (int r = 0; r < op->nout; r++)
                fprintf(out, "\\n%s", dlc_type_str(&op->out[r]->type, buf, sizeof buf));
            fputs("\"];\n", out);
            for (int j = 0; j < op->nin - op->nparams; j++) {
                const DlcValue *src = op->in[j];
                fputs("    ", out);
                node_id(out, n, src->kind == DLC_VAL_OP ? src->def->out[0] : src);
                fputs(" -> ", out);
                node_id(out, n, op->out[0]);
                fputs(";\n", out);
            }
        }
        for (int i = 0; i < net->noutputs; i++) {
            fprintf(out, "    \"n%d_return%d\" [shape=ellipse, label=\"output %d\"];\n    ",
                    n, i, i);
            const DlcValue *v = net->outputs[i];
            node_id(out, n, v->kind == DLC_VAL_OP ? v->def->out[0] : v);
            fprintf(out, " -> \"n%d_return%d\";\n", n, i);
        }
        fputs("  }\n", out);
    }
    fputs("}\n", out);
}
