"""int8_pow2.py IN OUT: rewrites an int8 checkpoint (calibrate's) with every
scale (each F32 tensor whose name ends in "scale") the nearest power of two,
for emulated_int8.test: each requantization's multiplier is then a power of
two, and the sums that fall halfway between two integers (ties, which
round half to even) are many, in the layers and in the joins (qadd's two
multipliers, qconcat's and qglobalavgpool's).  Tensors keep their names,
types and shapes."""
import json
import math
import struct
import sys


def main():
    raw = open(sys.argv[1], "rb").read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    data = bytearray(raw[8 + size:])
    changed = 0
    for name, t in header.items():
        if name == "__metadata__" or not name.endswith("scale") or t["dtype"] != "F32":
            continue
        begin, end = t["data_offsets"]
        values = struct.unpack("<%df" % ((end - begin) // 4), data[begin:end])
        pow2 = [2.0 ** round(math.log2(v)) if v > 0 else v for v in values]
        data[begin:end] = struct.pack("<%df" % len(pow2), *pow2)
        changed += 1
    if changed == 0:
        sys.exit("int8_pow2.py: no scale in %s" % sys.argv[1])
    with open(sys.argv[2], "wb") as f:
        f.write(raw[:8 + size] + bytes(data))


main()
