#!/usr/bin/env python3
"""gen_deep_network.py LAYERS: prints a .dl network of LAYERS layers (dense
and activation layers alternating, with a residual add every few layers and
a block expanded along the way), for measuring how the frontend scales."""
import sys

layers = int(sys.argv[1])
print("block unit(x, n) {\n    return dense(x, n) -> relu\n}\n")
print("network deep(x: f32[16]) {")
print("    h = dense(x, 16)")
made = 1
i = 0
while made < layers:
    if i % 4 == 3:
        print("    h = h + unit(h, 16)")   # a dense, a relu and an add
        made += 3
    else:
        print("    h = dense(h, 16) -> tanh")
        made += 2
    i += 1
print("    return h\n}")
