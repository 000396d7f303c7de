#!/usr/bin/env bash
# The main job: set up, build, then capture the test GPT, compile it with gptc and run
# its forward pass beside PyTorch's.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh >&2
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" exec python3 examples/forward.py "$@"
