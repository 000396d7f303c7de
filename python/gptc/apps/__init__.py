"""What is built on the gptc library rather than part of it: the main job's corpus and
data pipeline (data.py, used by examples/train.py) and the parity report's command line
(parity.py, run by `gptc check --against-torch` as `python3 -m gptc.parity`)."""
