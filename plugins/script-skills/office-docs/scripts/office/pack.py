"""Packs a folder made by unpack.py back into an Office file, its XML condensed.

Usage: python pack.py INPUT_FOLDER OUTPUT_FILE
"""

import sys
import zipfile
from pathlib import Path

from helpers.xml_format import condensed

if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(1)
    source, target = Path(sys.argv[1]), Path(sys.argv[2])
    target.parent.mkdir(parents=True, exist_ok=True)
    parts = sorted(p for p in source.rglob("*") if p.is_file())
    # [Content_Types].xml first, as Office expects.
    parts.sort(key=lambda p: p.name != "[Content_Types].xml")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for part in parts:
            name = part.relative_to(source).as_posix()
            data = part.read_bytes()
            if name.endswith(".xml") or name.endswith(".rels"):
                data = condensed(data)
            z.writestr(name, data)
    print(f"Packed {len(parts)} parts of {source} into {target}")
