"""help_in_man.py PROGRAM PAGE: every option and command that PROGRAM
--help lists (an item: two spaces, then a term) is in the man page PAGE as
man renders it (man.test), so that the two cannot drift apart."""
import os
import re
import subprocess
import sys

program, page = sys.argv[1], sys.argv[2]
help_text = subprocess.run([program, "--help"], capture_output=True, text=True,
                           check=True).stdout
env = dict(os.environ, MANWIDTH="200")
man = subprocess.run(["man", "-l", page], capture_output=True, text=True, env=env,
                     check=True).stdout
man_terms = {" ".join(line.split()) for line in man.splitlines()}
man_text = " ".join(man.split())
missing = []
for line in help_text.splitlines():
    m = re.match(r"  (\S.*?)(  |$)", line)
    if not m:
        continue
    term = m.group(1)
    if term not in man_terms and term not in man_text:
        missing.append(term)
if missing:
    sys.exit("%s: not in %s: %s" % (program, page, ", ".join(missing)))
print("%s: %d items, all in %s" % (os.path.basename(program),
                                    sum(1 for l in help_text.splitlines()
                                        if re.match(r"  \S", l)), os.path.basename(page)))
