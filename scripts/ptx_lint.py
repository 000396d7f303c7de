#!/usr/bin/env python3
"""Checks that PTX keeps gptc's portable numerics (docs/numerics.md).

    ptx_lint.py KERNELS.ptx --reference NO_CONTRACTION.ptx

KERNELS.ptx is the code to check; NO_CONTRACTION.ptx is the same source compiled with
-fmad=false, where the only floating-point fmas are the ones the source wrote (gptc::fma,
__fmaf_rn). It fails, one line a problem and exit status 1, on:
  * an approximate or flush-to-zero instruction (`.approx`, `.ftz`): sin.approx, ex2.approx,
    rcp.approx, and the like give other bits than the CPU;
  * a tensor-core instruction (`mma`, `wgmma`): it sums in an order of its own;
  * more floating-point fmas in a function than the reference has: a contraction the compiler
    made of a multiply and an add (each rounding once instead of twice).
"""
import argparse
import re
import sys
from collections import Counter

FUNCTION = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")
FLOAT_FMA = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:fma|mad)\.[a-z.]*f(?:16|32|64)\b")
FORBIDDEN = [
    (re.compile(r"\.approx\b"), "an approximate instruction (.approx)"),
    (re.compile(r"\.ftz\b"), "a flush-to-zero instruction (.ftz)"),
    (re.compile(r"^\s*(?:@!?%p\d+\s+)?w?gmma\b|^\s*(?:@!?%p\d+\s+)?mma\b|\bwgmma\."),
     "a tensor-core instruction (mma)"),
]


def fma_counts(text):
    """Floating-point fmas per function."""
    counts, current = Counter(), "<module>"
    for line in text.splitlines():
        m = FUNCTION.match(line)
        if m:
            current = m.group(1)
        elif FLOAT_FMA.match(line):
            counts[current] += 1
    return counts


def lint(text, reference):
    problems = []
    current = "<module>"
    for number, line in enumerate(text.splitlines(), 1):
        m = FUNCTION.match(line)
        if m:
            current = m.group(1)
            continue
        code = line.split("//", 1)[0]
        for pattern, what in FORBIDDEN:
            if pattern.search(code):
                problems.append(f"line {number}: {what} in {current}: {code.strip()}")
    have, allowed = fma_counts(text), fma_counts(reference)
    for function in sorted(have):
        if have[function] > allowed.get(function, 0):
            problems.append(
                f"{function}: {have[function]} floating-point fmas, the source wrote "
                f"{allowed.get(function, 0)} (a contraction: build with -fmad=false)")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ptx")
    parser.add_argument("--reference", required=True,
                        help="the same source compiled with -fmad=false")
    args = parser.parse_args(argv)
    try:
        with open(args.ptx) as f:
            text = f.read()
        with open(args.reference) as f:
            reference = f.read()
    except OSError as e:
        print(f"ptx_lint: error: {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    problems = lint(text, reference)
    for p in problems:
        print(f"ptx_lint: {args.ptx}: {p}", file=sys.stderr)
    if not problems:
        print(f"ptx_lint: {args.ptx}: portable ({sum(fma_counts(text).values())} fmas, all "
              f"written by the source; no .approx, .ftz or mma)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
