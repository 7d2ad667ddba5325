/* out.c — the generated code's writer (out.h): lines counted for #line
 * directives, and the element type's literals. */
#include <stdarg.h>
#include <string.h>

#include "../../ir/ir.h"
#include "out.h"

void dlc_cpu_put(Out *o, const char *fmt, ...) {
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        dlc_unreachable("cpu: a generated line is too long");
    for (const char *p = tmp; *p; p++)
        o->line += *p == '\n';
    fputs(tmp, o->f);
}

void dlc_cpu_write(Out *o, const char *text, size_t len) {
    for (size_t i = 0; i < len; i++)
        o->line += text[i] == '\n';
    fwrite(text, 1, len, o->f);
}

void dlc_cpu_literal(char buf[DLC_CPU_LITERAL_MAX], double x, bool f64) {
    snprintf(buf, DLC_CPU_LITERAL_MAX - 3, "%.9g", x);
    if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    if (!f64)
        strcat(buf, "f");
}
