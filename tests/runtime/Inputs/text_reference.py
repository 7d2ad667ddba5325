"""text_reference.py: an independent reading of text, for test_text.

It prints what `test_text` prints for the same files, computed with Python's
own UTF-8 decoder, gzip and json, and writes and reads checkpoints with the
vocabulary in their metadata without libdlrt (the safetensors layout by
hand: an 8-byte little-endian header size, JSON, the data).

  text_reference.py load PATH [STEPS FRACTION]   like test_text load
  text_reference.py make-folder DIR SRC          a folder as fortunes lays one
                                                 out, from the text file SRC
  text_reference.py save-vocab PATH CHECKPOINT   PATH's vocabulary in a
                                                 checkpoint, its JSON all \\u
                                                 escapes (surrogate pairs too)
  text_reference.py read-vocab CHECKPOINT        like test_text read-vocab
  text_reference.py raw-vocab CHECKPOINT VALUE   a checkpoint whose vocabulary
                                                 is VALUE, as given
"""
import array
import gzip
import json
import math
import os
import struct
import sys
import zlib


def read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def read_text(path):
    """The bytes dlrt_load_text reads, and the number of files."""
    if not os.path.isdir(path):
        return read_file(path), 1
    names = sorted(os.listdir(path), key=os.fsencode)
    data, files = b"", 0
    for name in names:
        full = os.path.join(path, name)
        if name.startswith(".") or os.path.islink(full) or not os.path.isfile(full):
            continue
        if name.endswith(".dat") and len(name) > 4 and name[:-4] in names:
            continue
        data += read_file(full)
        files += 1
    return data, files


def print_vocab(chars):
    print("vocabulary: %d characters: %s" % (len(chars), " ".join("%X" % ord(c) for c in chars)))


def load(path, steps=0, fraction=0.0):
    data, files = read_text(path)
    text = data.decode("utf-8", errors="strict")
    assert "\0" not in text
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = array.array("i", (index[c] for c in text))
    if sys.byteorder != "little":
        ids.byteswap()
    print("text: %d bytes, %d characters, crc32 %08x; files: %d"
          % (len(data), len(text), zlib.crc32(data), files))
    print_vocab(vocab)
    print("ids: %d, crc32 %08x" % (len(ids), zlib.crc32(ids.tobytes())))
    if steps > 0:
        total = (len(ids) - 1) // steps
        nval = math.floor(fraction * total + 0.5)  # C's llround, for x >= 0
        print("datasets: %d training and %d validation sequences of %d steps"
              % (total - nval, nval, steps))


def make_folder(folder, src):
    """Three pieces of src: a plain file, a gzip-compressed one, and one
    with an index beside it and a link to it, as fortune files have."""
    with open(src, "rb") as f:
        data = f.read()
    cuts = [len(data) // 3, 2 * len(data) // 3]
    for i in range(2):
        while cuts[i] < len(data) and (data[cuts[i]] & 0xC0) == 0x80:
            cuts[i] += 1  # between characters
    os.makedirs(folder)
    with open(os.path.join(folder, "a"), "wb") as f:
        f.write(data[:cuts[0]])
    with open(os.path.join(folder, "b.gz"), "wb") as f:
        f.write(gzip.compress(data[cuts[0]:cuts[1]]))
    with open(os.path.join(folder, "c"), "wb") as f:
        f.write(data[cuts[1]:])
    with open(os.path.join(folder, "c.dat"), "wb") as f:
        f.write(struct.pack(">IIIIII", 2, 1, 10, 1, 0, 0x25000000))
    os.symlink("c", os.path.join(folder, "c.u8"))
    os.makedirs(os.path.join(folder, "off"))
    with open(os.path.join(folder, "off", "d"), "wb") as f:
        f.write(b"not read\n")


def write_checkpoint(path, vocabulary):
    header = {"__metadata__": {"network": "charlm", "vocabulary": vocabulary},
              "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    text = json.dumps(header, ensure_ascii=True).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + struct.pack("<2f", 0.25, 4.0))


def read_vocab(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    print_vocab(list(header["__metadata__"]["vocabulary"]))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "load":
        load(args[0], int(args[1]) if len(args) > 1 else 0,
             float(args[2]) if len(args) > 2 else 0.0)
    elif cmd == "make-folder":
        make_folder(args[0], args[1])
    elif cmd == "save-vocab":
        data, _ = read_text(args[0])
        write_checkpoint(args[1], "".join(sorted(set(data.decode("utf-8")))))
    elif cmd == "read-vocab":
        read_vocab(args[0])
    elif cmd == "raw-vocab":
        write_checkpoint(args[0], args[1])
    else:
        sys.exit("text_reference.py: unknown command " + cmd)


if __name__ == "__main__":
    main()
