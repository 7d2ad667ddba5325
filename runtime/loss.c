/* loss.c — see dlrt.h. */
#include "dlrt.h"
