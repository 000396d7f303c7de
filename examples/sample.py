"""Sample text from a model the main job (examples/train.py) trained; the same as
`gptc sample` (python/gptc/apps/sample.py has the options: --help).

    python3 examples/sample.py out --prompt "The " --length 300 --seed 7
"""
import sys

from gptc.apps.sample import cli

if __name__ == "__main__":
    sys.exit(cli())
