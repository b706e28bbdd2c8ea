#!/usr/bin/env python3
"""Checks a skill folder's SKILL.md front matter."""

import re
import sys
from pathlib import Path

import yaml

ALLOWED = {"name", "description", "license", "allowed-tools", "metadata", "compatibility"}


def validate_skill(folder):
    skill_md = Path(folder) / "SKILL.md"
    if not skill_md.exists():
        return False, "SKILL.md not found"
    content = skill_md.read_text()
    if not content.startswith("---"):
        return False, "No YAML front matter found"
    match = re.match(r"^---\n(.*?)\n---", content, re.DOTALL)
    if not match:
        return False, "Invalid front matter format"
    try:
        front = yaml.safe_load(match.group(1))
    except yaml.YAMLError as e:
        return False, f"Invalid YAML in front matter: {e}"
    if not isinstance(front, dict):
        return False, "Front matter must be a YAML dictionary"
    unexpected = set(front) - ALLOWED
    if unexpected:
        return False, f"Unexpected key(s) in front matter: {', '.join(sorted(unexpected))}"
    name = str(front.get("name", "")).strip()
    if not name:
        return False, "Missing 'name' in front matter"
    if not re.match(r"^[a-z0-9-]+$", name) or name.startswith("-") or "--" in name:
        return False, f"Name '{name}' should be hyphen-case"
    description = str(front.get("description", "")).strip()
    if not description:
        return False, "Missing 'description' in front matter"
    if "<" in description or ">" in description:
        return False, "Description cannot contain angle brackets"
    if len(description) > 1024:
        return False, f"Description is too long ({len(description)} characters)"
    return True, "Skill is valid!"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("Usage: quick_validate.py SKILL_FOLDER")
        sys.exit(1)
    valid, message = validate_skill(sys.argv[1])
    print(message)
    sys.exit(0 if valid else 1)
