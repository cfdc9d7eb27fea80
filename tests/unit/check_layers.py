#!/usr/bin/python3
"""Checks core/'s stack (the `layers:` line of core/README.md): a core file
includes headers of modules below its own only, and a front end includes
from core/ only the facade and the utilities.  Exit status 1 on a breach."""
import pathlib
import re
import sys

FRONT_END_ALLOWED = {"tree", "crawl", "file", "error", "url", "mountinfo"}
FRONT_ENDS = ("fusefs", "fanotify-mode", "cli")


def local_includes(path):
    return re.findall(r'^#include "([\w-]+)\.h"', path.read_text(), re.M)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    readme = (root / "core" / "README.md").read_text()
    layers = re.search(r"^layers: (.+)$", readme, re.M).group(1).split()
    rank = {name: i for i, name in enumerate(layers)}
    breaches = []
    for path in sorted((root / "core").glob("*.[ch]")):
        module = path.stem
        if module not in rank:
            breaches.append(f"{path}: module {module} is not in the layers line")
            continue
        for header in local_includes(path):
            if header not in rank:
                breaches.append(f"{path}: includes {header}.h, not a core module")
            elif rank[header] > rank[module]:
                breaches.append(f"{path}: includes {header}.h, a module above it")
    for front_end in FRONT_ENDS:
        for path in sorted((root / front_end).glob("*.[ch]")):
            for header in local_includes(path):
                if header in rank and header not in FRONT_END_ALLOWED:
                    breaches.append(f"{path}: includes core's {header}.h; "
                                    f"front ends use only {sorted(FRONT_END_ALLOWED)}")
    for breach in breaches:
        print(breach)
    print(f"{len(layers)} layers, {len(breaches)} breaches")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
