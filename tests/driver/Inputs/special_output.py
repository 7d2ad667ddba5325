#!/usr/bin/env python3
"""special_output.py DLC MODEL TMPDIR: -o onto something that is not a
regular file writes into it rather than replacing it (as root, renaming a
temporary file over /dev/null would destroy the device), and a regular
output file gets the permissions the umask allows, as with any tool."""
import os
import stat
import subprocess
import sys
import threading

dlc, model, tmp = sys.argv[1:4]
os.makedirs(tmp, exist_ok=True)

fifo = os.path.join(tmp, "out.fifo")
if os.path.exists(fifo):
    os.unlink(fifo)
os.mkfifo(fifo)
received = []
reader = threading.Thread(target=lambda: received.append(open(fifo).read()), daemon=True)
reader.start()
rc = subprocess.run([dlc, model, "--emit=ir", "-o", fifo], timeout=60).returncode
reader.join(timeout=30)
assert rc == 0, f"dlc exited with {rc}"
assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced by a file"
assert received and "network @" in received[0], "nothing came through the FIFO"

os.umask(0o022)
out = os.path.join(tmp, "plain.dlir")
subprocess.run([dlc, model, "-o", out], check=True, timeout=60)
mode = stat.S_IMODE(os.stat(out).st_mode)
assert mode == 0o644, f"output mode is {oct(mode)}, expected 0o644"
print("special outputs: ok")
