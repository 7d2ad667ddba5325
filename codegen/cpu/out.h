/* out.h — the generated code's writer: a file being written with its lines
 * counted, for #line directives, and the element type's literals.  Every
 * file of the C target goes through it, and any other target that writes
 * C (codegen/nvptx's NAME_cuda.c) may use it, so that they spell lines and
 * constants alike. */
#ifndef DLC_CPU_OUT_H
#define DLC_CPU_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A file being written, with its lines counted for #line directives. */
typedef struct Out {
    FILE *f;          /* where the text goes (often an open_memstream) */
    char *buf;        /* the open_memstream's buffer, when it is one */
    size_t len;       /* and its length */
    int line;         /* lines written so far */
    const char *name; /* the file's name, for #line back to it */
} Out;

/* printf to o (a line of at most 4 KiB). */
__attribute__((format(printf, 2, 3))) void dlc_cpu_put(Out *o, const char *fmt, ...);
/* len bytes of text to o as they are (of any length). */
void dlc_cpu_write(Out *o, const char *text, size_t len);

/* A C literal of the element type for x into buf: "0.9f", "1e-08f",
 * "0.0f" (f32); "0.9", "1e-08", "0.0" (f64).  Every constant of the
 * generated code is written so, so that an op fused into another gets the
 * very value it would get as an op of its own. */
enum { DLC_CPU_LITERAL_MAX = 64 };
void dlc_cpu_literal(char buf[DLC_CPU_LITERAL_MAX], double x, bool f64);

#endif /* DLC_CPU_OUT_H */
