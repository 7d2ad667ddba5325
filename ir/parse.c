/* parse.c — the IR's text form read back.
 *
 * Reads what print.c writes into a fresh module, so that printing the result
 * gives back the same text: print(parse(print(m))) == print(m).  A small
 * lexer feeds a hand-written recursive-descent parser.  Newlines are plain
 * whitespace: every statement starts with a word or a sigil of its own.
 *
 *   module   := { network | train }
 *   network  := 'network' @name '(' [input {',' input}] ')'
 *               '{' { param | op } 'return' [ref {',' ref}] '}'
 *   input    := %name ':' type
 *   param    := ('param' | 'buffer') @name ':' type 'init' '=' word ['fan_in' '=' int]
 *   op       := [%name [',' %name] '='] word '(' [ref {',' ref}] ')'
 *               ['{' [word '=' attr {',' word '=' attr}] '}']
 *               [':' type [',' type]] ['loc' '(' string ':' int ':' int ')']
 *               (the types are there exactly when the results are)
 *   ref      := %name | @name          (operands: tensors first, then @params)
 *   type     := word '[' ['N' {',' int} | int {',' int}] ']'
 *   attr     := int | float | 'true' | 'false' | '[' int ',' int ']'
 *   train    := 'train' @name '{' { word '=' value } '}'
 *   value    := int | float | 'true' | 'false' | string | word
 *             | word '(' [arg {',' arg}] ')'
 *   arg      := [word '='] value
 *
 * Floats may also be written inf, -inf and nan, as dlc_format_double prints
 * them.  The parser only builds: it checks what building needs (names
 * unique and defined before use, ops and attributes known, literals well
 * formed and sizes within dlc's limits) and leaves arities, shapes and train
 * settings to the verifier, which reruns the shape rules and
 * dlc_train_check.  An op without loc(...) is located at its first token in
 * the IR file, which the printer leaves out again.  IR text may come from
 * anywhere, so the first error is reported at its token, parsing stops and
 * the module is freed. */
#include "ir.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME 1024  /* longest word or value name */
#define MAX_NUMBER 256 /* longest numeric literal */
#define MAX_DEPTH 64   /* deepest nesting of calls in a train value */
#define QUOTE_MAX 48   /* room for a token quoted in a message */

/* ---- the lexer ---------------------------------------------------------- */

/* Token kinds.  Punctuation ( ) [ ] { } , : = - is its own character. */
enum {
    TK_EOF = 256, /* end of the text */
    TK_ERROR,     /* a malformed token, already reported */
    TK_WORD,      /* identifier or keyword: network, f32, conv2d, true */
    TK_INT,       /* integer literal, perhaps with a leading '-' */
    TK_FLOAT,     /* numeric literal with a '.' or an exponent */
    TK_STRING,    /* "..." including the quotes, escapes not yet decoded */
    TK_LOCAL,     /* %name: an input or an op result */
    TK_GLOBAL,    /* @name: a parameter or a network */
};

typedef struct Token {
    int kind;         /* TK_* or a punctuation character */
    const char *text; /* where it starts in the source; not NUL-terminated */
    size_t len;       /* bytes, including sigils and quotes */
    int line, col;    /* of its first byte */
} Token;

typedef struct Lexer {
    DlcCtx *ctx;     /* where errors go */
    int file;        /* the source's index in ctx, for locations */
    const char *src; /* the text; it ends at size, whatever bytes it holds */
    size_t size;
    size_t pos;      /* next byte to read */
    int line, col;   /* of that byte */
    bool failed;     /* an error was reported: the parse fails */
} Lexer;

static DlcLoc lex_loc(const Lexer *lx, int line, int col, size_t len) {
    if (len < 1)
        len = 1;
    return (DlcLoc){lx->file, line, col, len > INT_MAX ? INT_MAX : (int)len};
}

/* Reports an error and marks the parse failed; returns false. */
__attribute__((format(printf, 3, 4)))
static bool report(Lexer *lx, DlcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dlc_vdiag(lx->ctx, DLC_SEV_ERROR, loc, fmt, ap);
    va_end(ap);
    lx->failed = true;
    return false;
}

/* The byte k ahead of the current one, or -1 past the end. */
static int lex_peek(const Lexer *lx, size_t k) {
    return k < lx->size - lx->pos ? (unsigned char)lx->src[lx->pos + k] : -1;
}

/* Steps over one byte; only called before the end. */
static void lex_bump(Lexer *lx) {
    if (lx->src[lx->pos] == '\n') {
        if (lx->line < INT_MAX)
            lx->line++;
        lx->col = 1;
    } else if (lx->col < INT_MAX) {
        lx->col++;
    }
    lx->pos++;
}

