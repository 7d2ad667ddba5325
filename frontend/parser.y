/* parser.y — the .dl grammar.
 *
 * A pure (reentrant) bison parser.  Actions only build AST nodes; every
 * check on meaning happens in elaborate.c.  Statements end at a newline or
 * ';', decided in dlc_lex() below rather than in the grammar, as Go does it:
 * a newline ends a statement only after a token that can end one, never
 * inside () or [], and not when the next line starts with '->' or 'else', so
 * a chain may continue on the next line.  Syntax errors recover at the end
 * of the statement, so one run reports several. */

%code requires {
#include "frontend.h"

typedef struct DlcParser {
    DlcCtx *ctx;
    DlcArena *arena;
    int file;
    AstFile *out;
    void *scanner;        /* yyscan_t */
    int line, col;        /* scanner position */
    DlcLoc comment_start; /* of an open block comment */
    /* dlc_lex() state */
    int depth;            /* open ( and [ */
    DlcLoc open[16];      /* where the innermost of them were opened */
    int last;             /* last token returned to the parser */
    bool has_pending;     /* a token read ahead */
    int pending;
    union YYSTYPE *pending_val;
    struct YYLTYPE *pending_loc;
    char last_text[48];   /* the last token's spelling, for messages */
    int text_line;        /* a line of the source ... */
    const char *text_pos; /* ... and where it starts, to find the next token */
} DlcParser;
}

%code provides {
int dlc_lex(YYSTYPE *lval, YYLTYPE *lloc, DlcParser *p);
}

