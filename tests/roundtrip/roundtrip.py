#!/usr/bin/env python3
"""Round trip of every .dl file through the IR text form.

For each .dl file under the given folders, and each part of it (parts are
separated by '// -----' lines, as dlc --split-input-file reads them), that
compiles without errors: print its IR (after the default pipeline, and with
no passes), parse that text back, print it again, and require the two texts
to be identical.  Parts that are meant to fail (diagnostic tests) are
skipped.  Prints 'N passed, N failed'; exits non-zero on any failure or if
fewer parts than --min compiled (so the test cannot pass vacuously).
"""
import argparse
import os
import subprocess
import sys
import tempfile


def parts(text):
    """The parts of a split input, other lines blanked to keep line numbers."""
    lines = text.split("\n")
    index, owner = 0, []
    for line in lines:
        if line.startswith("// -----"):
            index += 1
            owner.append(-1)
        else:
            owner.append(index)
    for k in range(index + 1):
        yield k, "\n".join(l if o == k else "" for l, o in zip(lines, owner))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dlc")
    ap.add_argument("roots", nargs="+")
    ap.add_argument("--min", type=int, default=1)
    args = ap.parse_args()
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for root in args.roots:
            for folder, _, files in sorted(os.walk(root)):
                for name in sorted(files):
                    if not name.endswith(".dl"):
                        continue
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                    for k, part in parts(text):
                        src = os.path.join(tmp, f"part{k}.dl")
                        with open(src, "w") as f:
                            f.write(part)
                        for passes in ([], ["--passes="]):
                            a = os.path.join(tmp, "a.dlir")
                            r = run([args.dlc, src, "-w", "-I", folder, "-o", a] + passes)
                            if r.returncode != 0:
                                continue  # a part that is meant to fail
                            b = run([args.dlc, a, "--emit=ir"])
                            with open(a) as f:
                                first = f.read()
                            if b.returncode == 0 and b.stdout == first:
                                passed += 1
                            else:
                                failed += 1
                                print(f"FAIL {path} part {k} {' '.join(passes)}")
                                print(b.stderr or "printed differently:\n" + b.stdout)
    print(f"{passed} passed, {failed} failed")
    if passed < args.min:
        print(f"only {passed} parts compiled; expected at least {args.min}")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
