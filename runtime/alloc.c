/* alloc.c — the memory of generated networks.
 *
 * The generated code's parameters, activations, scratch and packed weights
 * start on a cache line, as do each op's packed weights within theirs
 * (codegen/cpu/cpu.c), so that a vector load of a weight block never
 * straddles two lines.  With glibc's malloc, large blocks start 16 bytes
 * past a page, and half of the 32-byte weight loads of a filter-lanes
 * convolution (16 filters, two vectors a tap) would straddle lines, each
 * of them reading two cache lines instead of one.
 */
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlrt.h"

void *dlrt_alloc(size_t count, size_t size) {
    if (size && count > (SIZE_MAX - DLRT_ALIGN) / size)
        return NULL;
    size_t bytes = count * size;
    bytes = (bytes + DLRT_ALIGN - 1) / DLRT_ALIGN * DLRT_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, DLRT_ALIGN, bytes ? bytes : DLRT_ALIGN) != 0)
        return NULL;
    memset(p, 0, bytes ? bytes : DLRT_ALIGN);
    return p;
}
