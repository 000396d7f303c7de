"""Where the package finds the `gptc` tools and its runtime module.

A tool (gptc, gptc-opt) is looked for, in order:
  1. $GPTC_BUILD_DIR/bin, when that variable is set (a build of one's own);
  2. bin/ inside the package (where `pip install .` puts the tools);
  3. build/bin of the source checkout the package sits in, if it sits in one;
  4. PATH (an installed `gptc`).
The runtime module (gptc._runtime, built by python/CMakeLists.txt) lives in the package.
"""
from __future__ import annotations

import os
import shutil

from .errors import GptcError

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# The checkout holding python/gptc, when the package is imported from one.
REPO = os.path.dirname(os.path.dirname(PACKAGE_DIR))

PACKAGE_BIN = os.path.join(PACKAGE_DIR, "bin")
# None outside a source checkout (an installed package has no build/ above it).
SOURCE_BUILD_BIN = (os.path.join(REPO, "build", "bin")
                    if os.path.isfile(os.path.join(REPO, "CMakeLists.txt")) else None)


def tool_dirs() -> list:
    """The folders find_tool looks in before PATH, in order."""
    build_dir = os.environ.get("GPTC_BUILD_DIR")
    dirs = [os.path.join(build_dir, "bin") if build_dir else None, PACKAGE_BIN, SOURCE_BUILD_BIN]
    return [d for d in dirs if d]


def _is_program(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_tool(name: str = "gptc") -> str:
    """The path of gptc tool `name`: the first of tool_dirs() that has it, else PATH's."""
    for d in tool_dirs():
        if _is_program(os.path.join(d, name)):
            return os.path.join(d, name)
    found = shutil.which(name)
    if found:
        return found
    raise GptcError(f"cannot find the '{name}' tool: looked in {', '.join(tool_dirs())} and "
                    "on PATH; build the project (./test.sh), put gptc on PATH or set "
                    "GPTC_BUILD_DIR")


def load_runtime():
    """The runtime's pybind11 module, gptc._runtime; a GptcError if it is not built."""
    try:
        from . import _runtime
    except ImportError as e:
        raise GptcError(f"cannot load gptc's runtime module (gptc._runtime in {PACKAGE_DIR}): "
                        f"{e}; build the project (./test.sh)") from None
    return _runtime
