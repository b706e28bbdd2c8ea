"""Unpacks an Office file (docx, xlsx, pptx) into a folder, its XML pretty-printed.

Usage: python unpack.py INPUT_FILE OUTPUT_FOLDER
"""

import sys
import zipfile
from pathlib import Path

from helpers.xml_format import pretty

if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(1)
    source, target = sys.argv[1], Path(sys.argv[2])
    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(source) as z:
        names = z.namelist()
        for name in names:
            data = z.read(name)
            if name.endswith(".xml") or name.endswith(".rels"):
                data = pretty(data)
            out = target / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
    print(f"Unpacked {len(names)} parts of {source} to {target}")
