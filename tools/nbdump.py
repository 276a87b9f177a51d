"""Print a notebook's cells with their outputs, numbered, as plain text:
python tools/nbdump.py solutions/11_translation.ipynb"""

import json
import sys


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


nb = json.load(open(sys.argv[1]))
for i, c in enumerate(nb["cells"]):
    print(f"===== cell {i} [{c['cell_type']}] =====")
    print(_text(c["source"]))
    for o in c.get("outputs", []):
        if "text" in o:
            print("----- output -----")
            print(_text(o["text"]))
        elif "data" in o:
            d = o["data"]
            if "text/plain" in d:
                print("----- output -----")
                print(_text(d["text/plain"]))
            if "image/png" in d:
                print("[figure]")
        elif o.get("output_type") == "error":
            print("----- ERROR -----", o.get("ename"), o.get("evalue"))
