#!/usr/bin/env python3
"""many_gradients.py [K]: IR text of a training step whose clip_norm reads K
gradients (101 unless given), more than a kernel's pointers and more than
the GPU target's operand numbers once reached (100), for ptx_clip.dl: each
gradient a bias_grad, the last clipped and the bias's update."""
import sys

k = int(sys.argv[1]) if len(sys.argv) > 1 else 101
print("network @n(%x: f32[N,4]) {\n  param @w: f32[2,4] init=kaiming_uniform\n"
      "  param @b: f32[2] init=zeros\n"
      "  %y = dense(%x, @w, @b) {units=2} : f32[N,2]\n  return %y\n}\n")
print("network @n.train(%x: f32[N,4], %labels: i32[N], %lr: f32[], %clip: f32[]) {\n"
      "  param @w: f32[2,4] init=kaiming_uniform\n  param @b: f32[2] init=zeros\n"
      "  %y = dense(%x, @w, @b) {units=2} : f32[N,2]\n"
      "  %loss = cross_entropy(%y, %labels) : f32[]\n"
      "  %dy = cross_entropy_grad(%y, %labels) : f32[N,2]")
for i in range(k):
    print(f"  %g{i} = bias_grad(%dy) : f32[2]")
print("  %c = clip_norm(" + ", ".join(f"%g{i}" for i in range(k)) + ", %clip) : f32[]")
print(f"  %s = clip_scale(%g{k - 1}, %c) : f32[2]\n  sgd_update(%s, %lr, @b)\n  return %loss\n}}")
