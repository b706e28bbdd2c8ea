"""Writes the fillable fields of a PDF (id, type, page, rectangle) as JSON."""

import json
import sys

from pypdf import PdfReader


def field_type(annotation):
    kind = annotation.get("/FT")
    return {"/Tx": "text", "/Btn": "checkbox", "/Ch": "choice", "/Sig": "signature"}.get(
        kind, f"unknown ({kind})"
    )


def field_info(reader):
    fields = []
    for page_number, page in enumerate(reader.pages, start=1):
        for ref in page.get("/Annots", []) or []:
            annotation = ref.get_object()
            if annotation.get("/Subtype") != "/Widget" or "/T" not in annotation:
                continue
            rect = [round(float(x), 2) for x in annotation.get("/Rect", [])]
            info = {
                "field_id": str(annotation["/T"]),
                "type": field_type(annotation),
                "page": page_number,
                "rect": rect,
            }
            if info["type"] == "checkbox":
                states = annotation.get("/AP", {}).get("/N", {})
                info["checked_value"] = next((s for s in states if s != "/Off"), "/Yes")
                info["unchecked_value"] = "/Off"
            fields.append(info)
    fields.sort(key=lambda f: (f["page"], -f["rect"][1] if f["rect"] else 0, f["field_id"]))
    return fields


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("Usage: extract_form_field_info.py INPUT.pdf OUTPUT.json")
        sys.exit(1)
    info = field_info(PdfReader(sys.argv[1]))
    with open(sys.argv[2], "w") as f:
        json.dump(info, f, indent=2)
    print(f"Wrote {len(info)} fields to {sys.argv[2]}")
