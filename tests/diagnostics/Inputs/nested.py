"""Prints a network whose line 2 binds an expression nested DEPTH deep, for
limits.dl.  Usage: nested.py KIND DEPTH, where KIND is
  neg     - - - ... 1         (unary minus: one expression level each)
  list    [[[ ... 1 ]]]       (list literals)
  paren   ((( ... 1 )))       (parentheses: parser nesting only)"""
import sys

kind, depth = sys.argv[1], int(sys.argv[2])
expr = {
    "neg": "-" * depth + "1",
    "list": "[" * depth + "1" + "]" * depth,
    "paren": "(" * depth + "1" + ")" * depth,
}[kind]
print("network n(x: f32[1]) {")
print("    a = " + expr)
print("    return x")
print("}")
