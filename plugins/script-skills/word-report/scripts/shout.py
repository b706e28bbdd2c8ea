"""Writes a file in capitals under out/."""

import os
import sys

name = sys.argv[1]
with open(name, "rb") as f:
    data = f.read()
os.makedirs(os.path.join("out", os.path.dirname(name)), exist_ok=True)
with open(os.path.join("out", name), "wb") as f:
    f.write(data.upper())
print(sys.stdin.read().strip() or "done")
