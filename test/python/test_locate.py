"""Where the package finds the `gptc` tool (python/gptc/locate.py): $GPTC_BUILD_DIR/bin,
the package's own bin/, the checkout's build/bin, then PATH; one line naming them all when
none has it."""
import os
import stat

import pytest
import torch

import gptc
import gptc.locate as locate
from conftest import REPO

REAL_TOOL = os.path.join(REPO, "build", "bin", "gptc")
PATH = os.environ.get("PATH", "")  # the host compiler gptc runs is found on it


def write_tool(folder, body="exit 0"):
    """An executable shell script named gptc in `folder`."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "gptc")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\n{body}\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def no_known_tool(tmp_path, monkeypatch):
    """No tool where the package looks: no GPTC_BUILD_DIR, an empty package bin/, no
    source build, and a PATH of one empty folder."""
    monkeypatch.delenv("GPTC_BUILD_DIR", raising=False)
    monkeypatch.setattr(locate, "PACKAGE_BIN", str(tmp_path / "package" / "bin"))
    monkeypatch.setattr(locate, "SOURCE_BUILD_BIN", None)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    return tmp_path


def test_the_tool_is_looked_for_in_order(no_known_tool, monkeypatch):
    tmp = no_known_tool
    on_path = write_tool(tmp / "path")
    assert gptc.find_tool("gptc") == on_path
    in_build = write_tool(tmp / "source" / "build" / "bin")
    monkeypatch.setattr(locate, "SOURCE_BUILD_BIN", os.path.dirname(in_build))
    assert gptc.find_tool("gptc") == in_build  # a source checkout's build before PATH
    in_package = write_tool(locate.PACKAGE_BIN)
    assert gptc.find_tool("gptc") == in_package  # the package's own before the checkout's
    own = write_tool(tmp / "own" / "bin")
    monkeypatch.setenv("GPTC_BUILD_DIR", str(tmp / "own"))
    assert gptc.find_tool("gptc") == own  # GPTC_BUILD_DIR first


def test_a_missing_tool_is_one_line_naming_where_it_looked(no_known_tool, monkeypatch):
    monkeypatch.setenv("GPTC_BUILD_DIR", str(no_known_tool / "own"))
    with pytest.raises(gptc.GptcError) as info:
        gptc.find_tool("gptc")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("cannot find the 'gptc' tool: looked in ")
    assert str(no_known_tool / "own" / "bin") in message
    assert locate.PACKAGE_BIN in message
    assert "on PATH" in message


def test_a_file_that_is_not_executable_is_not_the_tool(no_known_tool):
    os.makedirs(locate.PACKAGE_BIN)
    with open(os.path.join(locate.PACKAGE_BIN, "gptc"), "w") as f:
        f.write("not a program\n")
    on_path = write_tool(no_known_tool / "path")
    assert gptc.find_tool("gptc") == on_path


@pytest.mark.skipif(not os.access(REAL_TOOL, os.X_OK), reason="gptc is not built")
def test_compile_uses_a_gptc_found_on_path(no_known_tool, monkeypatch):
    """An installed gptc (here a script on PATH that logs its arguments and runs the
    build's) is what gptc.compile runs when no build is where the package looks."""
    monkeypatch.setenv("PATH", str(no_known_tool / "path") + os.pathsep + PATH)
    log = no_known_tool / "calls.log"
    write_tool(no_known_tool / "path", f'echo "$@" >> "{log}"\nexec "{REAL_TOOL}" "$@"')
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).eval()
    x = torch.randn(3, 8)
    compiled = gptc.compile(model, (x,))
    torch.testing.assert_close(compiled(x), model(x).detach())
    assert log.read_text().startswith("compile "), log.read_text()


def test_the_versions_agree():
    """gptc --version, the runtime's gptc_version, the package's __version__ and its
    metadata are one version: the project's (CMakeLists.txt)."""
    import re
    import subprocess
    import gptc
    from gptc.locate import load_runtime
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        project = re.search(r"project\(gptc VERSION (\S+)", f.read()).group(1)
    assert gptc.__version__ == project
    # The checkout's package metadata (the torch.compile backend's entry point) agrees.
    with open(os.path.join(REPO, "python", f"gptc-{project}.dist-info", "METADATA")) as f:
        assert f"Version: {project}\n" in f.read()
    assert load_runtime().version() == project
    out = subprocess.run([gptc.find_tool("gptc"), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and re.fullmatch(rf"gptc {re.escape(project)} \(LLVM \d+\.\S+\)\n",
                                                out.stdout), out.stdout
