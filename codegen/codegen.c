/* codegen.c — the table of targets, by device name or --emit= kind.  The
 * driver reaches a target only through it. */
#include "codegen.h"

#include <string.h>

static const DlcTarget *const targets[] = {&dlc_target_cpu, &dlc_target_nvptx};

const DlcTarget *dlc_target_lookup(const char *name) {
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
        if (strcmp(targets[i]->name, name) == 0)
            return targets[i];
    return NULL;
}

const DlcTarget *dlc_target_for_emit(const char *kind) {
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
        if (strcmp(targets[i]->emit_kind, kind) == 0)
            return targets[i];
    return NULL;
}
