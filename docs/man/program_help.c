/* program_help.c — a generated program's --help, for its man page.
 *
 * The build runs this and turns its output into dlc-program(1) with
 * help2man.awk, so that the page says what every program's --help says.
 * The network is a stand-in, NET, with models/lenet5.dl's train section
 * as its defaults. */
#include "dlrt.h"

static void no_clip(void *net, double clip) {
    (void)net, (void)clip;
}

int main(void) {
    DlrtModel m = {.name = "NET", .source = "NET.dl", .batch = 64, .epochs = 10, .lr = 0.01,
                   .seed = 1, .data = "/usr/share/datasets/fashion-mnist", .set_clip = no_clip};
    m.cuda = &m; /* the page covers programs built with --target=cpu,cuda too */
    char name[] = "NET", help[] = "--help";
    char *argv[] = {name, help, NULL};
    return dlrt_main(2, argv, &m);
}
