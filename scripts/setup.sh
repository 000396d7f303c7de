#!/usr/bin/env bash
# Installs everything gptc needs on a fresh Debian 12 machine and builds it.
# Idempotent: each step is skipped when already done. Used by run.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(cmake ninja-build g++ libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
              pybind11-dev nlohmann-json3-dev libgtest-dev
              ccache        # pip install . reuses build/'s compiles (CMakeLists.txt)
              libsimde-dev  # tests: the AVX-512 forms emulated on CPUs without AVX-512
              clang-14 libclang-rt-14-dev  # tests: libFuzzer targets of the runtime's readers
              pkg-config    # tests: a program built against the installed runtime
              libxxhash0    # tests: the compile cache's sums, computed independently
              fortunes-min fortunes   # fortunes: the main job's default English corpus
              # the main job's --corpus multilingual: eleven more languages
              fortunes-de fortunes-es fortunes-it fortunes-br fortunes-pl fortunes-cs
              fortunes-eo fortunes-ga fortunes-ru fortunes-bg fortunes-zh)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
want = [l.split("==") for l in open("requirements.txt") if "==" in l and not l.startswith("#")]
sys.exit(any(m.version(n.strip()) != v.strip() for n, v in want))
PY
then
  echo "setup: installing Python packages from requirements.txt"
  "$PYTHON" -m pip install -q --disable-pip-version-check -r requirements.txt
fi

if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DPython3_EXECUTABLE="$(command -v "$PYTHON")" >/dev/null
fi
cmake --build build -j2
