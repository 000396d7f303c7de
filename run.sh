#!/usr/bin/env bash
# The main job: set up, build, then train a character-level GPT with gptc on the
# embedded default corpus (Debian's fortunes), evaluate it, plot the loss curve into out/
# and print a sample from the compiled model. Arguments go to examples/train.py.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh >&2
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" exec python3 examples/train.py "$@"
