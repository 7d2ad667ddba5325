/* frontend.h — the .dl frontend: scanner (lexer.l), parser (parser.y), AST
 * (ast.c) and elaboration into IR (elaborate.c).
 *
 * The driver needs only dlc_frontend_compile(); the rest of this header is
 * shared by the frontend's own files. */
#ifndef DLC_FRONTEND_H
#define DLC_FRONTEND_H

#include "../ir/ir.h"

/* ------------------------------------------------------------------------ */
/* elaborate.c — the frontend's one entry point                             */
/* ------------------------------------------------------------------------ */

typedef struct DlcFrontendOptions {
    const char *const *include_dirs; /* searched by import after the importing file's folder */
    int ninclude;
    long max_steps;  /* statements executed before giving up; 0: the default */
    long max_ops;    /* ops per network; 0: the default */
} DlcFrontendOptions;

/* Parses source `file` of ctx (and what it imports), elaborates its
 * networks and train sections into a new module and verifies it.  Returns
 * NULL after reporting errors. */
DlcModule *dlc_frontend_compile(DlcCtx *ctx, int file, const DlcFrontendOptions *opt);

/* ------------------------------------------------------------------------ */
/* ast.c — the syntax tree the parser builds                                */
/* ------------------------------------------------------------------------ */

typedef enum AstKind {
    /* expressions */
    AST_INT,    /* i */
    AST_FLOAT,  /* f */
    AST_STR,    /* s */
    AST_BOOL,   /* bval */
    AST_NAME,   /* s */
    AST_LIST,   /* items: [a, b, c] */
    AST_UNARY,  /* op ('-' or NOT), a */
    AST_BINARY, /* op, a, b */
    AST_CALL,   /* s: callee; args; chained: the first argument came from '->' */
    AST_MEMBER, /* a.s */
    AST_INDEX,  /* a[b] */
    AST_COND,   /* b if a else c */
    /* statements */
    AST_BIND,   /* targets (names in items, as AST_NAME) = a */
    AST_RETURN, /* items: the returned values */
    AST_REPEAT, /* repeat a [as s] { body } */
    AST_IF,     /* if a { body } else { els } */
} AstKind;

typedef struct AstNode AstNode;

typedef struct AstArg {
    const char *key; /* NULL for a positional argument */
    DlcLoc keyloc;
    AstNode *val;
} AstArg;

/* A growable array of node pointers or arguments, allocated in the arena. */
typedef struct AstNodes { AstNode **v; int n, cap; } AstNodes;
typedef struct AstArgs { AstArg *v; int n, cap; } AstArgs;

struct AstNode {
    AstKind kind;
    DlcLoc loc;      /* the whole construct (calls: the callee name) */
    int64_t i;       /* AST_INT */
    double f;        /* AST_FLOAT */
    bool bval;       /* AST_BOOL */
    bool chained;    /* AST_CALL written as `x -> f(...)` */
    int op;          /* AST_UNARY, AST_BINARY: the operator's token */
    const char *s;   /* see AstKind */
    DlcLoc sloc;     /* AST_MEMBER: the member name; AST_REPEAT: the loop variable */
    AstNode *a, *b;  /* operands, condition, count, right-hand side */
    AstNode *c;      /* AST_COND: the else value */
    AstNodes items;  /* list items, returned values, bind targets */
    AstArgs args;    /* AST_CALL */
    AstNodes body;   /* AST_REPEAT, AST_IF: statements */
    AstNodes els;    /* AST_IF: else branch (an else-if is one AST_IF in it) */
};

typedef enum AstDeclKind { DECL_NETWORK, DECL_BLOCK, DECL_TRAIN, DECL_IMPORT } AstDeclKind;

/* A network input (name: dtype[dims]) or a block parameter (name [= default]). */
typedef struct AstParam {
    const char *name;
    DlcLoc loc;
    const char *dtype;  /* network inputs */
    DlcLoc dtype_loc;
    AstNodes dims;      /* network inputs: the per-sample dimensions */
    AstNode *def;       /* block parameters: the default, or NULL */
} AstParam;

typedef struct AstParams { AstParam *v; int n, cap; } AstParams;

typedef struct AstDecl {
    AstDeclKind kind;
    const char *name;   /* network, block or trained network; import path */
    DlcLoc loc;         /* of the name */
    int file;           /* the source it is in */
    AstParams params;   /* network inputs, block parameters */
    AstNodes body;      /* network and block statements */
    AstArgs entries;    /* train: key = value */
} AstDecl;

typedef struct AstFile {
    AstDecl **decls;
    int ndecls, capdecls;
} AstFile;

AstNode *dlc_ast_node(DlcArena *a, AstKind kind, DlcLoc loc);
void dlc_ast_push(DlcArena *a, AstNodes *list, AstNode *n);
void dlc_ast_push_arg(DlcArena *a, AstArgs *list, AstArg arg);
void dlc_ast_push_param(DlcArena *a, AstParams *list, AstParam p);
AstDecl *dlc_ast_decl(DlcArena *a, AstFile *f, AstDeclKind kind, const char *name,
                      DlcLoc loc, int file);

/* ------------------------------------------------------------------------ */
/* parser.y (with lexer.l) — text to AST                                    */
/* ------------------------------------------------------------------------ */

/* Parses source `file` of ctx into `out`, allocating in `arena`.  Syntax
 * errors are reported (several per run, with recovery at line ends);
 * returns false if there were any. */
bool dlc_parse_dl(DlcCtx *ctx, DlcArena *arena, int file, AstFile *out);

#endif /* DLC_FRONTEND_H */
