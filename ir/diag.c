/* diag.c — the compilation context and user diagnostics.
 *
 * A diagnostic reads "file:line:col: error: message", then the source line
 * and a caret (with tildes under the rest of the range), as chibicc and jq
 * print theirs.  Reporting never stops compilation: every stage keeps going
 * after an error so one run shows several; the driver checks ctx->nerrors
 * between stages.  Internal errors are not diagnostics (see dlc_die_).
 *
 * dlc_write_file, the one writer of output files, is here because its
 * failures are diagnostics too. */
#include "ir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void dlc_ctx_init(DlcCtx *ctx, FILE *err) {
    memset(ctx, 0, sizeof *ctx);
    ctx->err = err;
    ctx->max_errors = 20;
    ctx->color = err == stderr && isatty(fileno(stderr)) && !getenv("NO_COLOR");
}

void dlc_ctx_free(DlcCtx *ctx) {
    for (int i = 0; i < ctx->nfiles; i++) {
        free(ctx->files[i].path);
        free(ctx->files[i].text);
    }
    free(ctx->files);
    ctx->files = NULL;
    ctx->nfiles = ctx->capfiles = 0;
}

int dlc_ctx_add_source(DlcCtx *ctx, const char *path, char *text, size_t size,
                       bool is_ir) {
    if (ctx->nfiles == ctx->capfiles) {
        ctx->capfiles = ctx->capfiles ? 2 * ctx->capfiles : 8;
        DlcSource *nf = realloc(ctx->files, (size_t)ctx->capfiles * sizeof *nf);
        if (!nf)
            dlc_unreachable("out of memory");
        ctx->files = nf;
    }
    DlcSource *s = &ctx->files[ctx->nfiles];
    memset(s, 0, sizeof *s);
    s->path = strdup(path);
    s->text = text;
    s->size = size;
    s->is_ir = is_ir;
    return ctx->nfiles++;
}

int dlc_ctx_source_index(DlcCtx *ctx, const char *path) {
    for (int i = 0; i < ctx->nfiles; i++)
        if (strcmp(ctx->files[i].path, path) == 0)
            return i;
    return dlc_ctx_add_source(ctx, path, NULL, 0, false);
}

const char *dlc_ctx_path(const DlcCtx *ctx, DlcLoc loc) {
    if (loc.file < 0 || loc.file >= ctx->nfiles)
        return "<unknown>";
    return ctx->files[loc.file].path;
}

/* The text of line `line` of the source (not NUL-terminated; *len set), or
 * NULL.  Sources named only by IR loc(...) are read on first use. */
