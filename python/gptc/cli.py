"""The `gptc` and `gptc-opt` commands of a pip-installed package (pyproject.toml's scripts).

pip puts these wrappers on PATH; each replaces itself with the compiled tool installed in the
package (gptc/bin), so the command line, exit code and output are the tool's own.
"""
from __future__ import annotations

import os
import sys

from .locate import PACKAGE_BIN


def _exec(name: str) -> None:
    tool = os.path.join(PACKAGE_BIN, name)
    if not os.access(tool, os.X_OK):
        sys.exit(f"{name}: error: the package has no {tool}; reinstall gptc (pip install .)")
    os.execv(tool, [tool] + sys.argv[1:])


def main() -> None:
    _exec("gptc")


def main_opt() -> None:
    _exec("gptc-opt")
