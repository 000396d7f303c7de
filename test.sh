#!/usr/bin/env bash
# Every test: set up and build, then the C++ unit tests and lit tests (ctest), then the
# Python end-to-end tests (pytest). Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
ctest --test-dir build --output-on-failure -j2
# pytest-xdist: one worker per core, at most 4 (each test compiles and runs its own artifact
# in its own folder; the workers share one compile cache, whose entries are written whole).
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest test/python -q -rs \
  -n auto --maxprocesses 4 "$@"
