#!/usr/bin/env python3
"""Compares the SASS of two builds function by function, without a GPU.

A change meant to be neutral for the kernels (a refactor, a comment, a file split) needs no
re-timing when every function's SASS is unchanged (kernels/attention/DESIGN.md, "Verifying a
change"). This script records, per function of every ELF image of a binary, the instructions with
their encoding and control words as `cuobjdump -sass` prints them (addresses dropped), and the
resource usage `cuobjdump -res-usage` reports (registers, stack, shared, local memory); then it
compares two such records.

Usage:
  compare_sass.py dump BINARY OUT.json      record BINARY's SASS and resource usage
  compare_sass.py diff OLD.json NEW.json    compare two records
  compare_sass.py compare OLD_BINARY NEW_BINARY

A typical neutral change:
  python3 scripts/compare_sass.py dump build/bin/disentangled_attention_test /tmp/base.json
  (edit, rebuild)
  python3 scripts/compare_sass.py dump build/bin/disentangled_attention_test /tmp/new.json
  python3 scripts/compare_sass.py diff /tmp/base.json /tmp/new.json

Functions are keyed by architecture and mangled name; a function present in several images (the
same template instantiated in two compile units) is recorded once per image, so a duplicate shows
as a difference.

cuobjdump: --cuobjdump, $DFLASH_CUOBJDUMP, PATH, /usr/local/cuda/bin, or the nvidia-cuda-cuobjdump
wheel (with its nvdisasm) that scripts/install-deps.sh installs into the deploy tools' venv:
$DFLASH_DEPLOY_VENV, else .venv-deploy at the repository root.

Exit status: 0 identical (dump: recorded), 1 functions differ, 2 usage error or no cuobjdump.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCH = re.compile(r"^\s*arch = (\S+)")
SASS_FUNCTION = re.compile(r"^\s*Function : (\S+)")
# "/*0120*/  IMAD R2, R3, R4, RZ ;  /* 0x... */": the address is dropped, the rest kept.
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*(/\* 0x[0-9a-f]+ \*/)?\s*$")
# The second encoding word of an instruction (control bits: stalls, barriers, reuse).
CONTROL = re.compile(r"^\s*(/\* 0x[0-9a-f]+ \*/)\s*$")
RES_FUNCTION = re.compile(r"^\s*Function (\S+):\s*$")


def venv_candidates():
    venvs = [os.environ.get("DFLASH_DEPLOY_VENV"), os.path.join(ROOT, ".venv-deploy")]
    found = []
    for venv in venvs:
        if venv:
            found += sorted(glob.glob(os.path.join(
                venv, "lib", "python3*", "site-packages", "nvidia", "cu*", "bin", "cuobjdump")))
    return found


def find_cuobjdump(explicit):
    """The first executable cuobjdump among the places the docstring lists, or None."""
    candidates = [explicit, os.environ.get("DFLASH_CUOBJDUMP"), shutil.which("cuobjdump"),
                  "/usr/local/cuda/bin/cuobjdump"] + venv_candidates()
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def run_cuobjdump(cuobjdump, option, binary):
    # cuobjdump -sass runs nvdisasm, found on PATH: the wheel ships it beside cuobjdump.
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(cuobjdump) + os.pathsep + env.get("PATH", "")
    return subprocess.run([cuobjdump, option, binary], env=env, check=True, capture_output=True,
                          text=True).stdout


def parse_sass(text):
    """{"arch:name": [body, ...]}: one body (list of normalised lines) per image holding it."""
    functions = {}
    arch = None
    body = None
    for line in text.splitlines():
        match = ARCH.match(line)
        if match:
            arch, body = match.group(1), None
            continue
        match = SASS_FUNCTION.match(line)
        if match:
            body = []
            functions.setdefault(f"{arch}:{match.group(1)}", []).append(body)
            continue
        if body is None:
            continue
        match = INSTRUCTION.match(line)
        if match and match.group(1):
            body.append(f"{match.group(1)} {match.group(2) or ''}".rstrip())
            continue
        match = CONTROL.match(line)
        if match:
            body.append(match.group(1))
    return functions


def parse_resources(text):
    """{"arch:name": ["REG:.. STACK:.. SHARED:.. LOCAL:.. ...", ...]}, one entry per image."""
    resources = {}
    arch = None
    function = None
    for line in text.splitlines():
        match = ARCH.match(line)
        if match:
            arch, function = match.group(1), None
            continue
        match = RES_FUNCTION.match(line)
        if match:
            function = f"{arch}:{match.group(1)}"
            continue
        if function is not None and "REG:" in line:
            resources.setdefault(function, []).append(line.strip())
            function = None
    return resources


def dump(cuobjdump, binary):
    return {
        "binary": binary,
        "sass": parse_sass(run_cuobjdump(cuobjdump, "-sass", binary)),
        "res": parse_resources(run_cuobjdump(cuobjdump, "-res-usage", binary)),
    }


def first_difference(old, new):
    """A line describing where two lists of bodies first differ."""
    if len(old) != len(new):
        return f"in {len(old)} image(s) before, {len(new)} now"
    for image, (a, b) in enumerate(zip(old, new)):
        if isinstance(a, str):
            if a != b:
                return f"{a} -> {b}"
            continue
        for index, (line_a, line_b) in enumerate(zip(a, b)):
            if line_a != line_b:
                return f"image {image}, line {index}: {line_a!r} -> {line_b!r}"
        if len(a) != len(b):
            return f"image {image}: {len(a)} lines before, {len(b)} now"
    return "?"


def compare(old, new):
    """Prints the comparison of two records; True when every function is identical."""
    identical = True
    for key, what in (("sass", "SASS"), ("res", "resource usage")):
        names_old, names_new = set(old[key]), set(new[key])
        for name in sorted(names_old - names_new):
            print(f"{what}: only before: {name}")
        for name in sorted(names_new - names_old):
            print(f"{what}: only now: {name}")
        common = sorted(names_old & names_new)
        differ = [name for name in common if old[key][name] != new[key][name]]
        for name in differ:
            print(f"{what} differs: {name}\n  {first_difference(old[key][name], new[key][name])}")
        print(f"{what}: {len(common)} functions compared, {len(differ)} differ, "
              f"{len(names_old - names_new)} only before, {len(names_new - names_old)} only now")
        identical = identical and not differ and names_old == names_new
    print("IDENTICAL" if identical else "DIFFERENT")
    return identical


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuobjdump", help="cuobjdump to use (default: searched, see above)")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("dump", help="record a binary's SASS and resource usage")
    command.add_argument("binary")
    command.add_argument("out", help="JSON record to write")
    command = commands.add_parser("diff", help="compare two records")
    command.add_argument("old")
    command.add_argument("new")
    command = commands.add_parser("compare", help="compare two binaries")
    command.add_argument("old")
    command.add_argument("new")
    args = parser.parse_args()

    if args.command == "diff":
        with open(args.old) as old, open(args.new) as new:
            return 0 if compare(json.load(old), json.load(new)) else 1
    binaries = [args.binary] if args.command == "dump" else [args.old, args.new]
    for binary in binaries:
        if not os.path.isfile(binary):
            print(f"compare_sass: no such file: {binary}", file=sys.stderr)
            return 2
    cuobjdump = find_cuobjdump(args.cuobjdump)
    if cuobjdump is None:
        print("compare_sass: no cuobjdump (see --help)", file=sys.stderr)
        return 2
    if args.command == "dump":
        record = dump(cuobjdump, args.binary)
        with open(args.out, "w") as out:
            json.dump(record, out)
        print(f"compare_sass: {len(record['sass'])} functions of {args.binary} in {args.out}")
        return 0
    return 0 if compare(dump(cuobjdump, args.old), dump(cuobjdump, args.new)) else 1


if __name__ == "__main__":
    sys.exit(main())
