/* ast.c — constructors for the syntax tree.  The tree lives in the
 * frontend's arena and is dropped in one piece after elaboration. */
#include "frontend.h"

AstNode *dlc_ast_node(DlcArena *a, AstKind kind, DlcLoc loc) {
    AstNode *n = dlc_arena_alloc(a, sizeof *n);
    n->kind = kind;
    n->loc = loc;
    return n;
}

void dlc_ast_push(DlcArena *a, AstNodes *list, AstNode *n) {
    DLC_PUSH(a, list->v, list->n, list->cap, n);
}

void dlc_ast_push_arg(DlcArena *a, AstArgs *list, AstArg arg) {
    DLC_PUSH(a, list->v, list->n, list->cap, arg);
}

void dlc_ast_push_param(DlcArena *a, AstParams *list, AstParam p) {
    DLC_PUSH(a, list->v, list->n, list->cap, p);
}

AstDecl *dlc_ast_decl(DlcArena *a, AstFile *f, AstDeclKind kind, const char *name,
                      DlcLoc loc, int file) {
    AstDecl *d = dlc_arena_alloc(a, sizeof *d);
    d->kind = kind;
    d->name = name;
    d->loc = loc;
    d->file = file;
    DLC_PUSH(a, f->decls, f->ndecls, f->capdecls, d);
    return d;
}