%code {
#include <string.h>

#include "lexer.h"

#define yylex dlc_lex
#define A (p->arena)
#define MAX_OPEN ((int)(sizeof ((DlcParser *)0)->open / sizeof (DlcLoc)))

static DlcLoc L(const DlcParser *p, YYLTYPE l) {
    int len = l.last_line == l.first_line && l.last_column > l.first_column
                  ? l.last_column - l.first_column : 1;
    return (DlcLoc){p->file, l.first_line, l.first_column, len};
}

/* bison's own messages (the parser stack overflowing on deep nesting) */
static void yyerror(YYLTYPE *loc, DlcParser *p, const char *msg) {
    dlc_error(p->ctx, L(p, *loc), "%s (the input is nested too deeply)", msg);
}

static AstNode *binary(DlcParser *p, int op, AstNode *a, AstNode *b, YYLTYPE l) {
    AstNode *n = dlc_ast_node(A, AST_BINARY, L(p, l));
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static AstNode *call(DlcParser *p, const char *name, YYLTYPE l, AstArgs args) {
    AstNode *n = dlc_ast_node(A, AST_CALL, L(p, l));
    n->s = name;
    n->args = args;
    return n;
}

/* `x -> f(args)` is f(x, args). */
static AstNode *chain(DlcParser *p, AstNode *x, const char *name, YYLTYPE l,
                      AstArgs args) {
    AstArgs all = {0};
    dlc_ast_push_arg(A, &all, (AstArg){NULL, x->loc, x});
    for (int i = 0; i < args.n; i++)
        dlc_ast_push_arg(A, &all, args.v[i]);
    AstNode *n = call(p, name, l, all);
    n->chained = true;
    return n;
}
}

%define api.pure full
%locations
%define parse.error custom
%define parse.lac full
%expect 0
%lex-param {DlcParser *p}
%parse-param {DlcParser *p}

%union {
    int64_t i;
    double f;
    bool b;
    char *s;
    AstNode *node;
    AstNodes nodes;
    AstArg arg;
    AstArgs args;
    AstParam param;
    AstParams params;
}

%token NL "end of line"
%token NETWORK "network" BLOCK "block" TRAIN "train" IMPORT "import"
%token RETURN "return" REPEAT "repeat" AS "as" IF "if" ELSE "else"
%token AND "and" OR "or" NOT "not"
%token ARROW "->" EQ "==" NE "!=" LE "<=" GE ">="
%token <s> IDENT "identifier" STRING "string"
%token <i> INT "integer"
%token <f> FLOAT "number"
%token <b> BOOL "boolean"

%type <node> expr bexpr postfix primary stmt if_stmt
%type <nodes> stmts body exprs exprs_opt targets dims_opt
%type <args> args args_opt entries
%type <arg> arg
%type <param> input bparam
%type <params> inputs inputs_opt bparams bparams_opt

%left OR
%left AND
%precedence NOT
%nonassoc EQ NE '<' LE '>' GE
%left '+' '-'
%left '*' '/' '%'
%precedence UMINUS

%%

file
    : %empty
    | file NL
    | file decl
    | file error NL         { yyerrok; }
    ;

decl
    : IMPORT STRING {
          dlc_ast_decl(A, p->out, DECL_IMPORT, $2, L(p, @2), p->file);
      }
    | NETWORK IDENT '(' inputs_opt ')' body {
          AstDecl *d = dlc_ast_decl(A, p->out, DECL_NETWORK, $2, L(p, @2), p->file);
          d->params = $4;
          d->body = $6;
      }
    | BLOCK IDENT '(' bparams_opt ')' body {
          AstDecl *d = dlc_ast_decl(A, p->out, DECL_BLOCK, $2, L(p, @2), p->file);
          d->params = $4;
          d->body = $6;
      }
    | NETWORK error body     { yyerrok; }
    | BLOCK error body       { yyerrok; }
    | TRAIN error '{' entries '}' { yyerrok; }
    | TRAIN IDENT '{' entries '}' {
          AstDecl *d = dlc_ast_decl(A, p->out, DECL_TRAIN, $2, L(p, @2), p->file);
          d->entries = $4;
      }
    ;

inputs_opt
    : %empty                { $$ = (AstParams){0}; }
    | inputs
    | inputs ','
    ;

inputs
    : input                 { $$ = (AstParams){0}; dlc_ast_push_param(A, &$$, $1); }
    | inputs ',' input      { $$ = $1; dlc_ast_push_param(A, &$$, $3); }
    ;

input
    : IDENT ':' IDENT '[' dims_opt ']' {
          $$ = (AstParam){.name = $1, .loc = L(p, @1), .dtype = $3,
                          .dtype_loc = L(p, @3), .dims = $5};
      }
    ;

dims_opt
    : %empty                { $$ = (AstNodes){0}; }
    | exprs
    ;

bparams_opt
    : %empty                { $$ = (AstParams){0}; }
    | bparams
    | bparams ','
    ;

bparams
    : bparam                { $$ = (AstParams){0}; dlc_ast_push_param(A, &$$, $1); }
    | bparams ',' bparam    { $$ = $1; dlc_ast_push_param(A, &$$, $3); }
    ;

bparam
    : IDENT                 { $$ = (AstParam){.name = $1, .loc = L(p, @1)}; }
    | IDENT '=' expr        { $$ = (AstParam){.name = $1, .loc = L(p, @1), .def = $3}; }
    ;

entries
    : %empty                { $$ = (AstArgs){0}; }
    | entries NL
    | entries IDENT '=' expr NL {
          $$ = $1;
          dlc_ast_push_arg(A, &$$, (AstArg){$2, L(p, @2), $4});
      }
    | entries error NL      { $$ = $1; yyerrok; }
    ;

body
    : '{' stmts '}'         { $$ = $2; }
    ;

stmts
    : %empty                { $$ = (AstNodes){0}; }
    | stmts NL
    | stmts stmt NL         { $$ = $1; dlc_ast_push(A, &$$, $2); }
    | stmts error NL        { $$ = $1; yyerrok; }
    ;

stmt
    : targets '=' expr {
          $$ = dlc_ast_node(A, AST_BIND, L(p, @1));
          $$->items = $1;
          $$->a = $3;
      }
    | RETURN exprs {
          $$ = dlc_ast_node(A, AST_RETURN, L(p, @1));
          $$->items = $2;
      }
    | REPEAT expr body {
          $$ = dlc_ast_node(A, AST_REPEAT, L(p, @1));
          $$->a = $2;
          $$->body = $3;
      }
    | REPEAT expr AS IDENT body {
          $$ = dlc_ast_node(A, AST_REPEAT, L(p, @1));
          $$->a = $2;
          $$->s = $4;
          $$->sloc = L(p, @4);
          $$->body = $5;
      }
    | if_stmt
    ;

if_stmt
    : IF expr body {
          $$ = dlc_ast_node(A, AST_IF, L(p, @1));
          $$->a = $2;
          $$->body = $3;
      }
    | IF expr body ELSE body {
          $$ = dlc_ast_node(A, AST_IF, L(p, @1));
          $$->a = $2;
          $$->body = $3;
          $$->els = $5;
      }
    | IF expr body ELSE if_stmt {
          $$ = dlc_ast_node(A, AST_IF, L(p, @1));
          $$->a = $2;
          $$->body = $3;
          dlc_ast_push(A, &$$->els, $5);
      }
    ;

targets
    : IDENT {
          $$ = (AstNodes){0};
          AstNode *n = dlc_ast_node(A, AST_NAME, L(p, @1));
          n->s = $1;
          dlc_ast_push(A, &$$, n);
      }
    | targets ',' IDENT {
          $$ = $1;
          AstNode *n = dlc_ast_node(A, AST_NAME, L(p, @3));
          n->s = $3;
          dlc_ast_push(A, &$$, n);
      }
    ;

exprs
    : expr                  { $$ = (AstNodes){0}; dlc_ast_push(A, &$$, $1); }
    | exprs ',' expr        { $$ = $1; dlc_ast_push(A, &$$, $3); }
    ;

exprs_opt
    : %empty                { $$ = (AstNodes){0}; }
    | exprs
    | exprs ','
    ;

expr
    : bexpr
    | bexpr IF bexpr ELSE bexpr {
          $$ = dlc_ast_node(A, AST_COND, L(p, @2));
          $$->b = $1;
          $$->a = $3;
          $$->c = $5;
      }
    | expr ARROW IDENT                  { $$ = chain(p, $1, $3, @3, (AstArgs){0}); }
    | expr ARROW IDENT '(' args_opt ')' { $$ = chain(p, $1, $3, @3, $5); }
    ;

bexpr
    : bexpr OR bexpr        { $$ = binary(p, OR, $1, $3, @2); }
    | bexpr AND bexpr       { $$ = binary(p, AND, $1, $3, @2); }
    | bexpr EQ bexpr        { $$ = binary(p, EQ, $1, $3, @2); }
    | bexpr NE bexpr        { $$ = binary(p, NE, $1, $3, @2); }
    | bexpr '<' bexpr       { $$ = binary(p, '<', $1, $3, @2); }
    | bexpr LE bexpr        { $$ = binary(p, LE, $1, $3, @2); }
    | bexpr '>' bexpr       { $$ = binary(p, '>', $1, $3, @2); }
    | bexpr GE bexpr        { $$ = binary(p, GE, $1, $3, @2); }
    | bexpr '+' bexpr       { $$ = binary(p, '+', $1, $3, @2); }
    | bexpr '-' bexpr       { $$ = binary(p, '-', $1, $3, @2); }
    | bexpr '*' bexpr       { $$ = binary(p, '*', $1, $3, @2); }
    | bexpr '/' bexpr       { $$ = binary(p, '/', $1, $3, @2); }
    | bexpr '%' bexpr       { $$ = binary(p, '%', $1, $3, @2); }
    | NOT bexpr {
          $$ = dlc_ast_node(A, AST_UNARY, L(p, @1));
          $$->op = NOT;
          $$->a = $2;
      }
    | '-' bexpr %prec UMINUS {
          $$ = dlc_ast_node(A, AST_UNARY, L(p, @1));
          $$->op = '-';
          $$->a = $2;
      }
    | postfix
    ;

postfix
    : primary
    | postfix '.' IDENT {
          $$ = dlc_ast_node(A, AST_MEMBER, L(p, @$));
          $$->a = $1;
          $$->s = $3;
          $$->sloc = L(p, @3);
      }
    | postfix '[' expr ']' {
          $$ = dlc_ast_node(A, AST_INDEX, L(p, @$));
          $$->a = $1;
          $$->b = $3;
      }
    ;

primary
    : INT                   { $$ = dlc_ast_node(A, AST_INT, L(p, @1)); $$->i = $1; }
    | FLOAT                 { $$ = dlc_ast_node(A, AST_FLOAT, L(p, @1)); $$->f = $1; }
    | STRING                { $$ = dlc_ast_node(A, AST_STR, L(p, @1)); $$->s = $1; }
    | BOOL                  { $$ = dlc_ast_node(A, AST_BOOL, L(p, @1)); $$->bval = $1; }
    | IDENT                 { $$ = dlc_ast_node(A, AST_NAME, L(p, @1)); $$->s = $1; }
    | IDENT '(' args_opt ')' { $$ = call(p, $1, @1, $3); }
    | '(' expr ')'          { $$ = $2; }
    | '[' exprs_opt ']'     { $$ = dlc_ast_node(A, AST_LIST, L(p, @$)); $$->items = $2; }
    ;

args_opt
    : %empty                { $$ = (AstArgs){0}; }
    | args
    | args ','
    ;

args
    : arg                   { $$ = (AstArgs){0}; dlc_ast_push_arg(A, &$$, $1); }
    | args ',' arg          { $$ = $1; dlc_ast_push_arg(A, &$$, $3); }
    ;

arg
    : expr                  { $$ = (AstArg){NULL, $1->loc, $1}; }
    | IDENT '=' expr        { $$ = (AstArg){$1, L(p, @1), $3}; }
    ;

%%

/* ---- statement separators ----------------------------------------------- */

static bool ends_statement(int tok) {
    return tok == IDENT || tok == INT || tok == FLOAT || tok == STRING ||
           tok == BOOL || tok == ')' || tok == ']' || tok == '}';
}

/* The next token from flex, with newlines inside () and [] dropped. */
static int raw_token(DlcParser *p, YYSTYPE *lval, YYLTYPE *lloc) {
    for (;;) {
        int t = dlcyylex(lval, lloc, p->scanner);
        if (t == 0) /* flex sets no location at the end of the input */
            *lloc = (YYLTYPE){p->line, p->col, p->line, p->col};
        if (t == NL && p->depth > 0)
            continue;
        return t;
    }
}

static void remember(DlcParser *p, int tok, const YYLTYPE *l) {
    const DlcSource *src = &p->ctx->files[p->file];
    if (tok == NL) {
        snprintf(p->last_text, sizeof p->last_text, "end of line");
        return;
    }
    if (tok == 0) {
        snprintf(p->last_text, sizeof p->last_text, "end of file");
        return;
    }
    /* the spelling, from the source text (the token is on one line);
       tokens come in order, so the search starts from the last line found */
    if (l->first_line < p->text_line || !p->text_pos) {
        p->text_line = 1;
        p->text_pos = src->text;
    }
    const char *s = p->text_pos;
    for (int line = p->text_line; line < l->first_line && s; line++) {
        s = strchr(s, '\n');
        if (s)
            s++;
    }
    if (s) {
        p->text_line = l->first_line;
        p->text_pos = s;
    }
    int len = l->last_line == l->first_line ? l->last_column - l->first_column : 1;
    if (!s || len <= 0)
        len = 0;
    if (len > 40)
        len = 40;
    snprintf(p->last_text, sizeof p->last_text, "'%.*s'", len,
             s ? s + l->first_column - 1 : "");
}

int dlc_lex(YYSTYPE *lval, YYLTYPE *lloc, DlcParser *p) {
    int t;
    if (p->has_pending) {
        t = p->pending;
        *lval = *p->pending_val;
        *lloc = *p->pending_loc;
        p->has_pending = false;
    } else {
        t = raw_token(p, lval, lloc);
    }
    for (;;) {
        if (t == NL) {
            if (!ends_statement(p->last)) {
                t = raw_token(p, lval, lloc);
                continue;
            }
            /* a line starting with '->' or 'else' continues the statement */
            YYSTYPE v2;
            YYLTYPE l2;
            int t2;
            do
                t2 = raw_token(p, &v2, &l2);
            while (t2 == NL);
            if (t2 == ARROW || t2 == ELSE) {
                t = t2;
                *lval = v2;
                *lloc = l2;
                continue;
            }
            p->has_pending = true;
            p->pending = t2;
            *p->pending_val = v2;
            *p->pending_loc = l2;
        } else if (t == ';') {
            t = NL;
        } else if (t == '}' && ends_statement(p->last)) {
            /* `{ return x }`: the statement before '}' ends there */
            p->has_pending = true;
            p->pending = '}';
            *p->pending_val = *lval;
            *p->pending_loc = *lloc;
            t = NL;
        }
        break;
    }
    switch (t) {
    case '(': case '[':
        if (p->depth < MAX_OPEN)
            p->open[p->depth] = L(p, *lloc);
        p->depth++;
        break;
    case ')': case ']': if (p->depth > 0) p->depth--; break;
    /* these never appear inside brackets: an unclosed one must not swallow
       the newlines of the rest of the file */
    case '{': case '}': case NETWORK: case BLOCK: case TRAIN: p->depth = 0; break;
    }
    p->last = t;
    remember(p, t, lloc);
    return t;
}

/* ---- syntax errors ------------------------------------------------------ */

/* A token's name for messages: 'x' for punctuation, words for the rest. */
static void token_name(char *buf, size_t size, yysymbol_kind_t sym) {
    static const char *const descriptions[] = {
        "identifier", "string", "integer", "number", "boolean", "end of line"};
    if (sym == YYSYMBOL_YYEOF) {
        snprintf(buf, size, "end of file");
        return;
    }
    /* bison may give an alias with or without its quotes, a character
       token with its single quotes */
    const char *name = yysymbol_name(sym);
    size_t n = strlen(name);
    if (n >= 2 && (name[0] == '"' || name[0] == '\'') && name[n - 1] == name[0]) {
        name++;
        n -= 2;
    }
    for (size_t i = 0; i < sizeof descriptions / sizeof *descriptions; i++)
        if (strlen(descriptions[i]) == n && strncmp(descriptions[i], name, n) == 0) {
            snprintf(buf, size, "%.*s", (int)n, name);
            return;
        }
    snprintf(buf, size, "'%.*s'", (int)n, name);
}

static int yyreport_syntax_error(const yypcontext_t *yyctx, DlcParser *p) {
    enum { MAX_EXPECTED = 6 };
    yysymbol_kind_t expected[MAX_EXPECTED];
    int n = yypcontext_expected_tokens(yyctx, expected, MAX_EXPECTED);
    yysymbol_kind_t got = yypcontext_token(yyctx);
    char msg[512], name[64];
    size_t len = 0;
    if (got == YYSYMBOL_YYEOF)
        len = (size_t)snprintf(msg, sizeof msg, "unexpected end of file");
    else if (got == YYSYMBOL_NL)
        len = (size_t)snprintf(msg, sizeof msg, "unexpected end of line");
    else {
        token_name(name, sizeof name, got);
        if (got == YYSYMBOL_IDENT || got == YYSYMBOL_INT || got == YYSYMBOL_FLOAT ||
            got == YYSYMBOL_STRING || got == YYSYMBOL_BOOL)
            len = (size_t)snprintf(msg, sizeof msg, "unexpected %s %s", name, p->last_text);
        else
            len = (size_t)snprintf(msg, sizeof msg, "unexpected %s", name);
    }
    /* n == 0 means too many to list (or none): say nothing then */
    for (int i = 0; i < n && len < sizeof msg; i++) {
        token_name(name, sizeof name, expected[i]);
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%s",
                                i == 0 ? ", expected " : i == n - 1 ? " or " : ", ",
                                name);
    }
    dlc_error(p->ctx, L(p, *yypcontext_location(yyctx)), "syntax error: %s", msg);
    /* a bracket left open swallows the line ends after it: say where it is */
    if (p->depth > 0 && p->depth <= MAX_OPEN && p->open[p->depth - 1].line !=
                                                    yypcontext_location(yyctx)->first_line)
        dlc_note(p->ctx, p->open[p->depth - 1], "this bracket is not closed");
    return 0;
}

bool dlc_parse_dl(DlcCtx *ctx, DlcArena *arena, int file, AstFile *out) {
    const DlcSource *src = &ctx->files[file];
    YYSTYPE pending_val;
    YYLTYPE pending_loc;
    DlcParser p = {.ctx = ctx, .arena = arena, .file = file, .out = out,
                   .line = 1, .col = 1, .last = NL,
                   .pending_val = &pending_val, .pending_loc = &pending_loc};
    yyscan_t scanner;
    if (dlcyylex_init_extra(&p, &scanner) != 0)
        dlc_unreachable("cannot create the scanner");
    p.scanner = scanner;
    dlcyy_scan_bytes(src->text, (int)src->size, scanner);
    int errors = ctx->nerrors;
    int rc = yyparse(&p);
    dlcyylex_destroy(scanner);
    return rc == 0 && ctx->nerrors == errors;
}
