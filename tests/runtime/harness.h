/* harness.h — the small harness of test_data.c and test_cuda.c: a tally of
 * checks, and CHECK, CHECK_OK and CHECK_ERROR, which report a failure with
 * the test file's name (HARNESS_FILE, defined before this is included) and
 * line.  Its state is the tally alone; harness_report prints
 * "N passed, N failed" and returns the program's exit status. */
#ifndef HARNESS_H
#define HARNESS_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "dlrt.h"

static struct {
    int passed, failed;
} tally;

static inline bool check_at(bool ok, const char *what, int line) {
    if (ok) {
        tally.passed++;
    } else {
        tally.failed++;
        fprintf(stderr, HARNESS_FILE ":%d: FAILED: %s\n", line, what);
    }
    return ok;
}
#define CHECK(cond) check_at((cond), #cond, __LINE__)

static inline bool check_ok_at(DlrtStatus st, const DlrtError *err, int line) {
    if (st != DLRT_OK)
        fprintf(stderr, HARNESS_FILE ":%d: unexpected %s: %s\n", line, dlrt_status_name(st),
                err->message);
    return check_at(st == DLRT_OK, "status is DLRT_OK", line);
}
#define CHECK_OK(st, err) check_ok_at((st), &(err), __LINE__)

/* A failure of status want whose message contains text. */
static inline bool check_error_at(DlrtStatus st, const DlrtError *err, DlrtStatus want,
                                  const char *text, int line) {
    bool ok = st == want && err->status == want && strstr(err->message, text);
    if (!ok)
        fprintf(stderr, HARNESS_FILE ":%d: expected %s with \"%s\", got %s: \"%s\"\n", line,
                dlrt_status_name(want), text, dlrt_status_name(st),
                st == DLRT_OK ? "" : err->message);
    return check_at(ok, "the expected error", line);
}
#define CHECK_ERROR(st, err, want, text) check_error_at((st), &(err), (want), (text), __LINE__)

/* "N passed, N failed", and the exit status: 1 on any failure. */
static inline int harness_report(void) {
    printf("%d passed, %d failed\n", tally.passed, tally.failed);
    return tally.failed != 0;
}

#endif /* HARNESS_H */