static bool is_alpha(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_word_char(int c) { return is_alpha(c) || is_digit(c); }
static bool is_name_char(int c) { return is_word_char(c) || c == '.'; }
static bool is_hex(int c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static bool is_punct(int c) {
    return c > 0 && strchr("()[]{},:=-", c) != NULL;
}

/* Skips whitespace and // comments.  A comment ends at a newline or at a
 * NUL byte, which the caller then reports. */
static void lex_skip_space(Lexer *lx) {
    for (;;) {
        int c = lex_peek(lx, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            lex_bump(lx);
        } else if (c == '/' && lex_peek(lx, 1) == '/') {
            while (lex_peek(lx, 0) > 0 && lex_peek(lx, 0) != '\n')
                lex_bump(lx);
        } else {
            return;
        }
    }
}

static void lex_finish(const Lexer *lx, Token *t) {
    t->len = (size_t)(lx->src + lx->pos - t->text);
}

static void lex_fail(Token *t) { t->kind = TK_ERROR; }

static void lex_word(Lexer *lx, Token *t) {
    while (is_word_char(lex_peek(lx, 0)))
        lex_bump(lx);
    lex_finish(lx, t);
    if (t->len > MAX_NAME) {
        report(lx, lex_loc(lx, t->line, t->col, t->len),
               "word is too long (at most %d characters)", MAX_NAME);
        lex_fail(t);
    }
}

/* %name or @name; names may contain dots (%x.1, @conv.weight). */
static void lex_name(Lexer *lx, Token *t) {
    lex_bump(lx);
    while (is_name_char(lex_peek(lx, 0)))
        lex_bump(lx);
    lex_finish(lx, t);
    if (t->len == 1) {
        report(lx, lex_loc(lx, t->line, t->col, 1), "expected a name after '%c'",
               t->text[0]);
        lex_fail(t);
    } else if (t->len - 1 > MAX_NAME) {
        report(lx, lex_loc(lx, t->line, t->col, t->len),
               "name is too long (at most %d characters)", MAX_NAME);
        lex_fail(t);
    }
}

static void lex_digits(Lexer *lx) {
    while (is_digit(lex_peek(lx, 0)))
        lex_bump(lx);
}

/* -?digits(.digits)?([eE][+-]?digits)?, not followed by a name character. */
static void lex_number(Lexer *lx, Token *t) {
    t->kind = TK_INT;
    if (lex_peek(lx, 0) == '-')
        lex_bump(lx);
    lex_digits(lx);
    if (lex_peek(lx, 0) == '.' && is_digit(lex_peek(lx, 1))) {
        t->kind = TK_FLOAT;
        lex_bump(lx);
        lex_digits(lx);
    }
    int e = lex_peek(lx, 0);
    if (e == 'e' || e == 'E') {
        size_t k = lex_peek(lx, 1) == '+' || lex_peek(lx, 1) == '-' ? 2 : 1;
        if (is_digit(lex_peek(lx, k))) {
            t->kind = TK_FLOAT;
            while (k--)
                lex_bump(lx);
            lex_digits(lx);
        }
    }
    bool bad = is_name_char(lex_peek(lx, 0));
    while (is_name_char(lex_peek(lx, 0)))
        lex_bump(lx);
    lex_finish(lx, t);
    DlcLoc loc = lex_loc(lx, t->line, t->col, t->len);
    if (bad && t->len <= 32)
        report(lx, loc, "invalid number '%.*s'", (int)t->len, t->text);
    else if (bad)
        report(lx, loc, "invalid number");
    else if (t->len > MAX_NUMBER)
        report(lx, loc, "number is too long (at most %d characters)", MAX_NUMBER);
    else
        return;
    lex_fail(t);
}

/* Checks the escape at the current backslash and steps over it: the
 * inverse of dlc_print_string, \" \\ \n \t \xHH (but never \x00). */
static bool lex_escape(Lexer *lx) {
    int c = lex_peek(lx, 1);
    DlcLoc loc = lex_loc(lx, lx->line, lx->col, c == 'x' ? 4 : 2);
    size_t n = 2;
    if (c == 'x') {
        if (!is_hex(lex_peek(lx, 2)) || !is_hex(lex_peek(lx, 3)))
            return report(lx, loc, "invalid escape '\\x' in string (expected two hex digits)");
        if (lex_peek(lx, 2) == '0' && lex_peek(lx, 3) == '0')
            return report(lx, loc, "NUL byte in string");
        n = 4;
    } else if (c != '"' && c != '\\' && c != 'n' && c != 't') {
        if (c > ' ' && c < 0x7f)
            return report(lx, loc, "invalid escape '\\%c' in string", c);
        return report(lx, loc, "invalid escape in string");
    }
    while (n--)
        lex_bump(lx);
    return true;
}

static void lex_string(Lexer *lx, Token *t) {
    lex_bump(lx);
    for (;;) {
        int c = lex_peek(lx, 0);
        if (c < 0 || c == '\n') {
            report(lx, lex_loc(lx, t->line, t->col, 1), "unterminated string");
            break;
        }
        if (c == 0) {
            report(lx, lex_loc(lx, lx->line, lx->col, 1), "unexpected NUL byte in string");
            break;
        }
        if (c == '\\') {
            if (!lex_escape(lx))
                break;
            continue;
        }
        lex_bump(lx);
        if (c == '"') {
            lex_finish(lx, t);
            return;
        }
    }
    lex_finish(lx, t);
    lex_fail(t);
}

static void lex_bad_char(Lexer *lx, Token *t, int c) {
    DlcLoc loc = lex_loc(lx, t->line, t->col, 1);
    if (c == 0)
        report(lx, loc, "unexpected NUL byte");
    else if (c > ' ' && c < 0x7f)
        report(lx, loc, "unexpected character '%c'", c);
    else
        report(lx, loc, "unexpected byte 0x%02x", (unsigned)c);
    lex_bump(lx);
    lex_finish(lx, t);
    lex_fail(t);
}

/* Reads the next token into t. */
static void lex_next(Lexer *lx, Token *t) {
    lex_skip_space(lx);
    int c = lex_peek(lx, 0);
    *t = (Token){TK_EOF, lx->src + lx->pos, 0, lx->line, lx->col};
    if (c < 0)
        return;
    if (c == '%' || c == '@') {
        t->kind = c == '%' ? TK_LOCAL : TK_GLOBAL;
        lex_name(lx, t);
    } else if (is_alpha(c)) {
        t->kind = TK_WORD;
        lex_word(lx, t);
    } else if (is_digit(c) || (c == '-' && is_digit(lex_peek(lx, 1)))) {
        lex_number(lx, t);
    } else if (c == '"') {
        t->kind = TK_STRING;
        lex_string(lx, t);
    } else if (is_punct(c)) {
        t->kind = c;
        lex_bump(lx);
        lex_finish(lx, t);
    } else {
        lex_bad_char(lx, t, c);
    }
}

/* ---- the parser: tokens ------------------------------------------------- */

typedef struct Parser {
    Lexer lx;
    Token tok;       /* the current token */
    DlcModule *m;    /* being built */
    DlcNetwork *net; /* the network being read, or NULL */
    int depth;       /* calls open in the train value being read */
} Parser;

static void advance(Parser *p) { lex_next(&p->lx, &p->tok); }

static DlcLoc tok_loc(const Parser *p, const Token *t) {
    return lex_loc(&p->lx, t->line, t->col, t->len);
}

static bool tok_eq(const Token *t, const char *s) {
    size_t n = strlen(s);
    return t->len == n && memcmp(t->text, s, n) == 0;
}

static bool is_word(const Parser *p, const char *w) {
    return p->tok.kind == TK_WORD && tok_eq(&p->tok, w);
}

static bool accept(Parser *p, int kind) {
    if (p->tok.kind != kind)
        return false;
    advance(p);
    return true;
}

/* The token as quoted in messages: 'text', shortened, or end of input. */
static const char *tok_quote(const Token *t, char buf[QUOTE_MAX]) {
    if (t->kind == TK_EOF)
        return "end of input";
    int n = t->len > 32 ? 32 : (int)t->len;
    snprintf(buf, QUOTE_MAX, "'%.*s%s'", n, t->text, t->len > 32 ? "..." : "");
    return buf;
}

/* "expected <what>, got <token>"; silent after a lexer error, which has
 * been reported already. */
static bool unexpected(Parser *p, const char *what) {
    if (p->tok.kind == TK_ERROR)
        return false;
    char buf[QUOTE_MAX];
    return report(&p->lx, tok_loc(p, &p->tok), "expected %s, got %s", what,
                  tok_quote(&p->tok, buf));
}

static bool expect(Parser *p, int kind, const char *what) {
    if (p->tok.kind != kind)
        return unexpected(p, what);
    advance(p);
    return true;
}

/* A word, or a %/@ name without its sigil, copied into the module. */
static char *tok_name(Parser *p, const Token *t) {
    size_t skip = t->kind == TK_LOCAL || t->kind == TK_GLOBAL;
    return dlc_arena_strndup(&p->m->arena, t->text + skip, t->len - skip);
}

static int hex_value(char c) {
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* The text of a string token (checked by the lexer), unescaped. */
static char *tok_string(Parser *p, const Token *t) {
    char *out = dlc_arena_alloc(&p->m->arena, t->len);
    size_t n = 0;
    for (size_t i = 1; i + 1 < t->len; i++) {
        char c = t->text[i];
        if (c == '\\') {
            c = t->text[++i];
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'x') {
                c = (char)(hex_value(t->text[i + 1]) * 16 + hex_value(t->text[i + 2]));
                i += 2;
            }
        }
        out[n++] = c;
    }
    out[n] = 0;
    return out;
}

/* Reports `name` unknown, with a suggestion from cands when one is close. */
static bool report_unknown(Parser *p, const Token *t, const char *what,
                           const char *name, const char *const *cands, int n) {
    const char *guess = dlc_closest(name, cands, n);
    if (guess)
        return report(&p->lx, tok_loc(p, t), "unknown %s '%s'; did you mean '%s'?",
                      what, name, guess);
    return report(&p->lx, tok_loc(p, t), "unknown %s '%s'", what, name);
}

/* ---- the parser: literals and types ------------------------------------- */

/* The current TK_INT token's value. */
static bool tok_int64(Parser *p, int64_t *out) {
    const Token *t = &p->tok;
    bool neg = t->text[0] == '-';
    uint64_t mag = 0;
    for (size_t i = neg; i < t->len; i++) {
        unsigned d = (unsigned)(t->text[i] - '0');
        if (mag > (UINT64_MAX - d) / 10)
            return report(&p->lx, tok_loc(p, t), "integer out of range");
        mag = mag * 10 + d;
    }
    if (mag > (uint64_t)INT64_MAX + neg)
        return report(&p->lx, tok_loc(p, t), "integer out of range");
    *out = !neg ? (int64_t)mag : mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    return true;
}

static bool parse_int(Parser *p, const char *what, int64_t *out) {
    if (p->tok.kind != TK_INT)
        return unexpected(p, what);
    if (!tok_int64(p, out))
        return false;
    advance(p);
    return true;
}

/* An int that fits in an int and is at least 1 (line and column numbers). */
static bool parse_count(Parser *p, const char *what, int *out) {
    Token t = p->tok;
    char expected[64];
    snprintf(expected, sizeof expected, "a %s", what);
    int64_t v;
    if (!parse_int(p, expected, &v))
        return false;
    if (v < 1 || v > INT_MAX)
        return report(&p->lx, tok_loc(p, &t), "%s out of range", what);
    *out = (int)v;
    return true;
}

/* The current TK_FLOAT token's value. */
static bool tok_double(Parser *p, double *out) {
    char buf[MAX_NUMBER + 1];
    memcpy(buf, p->tok.text, p->tok.len);
    buf[p->tok.len] = 0;
    *out = strtod(buf, NULL);
    if (isinf(*out))
        return report(&p->lx, tok_loc(p, &p->tok), "number out of range");
    return true;
}

/* A number; ints are accepted, and inf, -inf and nan as the printer writes
 * non-finite values. */
static bool parse_float(Parser *p, const char *what, double *out) {
    bool neg = accept(p, '-');
    if (neg && !is_word(p, "inf"))
        return unexpected(p, "'inf' after '-'");
    if (is_word(p, "inf") || is_word(p, "nan")) {
        *out = is_word(p, "nan") ? NAN : neg ? -HUGE_VAL : HUGE_VAL;
    } else if (p->tok.kind == TK_INT) {
        int64_t i;
        if (!tok_int64(p, &i))
            return false;
        *out = (double)i;
    } else if (p->tok.kind != TK_FLOAT) {
        return unexpected(p, what);
    } else if (!tok_double(p, out)) {
        return false;
    }
    advance(p);
    return true;
}

static bool parse_dtype(Parser *p, DlcDType *out) {
    if (p->tok.kind != TK_WORD)
        return unexpected(p, "a type such as f32[N,10]");
    const char *names[DLC_DTYPE_COUNT];
    for (int i = 0; i < DLC_DTYPE_COUNT; i++) {
        names[i] = dlc_dtype_name((DlcDType)i);
        if (tok_eq(&p->tok, names[i])) {
            *out = (DlcDType)i;
            advance(p);
            return true;
        }
    }
    return report_unknown(p, &p->tok, "element type", tok_name(p, &p->tok), names,
                          DLC_DTYPE_COUNT);
}

/* One per-sample dimension: a positive int. */
static bool parse_dim(Parser *p, DlcType *t) {
    if (is_word(p, "N"))
        return report(&p->lx, tok_loc(p, &p->tok),
                      "the batch dimension N must come first");
    if (t->rank == DLC_MAX_RANK)
        return report(&p->lx, tok_loc(p, &p->tok),
                      "too many dimensions (at most %d)", DLC_MAX_RANK);
    Token d = p->tok;
    int64_t v;
    if (!parse_int(p, "a dimension", &v))
        return false;
    if (v < 1)
        return report(&p->lx, tok_loc(p, &d), "dimension must be at least 1, got %lld",
                      (long long)v);
    t->dims[t->rank++] = v;
    return true;
}

/* f32[N,6,28,28], f32[6,1,5,5], f32[], i32[N]. */
static bool parse_type(Parser *p, DlcType *t) {
    memset(t, 0, sizeof *t);
    Token start = p->tok;
    if (!parse_dtype(p, &t->dtype) || !expect(p, '[', "'[' after the element type"))
        return false;
    bool more = p->tok.kind != ']';
    if (is_word(p, "N")) {
        t->batched = true;
        advance(p);
        more = accept(p, ',');
    }
    while (more) {
        if (!parse_dim(p, t))
            return false;
        more = accept(p, ',');
    }
    Token end = p->tok;
    if (!expect(p, ']', "',' or ']' in the type"))
        return false;
    int64_t n = dlc_type_numel(t);
    if (n < 0 || n > DLC_MAX_NUMEL) {
        DlcLoc loc = tok_loc(p, &start);
        if (end.line == start.line && end.col > start.col)
            loc.len = end.col - start.col + 1;
        return report(&p->lx, loc, "type is too large (more than 2^40 elements)");
    }
    return true;
}

/* ---- the parser: networks ----------------------------------------------- */

static char sigil(const DlcValue *v) { return v->kind == DLC_VAL_PARAM ? '@' : '%'; }

/* Names must be new in the network: the builder would refuse them. */
static bool check_new_name(Parser *p, const Token *t, const char *name) {
    const DlcValue *old = dlc_map_get(&p->net->names, name);
    if (!old)
        return true;
    report(&p->lx, tok_loc(p, t), "'%c%s' is already defined", t->text[0], name);
    /* only into this text: a loc(...) may name any file, which diag.c reads */
    if (old->loc.file == p->lx.file)
        dlc_note(p->lx.ctx, old->loc, "'%c%s' was defined here", sigil(old), name);
    return false;
}

/* Every name defined so far, in definition order, for suggestions. */
static const char **defined_names(Parser *p, int *n) {
    const DlcNetwork *net = p->net;
    int cap = net->names.len + 1;
    const char **names = dlc_arena_alloc(&p->m->arena, (size_t)cap * sizeof *names);
    *n = 0;
    for (int i = 0; i < net->ninputs && *n < cap; i++)
        names[(*n)++] = net->inputs[i]->name;
    for (int i = 0; i < net->nparams && *n < cap; i++)
        names[(*n)++] = net->params[i]->name;
    for (int i = 0; i < net->nops; i++)
        for (int j = 0; j < net->ops[i]->nout && *n < cap; j++)
            names[(*n)++] = net->ops[i]->out[j]->name;
    return names;
}

static bool report_unknown_value(Parser *p, const Token *t, const char *name) {
    int n;
    const char **names = defined_names(p, &n);
    const char *guess = dlc_closest(name, names, n);
    if (!guess)
        return report(&p->lx, tok_loc(p, t), "unknown value '%c%s'", t->text[0], name);
    const DlcValue *g = dlc_map_get(&p->net->names, guess);
    return report(&p->lx, tok_loc(p, t), "unknown value '%c%s'; did you mean '%c%s'?",
                  t->text[0], name, sigil(g), guess);
}

/* A reference to a value defined earlier: %name, or @name for a parameter. */
static bool parse_ref(Parser *p, const char *what, DlcValue **out) {
    Token t = p->tok;
    if (t.kind != TK_LOCAL && t.kind != TK_GLOBAL)
        return unexpected(p, what);
    const char *name = tok_name(p, &t);
    DlcValue *v = dlc_map_get(&p->net->names, name);
    if (!v)
        return report_unknown_value(p, &t, name);
    if (v->kind == DLC_VAL_PARAM && t.kind != TK_GLOBAL)
        return report(&p->lx, tok_loc(p, &t), "'%%%s' is a parameter; write '@%s'",
                      name, name);
    if (v->kind != DLC_VAL_PARAM && t.kind == TK_GLOBAL)
        return report(&p->lx, tok_loc(p, &t), "'@%s' is not a parameter; write '%%%s'",
                      name, name);
    *out = v;
    advance(p);
    return true;
}

/* %name: type */
static bool parse_input(Parser *p) {
    Token t = p->tok;
    if (t.kind != TK_LOCAL)
        return unexpected(p, "an input such as %x: f32[N,10]");
    const char *name = tok_name(p, &t);
    if (!check_new_name(p, &t, name))
        return false;
    advance(p);
    DlcType type;
    if (!expect(p, ':', "':' after the input name") || !parse_type(p, &type))
        return false;
    dlc_network_add_input(p->m, p->net, name, type, tok_loc(p, &t));
    return true;
}

/* init=name */
static bool parse_init(Parser *p, DlcInit *out) {
    if (!is_word(p, "init"))
        return unexpected(p, "'init=' after the parameter type");
    advance(p);
    if (!expect(p, '=', "'=' after 'init'"))
        return false;
    if (p->tok.kind != TK_WORD)
        return unexpected(p, "an initializer such as zeros");
    const char *names[DLC_INIT_COUNT];
    for (int i = 0; i < DLC_INIT_COUNT; i++) {
        names[i] = dlc_init_name((DlcInit)i);
        if (tok_eq(&p->tok, names[i])) {
            *out = (DlcInit)i;
            advance(p);
            return true;
        }
    }
    return report_unknown(p, &p->tok, "initializer", tok_name(p, &p->tok), names,
                          DLC_INIT_COUNT);
}

/* (param | buffer) @name: type init=name */
static bool parse_param(Parser *p) {
    bool trainable = is_word(p, "param");
    advance(p);
    Token t = p->tok;
    if (t.kind != TK_GLOBAL)
        return unexpected(p, trainable ? "a name such as @w after 'param'"
                                       : "a name such as @w after 'buffer'");
    const char *name = tok_name(p, &t);
    if (!check_new_name(p, &t, name))
        return false;
    advance(p);
    if (!expect(p, ':', "':' after the parameter name"))
        return false;
    Token ttok = p->tok;
    DlcType type;
    if (!parse_type(p, &type))
        return false;
    if (type.batched)
        return report(&p->lx, tok_loc(p, &ttok),
                      "parameter '@%s' must not be batched (no N in its type)", name);
    DlcInit init = DLC_INIT_ZEROS;
    if (!parse_init(p, &init))
        return false;
    int64_t fan_in = 0;
    if (is_word(p, "fan_in")) {
        advance(p);
        if (!expect(p, '=', "'=' after 'fan_in'") || !parse_int(p, "the fan-in", &fan_in))
            return false;
        if (fan_in < 1)
            return report(&p->lx, tok_loc(p, &t), "parameter '@%s': fan_in must be positive",
                          name);
    }
    DlcValue *v = dlc_network_add_param(p->m, p->net, name, type, init, trainable,
                                        tok_loc(p, &t));
    v->fan_in = fan_in;
    return true;
}

/* An op line, gathered before it is handed to the builder. */
typedef struct OpText {
    Token first;                        /* its first token, the default loc */
    const char *names[DLC_MAX_RESULTS]; /* result names */
    int nout;
    Token kind_tok;                     /* the op's name */
    DlcOpKind kind;
    DlcValue **in;                      /* operands, tensors then params */
    int nin, capin, nparams;
    DlcAttr attrs[DLC_MAX_ATTRS];       /* by the op's schema */
    DlcType types[DLC_MAX_RESULTS];     /* result types */
    DlcLoc loc;
} OpText;

/* %a or %a, %b before the '='. */
static bool parse_results(Parser *p, OpText *o) {
    o->first = p->tok;
    do {
        Token t = p->tok;
        if (t.kind != TK_LOCAL)
            return unexpected(p, "a result name such as %x");
        if (o->nout == DLC_MAX_RESULTS)
            return report(&p->lx, tok_loc(p, &t), "an op has at most %d results",
                          DLC_MAX_RESULTS);
        const char *name = tok_name(p, &t);
        if (!check_new_name(p, &t, name))
            return false;
        for (int i = 0; i < o->nout; i++)
            if (strcmp(o->names[i], name) == 0)
                return report(&p->lx, tok_loc(p, &t), "'%%%s' is already defined", name);
        o->names[o->nout++] = name;
        advance(p);
    } while (accept(p, ','));
    return true;
}

static bool parse_op_kind(Parser *p, OpText *o) {
    o->kind_tok = p->tok;
    if (p->tok.kind != TK_WORD)
        return unexpected(p, "an op name such as conv2d");
    o->kind = DLC_OP_COUNT;
    for (int k = 0; k < DLC_OP_COUNT; k++)
        if (tok_eq(&p->tok, dlc_op_names()[k]))
            o->kind = (DlcOpKind)k;
    if (o->kind == DLC_OP_COUNT)
        return report_unknown(p, &p->tok, "op", tok_name(p, &p->tok), dlc_op_names(),
                              DLC_OP_COUNT);
    advance(p);
    return true;
}

/* (%x, %y, @w, @b): parameters come after all tensors. */
static bool parse_operands(Parser *p, OpText *o) {
    if (!expect(p, '(', "'(' after the op name"))
        return false;
    if (accept(p, ')'))
        return true;
    for (;;) {
        Token t = p->tok;
        DlcValue *v;
        if (!parse_ref(p, "an operand such as %x or @w", &v))
            return false;
        if (t.kind == TK_GLOBAL)
            o->nparams++;
        else if (o->nparams)
            return report(&p->lx, tok_loc(p, &t),
                          "operand '%%%s' follows a parameter; parameters come last",
                          v->name);
        DLC_PUSH(&p->m->arena, o->in, o->nin, o->capin, v);
        if (accept(p, ')'))
            return true;
        if (!expect(p, ',', "',' or ')' after the operand"))
            return false;
    }
}

/* One attribute value, read as the schema's type says. */
static bool parse_attr_value(Parser *p, const DlcAttrSpec *spec, DlcAttr *a) {
    char what[96];
    a->type = spec->type;
    a->set = true;
    switch (spec->type) {
    case DLC_ATTR_INT:
        snprintf(what, sizeof what, "an integer for '%s'", spec->name);
        return parse_int(p, what, &a->i);
    case DLC_ATTR_FLOAT:
        snprintf(what, sizeof what, "a number for '%s'", spec->name);
        return parse_float(p, what, &a->f);
    case DLC_ATTR_BOOL:
        if (!is_word(p, "true") && !is_word(p, "false")) {
            snprintf(what, sizeof what, "true or false for '%s'", spec->name);
            return unexpected(p, what);
        }
        a->b = is_word(p, "true");
        advance(p);
        return true;
    case DLC_ATTR_PAIR:
        snprintf(what, sizeof what, "an integer or [h,w] for '%s'", spec->name);
        if (!accept(p, '[')) {
            if (!parse_int(p, what, &a->pair[0]))
                return false;
            a->pair[1] = a->pair[0];
            return true;
        }
        return parse_int(p, "an integer in [h,w]", &a->pair[0]) &&
               expect(p, ',', "',' in [h,w]") &&
               parse_int(p, "an integer in [h,w]", &a->pair[1]) &&
               expect(p, ']', "']' after [h,w]");
    }
    dlc_unreachable("bad attribute type %d", (int)spec->type);
}

/* name=value, by the op's schema. */
static bool parse_attr(Parser *p, OpText *o) {
    Token t = p->tok;
    if (t.kind != TK_WORD)
        return unexpected(p, "an attribute name");
    const DlcOpInfo *info = dlc_op_info(o->kind);
    const char *name = tok_name(p, &t);
    int i = dlc_op_attr_index(o->kind, name);
    if (i < 0) {
        const char *names[DLC_MAX_ATTRS];
        for (int j = 0; j < info->nattrs; j++)
            names[j] = info->attrs[j].name;
        const char *guess = dlc_closest(name, names, info->nattrs);
        if (guess)
            return report(&p->lx, tok_loc(p, &t),
                          "%s has no attribute '%s'; did you mean '%s'?", info->name,
                          name, guess);
        return report(&p->lx, tok_loc(p, &t), "%s has no attribute '%s'", info->name,
                      name);
    }
    if (o->attrs[i].set)
        return report(&p->lx, tok_loc(p, &t), "attribute '%s' given twice", name);
    advance(p);
    return expect(p, '=', "'=' after the attribute name") &&
           parse_attr_value(p, &info->attrs[i], &o->attrs[i]);
}

/* {name=value, ...}, then defaults for the rest. */
static bool parse_attrs(Parser *p, OpText *o) {
    if (accept(p, '{') && !accept(p, '}')) {
        for (;;) {
            if (!parse_attr(p, o))
                return false;
            if (accept(p, '}'))
                break;
            if (!expect(p, ',', "',' or '}' after the attribute"))
                return false;
        }
    }
    int missing = dlc_op_fill_defaults(o->kind, o->attrs);
    if (missing >= 0) {
        const DlcOpInfo *info = dlc_op_info(o->kind);
        return report(&p->lx, tok_loc(p, &o->kind_tok), "%s needs attribute '%s'",
                      info->name, info->attrs[missing].name);
    }
    return true;
}

/* : T1[, T2], one type per result (nothing for an op without results). */
static bool parse_result_types(Parser *p, OpText *o) {
    if (o->nout == 0)
        return true;
    if (!expect(p, ':', "':' and the result types"))
        return false;
    for (int i = 0; i < o->nout; i++) {
        if (i && !expect(p, ',', "',' and the type of the second result"))
            return false;
        if (!parse_type(p, &o->types[i]))
            return false;
    }
    if (p->tok.kind == ',')
        return report(&p->lx, tok_loc(p, &p->tok),
                      "more result types than results (%d)", o->nout);
    return true;
}

/* loc("path":line:col) */
static bool parse_loc(Parser *p, OpText *o) {
    advance(p);
    if (!expect(p, '(', "'(' after 'loc'"))
        return false;
    if (p->tok.kind != TK_STRING)
        return unexpected(p, "a file name string in loc(...)");
    const char *path = tok_string(p, &p->tok);
    advance(p);
    int line, col;
    if (!expect(p, ':', "':' after the file name") ||
        !parse_count(p, "line number", &line) ||
        !expect(p, ':', "':' after the line number") ||
        !parse_count(p, "column number", &col) ||
        !expect(p, ')', "')' after loc(...)"))
        return false;
    o->loc = (DlcLoc){dlc_ctx_source_index(p->lx.ctx, path), line, col, 1};
    return true;
}

/* %a = name(operands) {attrs} : types loc(...), or without results
 * name(operands) {attrs} loc(...) */
static bool parse_op(Parser *p) {
    OpText o;
    memset(&o, 0, sizeof o);
    if (p->tok.kind == TK_WORD)
        o.first = p->tok;
    else if (!parse_results(p, &o) || !expect(p, '=', "'=' after the result names"))
        return false;
    if (!parse_op_kind(p, &o) || !parse_operands(p, &o) || !parse_attrs(p, &o) ||
        !parse_result_types(p, &o))
        return false;
    /* without loc(...), the op's place in the IR file */
    o.loc = tok_loc(p, &o.first);
    if (is_word(p, "loc") && !parse_loc(p, &o))
        return false;
    DlcValue *none = NULL; /* the builder copies in[] even when it is empty */
    if (!dlc_network_add_op(p->m, p->net, o.kind, o.in ? o.in : &none, o.nin,
                            o.nparams, o.attrs, o.types, o.names, o.nout, o.loc))
        dlc_unreachable("parse: result name taken after it was checked");
    return true;
}

/* return %a, %b */
static bool parse_return(Parser *p) {
    advance(p);
    if (p->tok.kind != TK_LOCAL && p->tok.kind != TK_GLOBAL)
        return true;
    do {
        DlcValue *v;
        if (!parse_ref(p, "a value to return", &v))
            return false;
        dlc_network_add_output(p->m, p->net, v);
    } while (accept(p, ','));
    return true;
}

/* (%x: T, ...) */
static bool parse_inputs(Parser *p) {
    if (!expect(p, '(', "'(' after the network name"))
        return false;
    if (accept(p, ')'))
        return true;
    for (;;) {
        if (!parse_input(p))
            return false;
        if (accept(p, ')'))
            return true;
        if (!expect(p, ',', "',' or ')' after the input"))
            return false;
    }
}

/* { params and ops, return } */
static bool parse_body(Parser *p) {
    if (!expect(p, '{', "'{' after the network's inputs"))
        return false;
    while (!is_word(p, "return")) {
        bool ok;
        if (is_word(p, "param") || is_word(p, "buffer"))
            ok = parse_param(p);
        else if (p->tok.kind == TK_LOCAL || p->tok.kind == TK_WORD)
            ok = parse_op(p);
        else
            return unexpected(p, "'param', 'buffer', an op or 'return'");
        if (!ok)
            return false;
    }
    return parse_return(p) && expect(p, '}', "'}' after the return");
}

/* network @name(inputs) { body } */
static bool parse_network(Parser *p) {
    advance(p);
    Token t = p->tok;
    if (t.kind != TK_GLOBAL)
        return unexpected(p, "a name such as @mlp after 'network'");
    const char *name = tok_name(p, &t);
    const DlcNetwork *old = dlc_module_find_network(p->m, name);
    if (old) {
        report(&p->lx, tok_loc(p, &t), "network '@%s' is already defined", name);
        dlc_note(p->lx.ctx, old->loc, "'@%s' was defined here", name);
        return false;
    }
    p->net = dlc_network_new(p->m, name, tok_loc(p, &t));
    advance(p);
    bool ok = parse_inputs(p) && parse_body(p);
    p->net = NULL;
    return ok;
}

/* ---- the parser: train sections ----------------------------------------- */

static bool parse_cfg(Parser *p, DlcCfg *v);
static bool parse_cfg_after_word(Parser *p, DlcCfg *v, const Token *t);

/* [key=]value inside a call. */
static bool parse_cfg_arg(Parser *p, DlcCfgArg *arg) {
    memset(arg, 0, sizeof *arg);
    if (p->tok.kind != TK_WORD)
        return parse_cfg(p, &arg->val);
    Token t = p->tok;
    advance(p);
    if (!accept(p, '='))
        return parse_cfg_after_word(p, &arg->val, &t);
    arg->key = tok_name(p, &t);
    arg->keyloc = tok_loc(p, &t);
    return parse_cfg(p, &arg->val);
}

/* name(args), the name already read into v->s; the current token is '('. */
static bool parse_cfg_call(Parser *p, DlcCfg *v) {
    if (p->depth == MAX_DEPTH)
        return report(&p->lx, v->loc, "value nested too deeply (at most %d calls)",
                      MAX_DEPTH);
    p->depth++;
    v->kind = DLC_CFG_CALL;
    advance(p);
    int cap = 0;
    bool ok = true;
    if (!accept(p, ')')) {
        for (;;) {
            DlcCfgArg arg;
            if (!(ok = parse_cfg_arg(p, &arg)))
                break;
            DLC_PUSH(&p->m->arena, v->args, v->nargs, cap, arg);
            if (accept(p, ')'))
                break;
            if (!(ok = expect(p, ',', "',' or ')' after the argument")))
                break;
        }
    }
    p->depth--;
    return ok;
}

/* A value that starts with the word t (already consumed): a call, true,
 * false, inf, nan, or a symbol. */
static bool parse_cfg_after_word(Parser *p, DlcCfg *v, const Token *t) {
    memset(v, 0, sizeof *v);
    v->loc = tok_loc(p, t);
    if (p->tok.kind != '(' && (tok_eq(t, "true") || tok_eq(t, "false"))) {
        v->kind = DLC_CFG_BOOL;
        v->b = tok_eq(t, "true");
    } else if (p->tok.kind != '(' && (tok_eq(t, "inf") || tok_eq(t, "nan"))) {
        v->kind = DLC_CFG_FLOAT;
        v->f = tok_eq(t, "nan") ? NAN : HUGE_VAL;
    } else {
        v->kind = DLC_CFG_SYM;
        v->s = tok_name(p, t);
        if (p->tok.kind == '(')
            return parse_cfg_call(p, v);
    }
    return true;
}

static bool parse_cfg(Parser *p, DlcCfg *v) {
    memset(v, 0, sizeof *v);
    v->loc = tok_loc(p, &p->tok);
    Token t = p->tok;
    switch (t.kind) {
    case TK_INT:
        v->kind = DLC_CFG_INT;
        return parse_int(p, "a value", &v->i);
    case TK_FLOAT:
    case '-':
        v->kind = DLC_CFG_FLOAT;
        return parse_float(p, "a value", &v->f);
    case TK_STRING:
        v->kind = DLC_CFG_STR;
        v->s = tok_string(p, &t);
        advance(p);
        return true;
    case TK_WORD:
        advance(p);
        return parse_cfg_after_word(p, v, &t);
    case '[': {
        if (p->depth == MAX_DEPTH)
            return report(&p->lx, v->loc, "value nested too deeply (at most %d)", MAX_DEPTH);
        v->kind = DLC_CFG_LIST;
        advance(p);
        int cap = 0;
        bool ok = true;
        p->depth++;
        while (ok && !accept(p, ']')) {
            DlcCfgArg item = {0};
            if (!(ok = parse_cfg(p, &item.val)))
                break;
            DLC_PUSH(&p->m->arena, v->args, v->nargs, cap, item);
            if (!accept(p, ',') && p->tok.kind != ']')
                ok = expect(p, ']', "',' or ']' after the item");
        }
        p->depth--;
        return ok;
    }
    default:
        return unexpected(p, "a value (a number, string, name, call or list)");
    }
}

/* train @name { key = value ... } */
static bool parse_train(Parser *p) {
    advance(p);
    Token t = p->tok;
    if (t.kind != TK_GLOBAL)
        return unexpected(p, "a network name such as @mlp after 'train'");
    DlcTrain *train = dlc_train_new(p->m, tok_name(p, &t), tok_loc(p, &t));
    advance(p);
    if (!expect(p, '{', "'{' after the train section's network"))
        return false;
    while (!accept(p, '}')) {
        Token key = p->tok;
        if (key.kind != TK_WORD)
            return unexpected(p, "a setting such as 'epochs = 10', or '}'");
        advance(p);
        DlcCfg v;
        if (!expect(p, '=', "'=' after the setting name") || !parse_cfg(p, &v))
            return false;
        dlc_train_add(p->m, train, tok_name(p, &key), v, tok_loc(p, &key));
    }
    return true;
}

/* ---- the module --------------------------------------------------------- */

static bool parse_module(Parser *p) {
    advance(p);
    while (p->tok.kind != TK_EOF) {
        bool ok;
        if (is_word(p, "network"))
            ok = parse_network(p);
        else if (is_word(p, "train"))
            ok = parse_train(p);
        else
            return unexpected(p, "'network' or 'train'");
        if (!ok)
            return false;
    }
    return !p->lx.failed;
}

DlcModule *dlc_parse_ir(DlcCtx *ctx, int file) {
    if (file < 0 || file >= ctx->nfiles || !ctx->files[file].text) {
        dlc_error(ctx, DLC_NOLOC, "no IR text to read");
        return NULL;
    }
    /* copy what is needed now: loc(...) may grow ctx->files */
    const DlcSource *src = &ctx->files[file];
    Parser p;
    memset(&p, 0, sizeof p);
    p.lx = (Lexer){ctx, file, src->text, src->size, 0, 1, 1, false};
    p.m = dlc_module_new(ctx);
    p.m->source = dlc_arena_strdup(&p.m->arena, src->path);
    if (!parse_module(&p)) {
        dlc_module_free(p.m);
        return NULL;
    }
    return p.m;
}
