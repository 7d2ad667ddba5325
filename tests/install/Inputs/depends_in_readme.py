"""depends_in_readme.py DEPENDS README: each package of a Depends field
(deb.test) is one that README.md's table of dependencies names, so that
the package asks for nothing the README does not explain."""
import re
import sys

depends = open(sys.argv[1]).read()
readme = open(sys.argv[2]).read()
named = set(re.findall(r"`([a-z0-9][a-z0-9.+-]+)`", readme))
packages = [d.split()[0] for d in re.split(r"[,|]", depends) if d.strip()]
missing = [p for p in packages if p not in named]
if missing:
    sys.exit("in Depends but not in the README's table: " + ", ".join(missing))
print("Depends: %d packages, all in the README" % len(packages))
