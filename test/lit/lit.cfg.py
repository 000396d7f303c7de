# lit configuration for gptc's FileCheck tests.
import os
import sys

import lit.formats

config.name = "gptc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.gptc_obj_root, "test", "lit")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in", "Inputs"]

# gptc tools first, then LLVM's FileCheck, not and count.
config.environment["PATH"] = os.pathsep.join(
    [config.gptc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
# The Python lit runs under (the build's), for RUN lines that generate input.
config.substitutions.append(("%python", sys.executable))
