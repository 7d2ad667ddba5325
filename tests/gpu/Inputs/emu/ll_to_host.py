"""ll_to_host.py IN.ll OUT.ll: the GPU kernels' LLVM IR (dlc with
DLC_NVPTX_DUMP_LL=IN.ll) made host code for emu_driver.c: the NVVM
intrinsics become calls of the emulator's functions (thread and block
indices, the barrier, the tensor cores' conversions and mma.sync) or of libm's (ex2.approx and lg2.approx become exp2f
and log2f, exact where the GPU's are approximate; int8's dp4a, inline PTX,
becomes emu_dp4a), and each kernel gets a
wrapper, emu_wrap_NAME(void **args), that takes cuLaunchKernel's argument
array, and emu_sizes_NAME, its parameters' count and sizes in bytes."""
import re
import sys

INTRINSICS = {
    "@llvm.nvvm.read.ptx.sreg.tid.x": "@emu_tid_x",
    "@llvm.nvvm.read.ptx.sreg.ctaid.x": "@emu_ctaid_x",
    "@llvm.nvvm.read.ptx.sreg.ctaid.y": "@emu_ctaid_y",
    "@llvm.nvvm.read.ptx.sreg.ctaid.z": "@emu_ctaid_z",
    "@llvm.nvvm.read.ptx.sreg.ntid.x": "@emu_ntid_x",
    "@llvm.nvvm.read.ptx.sreg.nctaid.x": "@emu_nctaid_x",
    "@llvm.nvvm.barrier0": "@emu_barrier",
    "@llvm.nvvm.ex2.approx.f": "@exp2f",
    "@llvm.nvvm.lg2.approx.f": "@log2f",
    "@llvm.nvvm.f2tf32.rna": "@emu_f2tf32",
    "@llvm.nvvm.ff2bf16x2.rn": "@emu_ff2bf16x2",
}
# the tensor cores' mma.sync returns a struct of four floats: a function
# of this file's (SHIM) takes the intrinsic's place and passes its
# arguments, with the kind, to emu_driver.c's emu_mma
MMA = {
    "@llvm.nvvm.mma.m16n8k8.row.col.tf32": ("@emu_mma_tf32", 0),
    "@llvm.nvvm.mma.m16n8k16.row.col.bf16": ("@emu_mma_bf16", 1),
}
SHIM = """define {float, float, float, float} %s(i32 %%a0, i32 %%a1, i32 %%a2, i32 %%a3, i32 %%b0, i32 %%b1, float %%c0, float %%c1, float %%c2, float %%c3) {
  %%d = alloca [4 x float]
  call void @emu_mma(i32 %d, i32 %%a0, i32 %%a1, i32 %%a2, i32 %%a3, i32 %%b0, i32 %%b1, float %%c0, float %%c1, float %%c2, float %%c3, ptr %%d)
  %%p1 = getelementptr float, ptr %%d, i64 1
  %%p2 = getelementptr float, ptr %%d, i64 2
  %%p3 = getelementptr float, ptr %%d, i64 3
  %%d0 = load float, ptr %%d
  %%d1 = load float, ptr %%p1
  %%d2 = load float, ptr %%p2
  %%d3 = load float, ptr %%p3
  %%r0 = insertvalue {float, float, float, float} undef, float %%d0, 0
  %%r1 = insertvalue {float, float, float, float} %%r0, float %%d1, 1
  %%r2 = insertvalue {float, float, float, float} %%r1, float %%d2, 2
  %%r3 = insertvalue {float, float, float, float} %%r2, float %%d3, 3
  ret {float, float, float, float} %%r3
}"""
MMA_DECL = "declare void @emu_mma(i32, i32, i32, i32, i32, i32, i32, float, float, float, float, ptr)"
# inline PTX (LLVM 16 has no dp4a intrinsic): the call's callee text, and
# the emulator's function in its place
ASM = {
    'asm "dp4a.s32.s32 $0, $1, $2, $3;", "=r,r,r,r"': ("@emu_dp4a", "declare i32 @emu_dp4a(i32, i32, i32)"),
}
# a kernel parameter's type: global pointers arrive as CUdeviceptr values
TYPES = {"ptr addrspace(1)": "p", "i32": "i32", "i64": "i64", "float": "float"}
BYTES = {"p": 8, "i32": 4, "i64": 8, "float": 4}


def wrapper(name, params):
    lines = ["define void @emu_wrap_%s(ptr %%a) {" % name]
    args, sizes = [], []
    for i, p in enumerate(params.split(", ") if params else []):
        kind = next((k for t, k in TYPES.items() if p.startswith(t)), None)
        if kind is None:
            sys.exit("ll_to_host.py: kernel %s: parameter '%s'" % (name, p))
        sizes.append(BYTES[kind])
        lines.append("  %%s%d = getelementptr ptr, ptr %%a, i64 %d" % (i, i))
        lines.append("  %%v%d = load ptr, ptr %%s%d" % (i, i))
        if kind == "p":
            lines.append("  %%r%d = load i64, ptr %%v%d" % (i, i))
            lines.append("  %%x%d = inttoptr i64 %%r%d to ptr addrspace(1)" % (i, i))
            args.append("ptr addrspace(1) %%x%d" % i)
        else:
            lines.append("  %%x%d = load %s, ptr %%v%d" % (i, kind, i))
            args.append("%s %%x%d" % (kind, i))
    lines.append("  call void @%s(%s)" % (name, ", ".join(args)))
    lines.append("  ret void\n}")
    # the parameters' count and sizes, for copying a launch's arguments when
    # a graph records it
    lines.append("@emu_sizes_%s = constant [%d x i32] [%s]" % (
        name, len(sizes) + 1, ", ".join("i32 %d" % s for s in [len(sizes)] + sizes)))
    return "\n".join(lines)


def main():
    src = open(sys.argv[1]).read()
    for a, b in INTRINSICS.items():
        src = src.replace(a + "(", b + "(")
    for a, (b, decl) in ASM.items():
        if a in src:
            src = src.replace(a, b) + "\n" + decl + "\n"
    shims = []
    for a, (b, kind) in MMA.items():
        if a + "(" in src:
            src = re.sub(r"^declare .*" + re.escape(a) + r"\(.*$", "", src, flags=re.M)
            src = src.replace(a + "(", b + "(")
            shims.append(SHIM % (b, kind))
    if shims:
        src += "\n" + MMA_DECL + "\n" + "\n".join(shims) + "\n"
    src = re.sub(r"^target (datalayout|triple).*$", "", src, flags=re.M)
    kernels = re.findall(r"^define void @(\w+)\((.*)\) \{", src, flags=re.M)
    with open(sys.argv[2], "w") as out:
        out.write(src + "\n" + "\n".join(wrapper(n, p) for n, p in kernels) + "\n")


main()
