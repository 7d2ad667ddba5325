"""Writes DIR/c0.dl ... DIR/c39.dl, each importing the next, for the import
depth limit test in imports.dl.  Usage: make_import_chain.py DIR"""
import os
import sys

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
for i in range(40):
    with open(os.path.join(d, f"c{i}.dl"), "w") as f:
        f.write(f'import "c{i + 1}.dl"\n')
