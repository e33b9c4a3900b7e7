#!/usr/bin/env python3
"""Checks the SASS of the four-CTA attention kernels for dropped or serialised wgmma groups.

ptxas (CUDA 13.0) once compiled a window half's four wgmma of the four-CTA computed-window kernel
(`computed / 4 / wgmma`, attention_fwd_kernel.cuh with kValuesInC2P) to nothing. It left a
placeholder `HGMMA.64x8x16 ... RZ, gdesc[URZ]` where the group had been, and stored the other
half's results twice (kernels/attention/HISTORY.md, v9.7). Only the GPU tests saw the wrong outputs.
That kernel waits for each wgmma group right after committing it, so ptxas has no other reason to
emit a placeholder there. This check reads the test binary's sm_90a SASS without a GPU and fails
on any placeholder in those kernels. (The three-CTA kernel issues both window halves in one group
and legitimately ends it with a placeholder wait; it is not checked.)

It also fails when ptxas serialised those kernels' wgmma (warnings C7511 / C7512: "wgmma
serialization", which a build does not fail on). Each of their wgmma groups is four k-steps
(d = 64) waited for once, so a kernel has four HGMMA per `WARPGROUP.DEPBAR`; serialised, ptxas waits
after every HGMMA (64 DEPBAR for 64 HGMMA against 16), and no wgmma overlaps other work. It struck
several experiments' builds (HISTORY.md v9.6, v9.10, v9.11) without failing them.

Exit status: 0 pass, 1 fail, 2 usage error, 77 skipped (no cuobjdump, or no sm_90a image in the
binary: CTest's SKIP_RETURN_CODE).
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

SKIP = 77
# DisentangledAttentionKernel<Traits<64, Element, wgmma, no 3xTF32 split>, computed windows, 4 CTAs
# per SM, one key group, ...>: the four-CTA kernels, saturation-free or not, BF16 and FP16.
FOUR_CTA_KERNEL = re.compile(r"DisentangledAttentionKernel.*Lb1ELb0EEELb1ELi4ELi1ELb[01]E")
PLACEHOLDER = re.compile(r"HGMMA\.64x8x16\b")
HGMMA = re.compile(r"\bHGMMA\.")
DEPBAR = re.compile(r"\bWARPGROUP\.DEPBAR\b")
# HGMMA per wait in the four-CTA kernels: four k-steps of 16 at d = 64, one group per wait.
K_STEPS_PER_GROUP = 4


def find_cuobjdump(explicit):
    """The first cuobjdump found: --cuobjdump, $DFLASH_CUOBJDUMP, PATH, the CUDA toolkit, or the
    nvidia-cuda-cuobjdump wheel in the deploy tools' venv (scripts/install-deps.sh)."""
    candidates = [explicit, os.environ.get("DFLASH_CUOBJDUMP"), shutil.which("cuobjdump"),
                  "/usr/local/cuda/bin/cuobjdump"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    candidates += sorted(glob.glob(os.path.join(
        root, ".venv-deploy", "lib", "python3*", "site-packages", "nvidia", "cu*", "bin",
        "cuobjdump")))
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def functions(sass):
    """Yields (mangled name, body lines) for each function of cuobjdump -sass output."""
    name, body = None, []
    for line in sass.splitlines():
        match = re.search(r"Function : (\S+)", line)
        if match:
            if name is not None:
                yield name, body
            name, body = match.group(1), []
        elif name is not None:
            body.append(line)
    if name is not None:
        yield name, body


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True,
                        help="executable or library holding the attention kernels' sm_90a image")
    parser.add_argument("--cuobjdump", help="cuobjdump to use (default: searched, see above)")
    args = parser.parse_args()
    if not os.path.isfile(args.binary):
        print(f"wgmma_sass_check: no such file: {args.binary}", file=sys.stderr)
        return 2
    cuobjdump = find_cuobjdump(args.cuobjdump)
    if cuobjdump is None:
        print("SKIPPED: no cuobjdump (CUDA toolkit, or `pip install nvidia-cuda-cuobjdump`; "
              "scripts/install-deps.sh puts it in .venv-deploy)")
        return SKIP
    result = subprocess.run([cuobjdump, "-sass", args.binary], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0 and "nvdisasm" in result.stderr:
        print(f"SKIPPED: {cuobjdump} found no nvdisasm to disassemble with (`pip install "
              "nvidia-cuda-nvdisasm`, beside it): " + result.stderr.strip())
        return SKIP
    if result.returncode != 0:
        print(f"wgmma_sass_check: {cuobjdump} -sass failed ({result.returncode}): "
              f"{result.stderr.strip()}", file=sys.stderr)
        return 1
    checked = 0
    failures = []
    for name, body in functions(result.stdout):
        if not FOUR_CTA_KERNEL.search(name):
            continue
        checked += 1
        hgmma = sum(1 for line in body if HGMMA.search(line))
        waits = sum(1 for line in body if DEPBAR.search(line))
        placeholders = [line.strip() for line in body if PLACEHOLDER.search(line)]
        print(f"{name[:110]}...: {hgmma} HGMMA, {waits} WARPGROUP.DEPBAR, "
              f"{len(placeholders)} placeholder groups")
        if hgmma == 0:
            failures.append(f"{name}: no HGMMA at all")
        for line in placeholders:
            failures.append(f"{name}: placeholder group (a dropped wgmma group): {line}")
        if waits * K_STEPS_PER_GROUP > hgmma:
            failures.append(f"{name}: wgmma serialised by ptxas (C7511 / C7512): {waits} "
                            f"WARPGROUP.DEPBAR for {hgmma} HGMMA, at most one per "
                            f"{K_STEPS_PER_GROUP} expected")
    if checked == 0:
        print("SKIPPED: no four-CTA warpgroup kernel in the binary (built without sm_90a)")
        return SKIP
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"{checked} four-CTA kernels checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
