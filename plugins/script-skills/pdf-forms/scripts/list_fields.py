"""Lists the fields of a JSON file made by extract_form_field_info.py."""

import json
import sys

if __name__ == "__main__":
    for f in json.load(open(sys.argv[1])):
        print(f"page {f['page']}: {f['field_id']} ({f['type']})")
