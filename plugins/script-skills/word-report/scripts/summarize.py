#!/usr/bin/env python3
"""Prints one line about a report made by count_words.py."""

import json
import sys

if __name__ == "__main__":
    report = json.load(open(sys.argv[1]))
    top = ", ".join(f"{w} ({n})" for w, n in report["common"])
    print(f"{report['words']} words; most common: {top}")
