"""check_profile.py FILE ROWS CALLS: checks the DLRT_PROFILE table in FILE
(a program's standard error): ROWS rows, each of CALLS calls, longest
first, each row's time, share, mean and shortest call consistent with the
others and with the total; prints "profile ok" or what is wrong."""
import re
import sys


def main():
    path, rows, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lines = open(path).read().splitlines()
    heads = [i for i, l in enumerate(lines) if l.startswith("DLRT_PROFILE: ")]
    if len(heads) != 1:
        sys.exit(f"expected one DLRT_PROFILE table, found {len(heads)}")
    head = re.match(r"DLRT_PROFILE: (\d+) rows, ([0-9.]+) ms in all$", lines[heads[0]])
    if not head or int(head.group(1)) != rows:
        sys.exit(f"bad heading: {lines[heads[0]]!r}")
    table = lines[heads[0] + 2:heads[0] + 2 + rows]
    parsed = []
    for line in table:
        m = re.match(r"\s*([0-9.]+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)  (\S.*)$", line)
        if not m:
            sys.exit(f"bad row: {line!r}")
        ms, n, share, mean_us, min_us = (float(m.group(1)), int(m.group(2)), float(m.group(3)),
                                         float(m.group(4)), float(m.group(5)))
        parsed.append((ms, n, share, mean_us, min_us, m.group(6)))
    if len(parsed) != rows:
        sys.exit(f"expected {rows} rows, found {len(parsed)}")
    names = [p[5] for p in parsed]
    if len(set(names)) != rows:
        sys.exit("a row repeats")
    total_ms = sum(p[0] for p in parsed)
    for ms, n, share, mean_us, min_us, name in parsed:
        if n != calls:
            sys.exit(f"{name}: {n} calls, expected {calls}")
        # the figures are rounded: ms to 0.0005, us and % to 0.05
        if abs(mean_us - 1e3 * ms / n) > 0.05 + 0.5 / n + 1e-3 * mean_us:
            sys.exit(f"{name}: mean {mean_us} us is not {ms} ms / {n}")
        if min_us > mean_us + 0.1:
            sys.exit(f"{name}: shortest call {min_us} us longer than the mean {mean_us}")
        slack = 0.05 + 100 * 0.0005 * (1 + rows) / total_ms if total_ms > 0 else 100
        if abs(share - 100 * ms / total_ms) > slack + 0.01 * share:
            sys.exit(f"{name}: share {share}% is not {ms} of {total_ms} ms")
    if [p[0] for p in parsed] != sorted((p[0] for p in parsed), reverse=True):
        sys.exit("the rows are not longest first")
    if abs(sum(p[2] for p in parsed) - 100) > 0.05 * rows + 0.05:
        sys.exit("the shares do not add up to 100%")
    if abs(total_ms - float(head.group(2))) > 0.0005 * (1 + rows):
        sys.exit(f"the rows' {total_ms} ms are not the heading's {head.group(2)}")
    print("profile ok")


main()
