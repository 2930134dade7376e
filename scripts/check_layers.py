#!/usr/bin/env python3
"""Fails, listing each offending #include, unless every C++ file includes
only from its own folder and the layers below it (docs/ARCHITECTURE.md).

    scripts/check_layers.py
"""
import pathlib
import re
import subprocess
import sys

# Each library and the libraries it builds on directly; what they build on
# is allowed too.
BUILDS_ON = {
    "support": [],
    "runtime": ["support"],
    "io": ["support"],
    "passes": ["io", "runtime"],
    "distributed": ["support"],
    "train": ["io", "runtime", "distributed"],
    "run": ["train", "passes"],
    "tune": ["run"],
}
# The folders on top, which may include anything.
TOP = {"tools", "python", "bench", "examples"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def below(library):
    seen, todo = set(), [library]
    while todo:
        for dep in BUILDS_ON[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def library_of_header(path):
    """The library a project header belongs to, or None for a folder outside the layers."""
    parts = path.split("/")
    if parts[0] == "hfta":  # include/hfta: io.h is the io library's, the rest the compiler's
        return "io" if parts[-1] == "io.h" else "passes"
    return parts[0]


def library_of_file(path):
    parts = path.parts
    if parts[0] == "include":
        return "io" if path.name == "io.h" else "passes"
    if parts[0] == "tests" and len(parts) > 2 and parts[1] in BUILDS_ON:
        return parts[1]
    return parts[0]


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-files", "*.cpp", "*.h", "*.cu", "*.def"], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split()
    problems = []
    for name in files:
        path = pathlib.PurePosixPath(name)
        library = library_of_file(path)
        if library not in BUILDS_ON:
            continue  # tools, bench, examples, tests' shared files, the fuzzer, the package test
        allowed = below(library) | {library}
        testing = path.parts[0] == "tests"
        for header in INCLUDE.findall((root / name).read_text()):
            if testing and header.startswith("tests/"):
                continue
            owner = library_of_header(header)
            if owner in BUILDS_ON and owner not in allowed:
                problems.append(f"{name}: includes {header} ({owner}), above {library}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} includes reach above their layer (docs/ARCHITECTURE.md)")
        return 1
    print("check_layers: every include stays in its layer or below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
