"""Says whether a PDF has fillable form fields."""

import sys

from pypdf import PdfReader


def main(path):
    reader = PdfReader(path)
    fields = reader.get_fields()
    if fields:
        print(f"This PDF has {len(fields)} fillable form fields")
    else:
        print("This PDF has no fillable form fields; annotate it instead")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("Usage: check_fillable_fields.py FILE.pdf")
        sys.exit(1)
    main(sys.argv[1])
