"""The documentation tables that must agree with the code."""
import os
import re
import subprocess

import gptc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_op_coverage_table_matches_the_frontend():
    with open(os.path.join(REPO, "docs", "ops.md")) as f:
        documented = set(re.findall(r"`(aten\.[A-Za-z0-9_.]+)`", f.read()))
    converted = set(subprocess.run([gptc.find_tool("gptc"), "ops"], capture_output=True,
                                   text=True, check=True).stdout.split())
    assert converted, "gptc ops printed nothing"
    assert documented - converted == set(), "documented but not converted"
    assert converted - documented == set(), "converted but not documented"
