#!/usr/bin/env python3
"""Counts the words of a text file and writes out/report.json.

Usage: count_words.py FILE [--fail]
"""

import argparse
import collections
import json
import pathlib
import re
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--fail", action="store_true")
    args = parser.parse_args()
    text = pathlib.Path(args.file).read_text(encoding="utf-8")
    words = re.findall(r"[\w']+", text.lower())
    common = collections.Counter(words).most_common(3)
    report = {"file": args.file, "words": len(words), "common": common}
    out = pathlib.Path("out")
    out.mkdir(exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(f"{args.file}: {len(words)} words")
    if args.fail:
        print("failing as asked", file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
