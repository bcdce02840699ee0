#!/usr/bin/env python3
"""daemon/dashboard/embed.py IN OUT.c — writes the bytes of IN as a C array
behind srv_dashboard_html() (see dashboard.h).  Run by meson at build time,
so the page is edited as plain HTML and compiled into foliod."""
import sys

src, out = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
lines = []
for i in range(0, len(data), 16):
    lines.append("    " + ",".join("%d" % b for b in data[i:i + 16]) + ",")
with open(out, "w") as f:
    f.write("/* Generated from %s by daemon/dashboard/embed.py: do not edit. */\n"
            % src.replace("\\", "/").split("/")[-1])
    f.write("#include <stddef.h>\n\n#include \"dashboard.h\"\n\n")
    f.write("static const unsigned char page[%d] = {\n" % (len(data) + 1))
    f.write("\n".join(lines))
    f.write("\n    0,\n};\n\n")
    f.write("const char *srv_dashboard_html(size_t *len)\n{\n")
    f.write("    if (len)\n        *len = %d;\n" % len(data))
    f.write("    return (const char *)page;\n}\n")
