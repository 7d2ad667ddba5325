/* support.c — small utilities every stage of the compiler uses: the arena
 * that owns a module, string maps, "did you mean" suggestions, reading
 * files, and the internal-error exit.  Nothing here knows about networks. */
#include "ir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct DlcArenaChunk {
    DlcArenaChunk *next;
    size_t used, size;
    _Alignas(max_align_t) unsigned char data[];
};

void *dlc_arena_alloc(DlcArena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    DlcArenaChunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t chunk = 64 * 1024;
        if (size > chunk / 4)
            chunk = size; /* big requests get a chunk of their own */
        c = malloc(sizeof *c + chunk);
        if (!c)
            dlc_unreachable("out of memory allocating %zu bytes", chunk);
        c->used = 0;
        c->size = chunk;
        /* a private big chunk goes behind the head so the head keeps serving */
        if (a->head && size == chunk) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

char *dlc_arena_strndup(DlcArena *a, const char *s, size_t n) {
    char *p = dlc_arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

char *dlc_arena_strdup(DlcArena *a, const char *s) {
    return dlc_arena_strndup(a, s, strlen(s));
}

char *dlc_arena_printf(DlcArena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = dlc_arena_alloc(a, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void *dlc_arena_grow(DlcArena *a, void *ptr, int *cap, int need, size_t elem) {
    int ncap = *cap ? *cap : 4;
    while (ncap < need)
        ncap *= 2;
    void *p = dlc_arena_alloc(a, (size_t)ncap * elem);
    if (ptr)
        memcpy(p, ptr, (size_t)*cap * elem);
    *cap = ncap;
    return p;
}

void dlc_arena_free(DlcArena *a) {
    DlcArenaChunk *c = a->head;
    while (c) {
        DlcArenaChunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

/* FNV-1a */
static uint32_t hash_str(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

void dlc_map_init(DlcMap *m, DlcArena *arena) {
    memset(m, 0, sizeof *m);
    m->arena = arena;
}

static int map_slot(const DlcMap *m, const char *key) {
    int mask = m->cap - 1;
    int i = (int)(hash_str(key) & (uint32_t)mask);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & mask;
    return i;
}

void *dlc_map_get(const DlcMap *m, const char *key) {
    if (!m->cap)
        return NULL;
    int i = map_slot(m, key);
    return m->keys[i] ? m->vals[i] : NULL;
}

void dlc_map_put(DlcMap *m, const char *key, void *val) {
    if (2 * (m->len + 1) > m->cap) {
        DlcMap old = *m;
        m->cap = old.cap ? old.cap * 2 : 16;
        m->keys = dlc_arena_alloc(m->arena, (size_t)m->cap * sizeof *m->keys);
        m->vals = dlc_arena_alloc(m->arena, (size_t)m->cap * sizeof *m->vals);
        m->len = 0;
        for (int i = 0; i < old.cap; i++)
            if (old.keys[i])
                dlc_map_put(m, old.keys[i], old.vals[i]);
    }
    int i = map_slot(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->len++;
    }
    m->vals[i] = val;
}

int dlc_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 1000; /* long names are never suggestions */
    int d[66][66];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1; /* transposition */
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *dlc_closest(const char *name, const char *const *cands, int n) {
    const char *best = NULL;
    int best_d = 1000;
    for (int i = 0; i < n; i++) {
        if (!cands[i] || strcmp(cands[i], name) == 0)
            continue;
        int d = dlc_edit_distance(name, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    /* up to a third of the name's length in edits reads as a typo; a
       one-letter name is too short to guess at */
    int limit = ((int)strlen(name) + 1) / 3;
    return best_d <= limit ? best : NULL;
}

_Noreturn void dlc_die_(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dlc: internal error at %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

char *dlc_read_file(const char *path, size_t *size) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            errno = ENOMEM;
            break;
        }
        n += fread(buf + n, 1, cap - n - 1, f);
        if (ferror(f)) {
            free(buf);
            buf = NULL;
            errno = EIO;
            break;
        }
        if (feof(f))
            break;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    int saved = errno;
    if (f != stdin)
        fclose(f);
    errno = saved;
    if (!buf)
        return NULL;
    buf[n] = 0;
    if (size)
        *size = n;
    return buf;
}

bool dlc_run(char *const *argv, const char *out) {
    pid_t pid = fork();
    if (pid == 0) {
        if (out) {
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || dup2(fd, 1) < 0)
                _exit(127);
        }
        execvp(argv[0], argv);
        fprintf(stderr, "dlc: error: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}