static const char *source_line(DlcCtx *ctx, DlcLoc loc, int *len) {
    if (loc.file < 0 || loc.file >= ctx->nfiles || loc.line < 1)
        return NULL;
    DlcSource *s = &ctx->files[loc.file];
    if (!s->text && !s->tried && strcmp(s->path, "-") != 0) {
        /* only regular files of sane size: a loc() in IR text naming
           /dev/zero or a huge file must not hang us */
        struct stat st;
        s->tried = true;
        if (stat(s->path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (64 << 20))
            s->text = dlc_read_file(s->path, &s->size);
    }
    if (!s->text)
        return NULL;
    const char *p = s->text, *end = s->text + s->size;
    for (int l = 1; l < loc.line; l++) {
        p = memchr(p, '\n', (size_t)(end - p));
        if (!p)
            return NULL;
        p++;
    }
    const char *e = memchr(p, '\n', (size_t)(end - p));
    if (!e)
        e = end;
    if (e > p && e[-1] == '\r')
        e--;
    *len = (int)(e - p);
    return p;
}

void dlc_vdiag(DlcCtx *ctx, DlcSeverity sev, DlcLoc loc, const char *fmt,
               va_list ap) {
    if (sev == DLC_SEV_WARNING) {
        if (ctx->no_warnings) {
            ctx->in_note_of_dropped = true;
            return;
        }
        if (ctx->werror) {
            sev = DLC_SEV_ERROR;
            ctx->nwerrors++;
        } else
            ctx->nwarnings++;
    }
    if (sev == DLC_SEV_ERROR) {
        ctx->nerrors++;
        if (ctx->nerrors > ctx->max_errors) {
            if (ctx->nerrors == ctx->max_errors + 1)
                fprintf(ctx->err, "dlc: too many errors; stopping here\n");
            ctx->in_note_of_dropped = true;
            return;
        }
    }
    if (sev == DLC_SEV_NOTE && ctx->in_note_of_dropped)
        return;
    if (sev != DLC_SEV_NOTE)
        ctx->in_note_of_dropped = false;

    static const char *const label[] = {"error", "warning", "note"};
    static const char *const colour[] = {"\033[1;31m", "\033[1;35m", "\033[1;36m"};
    const char *bold = ctx->color ? "\033[1m" : "";
    const char *reset = ctx->color ? "\033[0m" : "";
    if (loc.file >= 0)
        fprintf(ctx->err, "%s%s:%d:%d: ", bold, dlc_ctx_path(ctx, loc),
                loc.line, loc.col);
    else
        fprintf(ctx->err, "%sdlc: ", bold);
    fprintf(ctx->err, "%s%s:%s%s ", ctx->color ? colour[sev] : "", label[sev],
            reset, bold);
    vfprintf(ctx->err, fmt, ap);
    fprintf(ctx->err, "%s\n", reset);

    int len;
    const char *line = source_line(ctx, loc, &len);
    if (!line)
        return;
    fprintf(ctx->err, "%.*s\n", len, line);
    /* keep tabs in the indentation so the caret lines up */
    for (int i = 0; i < loc.col - 1 && i < len; i++)
        fputc(line[i] == '\t' ? '\t' : ' ', ctx->err);
    fprintf(ctx->err, "%s^", ctx->color ? colour[sev] : "");
    for (int i = 1; i < loc.len && loc.col - 1 + i < len; i++)
        fputc('~', ctx->err);
    fprintf(ctx->err, "%s\n", reset);
}

#define DEFINE_DIAG(fn, sev)                                                  \
    void fn(DlcCtx *ctx, DlcLoc loc, const char *fmt, ...) {                 \
        va_list ap;                                                           \
        va_start(ap, fmt);                                                    \
        dlc_vdiag(ctx, sev, loc, fmt, ap);                                    \
        va_end(ap);                                                           \
    }
DEFINE_DIAG(dlc_error, DLC_SEV_ERROR)
DEFINE_DIAG(dlc_warning, DLC_SEV_WARNING)
DEFINE_DIAG(dlc_note, DLC_SEV_NOTE)

/* A path that is not a regular file (/dev/null, a pipe) is written in
 * place: renaming a file over it would replace it. */
static bool write_in_place(const char *path, const char *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(buf, 1, len, f) == len;
    if (f)
        ok &= fclose(f) == 0;
    return ok;
}

bool dlc_write_file(DlcCtx *ctx, const char *path, const char *buf, size_t len) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (write_in_place(path, buf, len))
            return true;
        dlc_error(ctx, DLC_NOLOC, "cannot write '%s': %s", path, strerror(errno));
        return false;
    }
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp)
        dlc_unreachable("out of memory");
    snprintf(tmp, n + 16, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd >= 0) {
        /* mkstemp makes the file private; give it the permissions a plain
           fopen would have */
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    bool ok = f && fwrite(buf, 1, len, f) == len;
    if (f)
        ok &= fclose(f) == 0;
    else if (fd >= 0)
        close(fd);
    if (ok)
        ok = rename(tmp, path) == 0;
    int saved = errno;
    if (!ok && fd >= 0)
        unlink(tmp);
    if (!ok)
        dlc_error(ctx, DLC_NOLOC, "cannot write '%s': %s", path, strerror(saved));
    free(tmp);
    return ok;
}
