"""Print a notebook's cells with their outputs, numbered, as plain text: python tools/nbdump.py solutions/11_translation.ipynb"""
import json, sys
nb = json.load(open(sys.argv[1]))
for i, c in enumerate(nb["cells"]):
    src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
    print(f"===== cell {i} [{c['cell_type']}] =====")
    print(src)
    for o in c.get("outputs", []):
        if "text" in o:
            t = o["text"]; print("----- output -----"); print("".join(t) if isinstance(t, list) else t)
        elif "data" in o:
            d = o["data"]
            if "text/plain" in d:
                t = d["text/plain"]; print("----- output -----"); print("".join(t) if isinstance(t, list) else t)
            if "image/png" in d: print("[figure]")
        elif o.get("output_type") == "error":
            print("----- ERROR -----", o.get("ename"), o.get("evalue"))
