import os
import sys

# Tests import the in-tree package (python/gptc) and use the in-tree build.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402

torch.set_num_threads(1)

# One compile cache for the whole test session, not the user's ~/.cache/gptc; removed
# when the session ends.
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

if "GPTC_CACHE_DIR" not in os.environ:
    os.environ["GPTC_CACHE_DIR"] = tempfile.mkdtemp(prefix="gptc-test-cache-")
    atexit.register(shutil.rmtree, os.environ["GPTC_CACHE_DIR"], True)
