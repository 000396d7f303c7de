#!/usr/bin/env bash
# Every test: set up and build, then the C++ unit tests and lit tests (ctest), then the
# Python end-to-end tests (pytest). Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
ctest --test-dir build --output-on-failure -j2
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest test/python -q -rs "$@"
