/* batch.c — see dlrt.h. */
#include "dlrt.h"
