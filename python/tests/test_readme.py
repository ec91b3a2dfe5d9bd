"""python/README.md's walkthrough runs: its python blocks, in order, in one namespace, from a directory
that sees the repository's simulator/ (the measured CSV) and keeps the saved plot out of the source
tree. Blocks starting with '# GPU machine' are left to test_gpu.py's machine; a block needing pandas or
matplotlib where they are missing is skipped, and the test says so."""
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir)
OPTIONAL = {"pandas", "matplotlib"}


def blocks():
    text = open(os.path.join(ROOT, "python", "README.md")).read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_snippets_run(tmp_path, monkeypatch):
    os.symlink(os.path.join(ROOT, "simulator"), tmp_path / "simulator")
    monkeypatch.chdir(tmp_path)
    found = blocks()
    assert len(found) >= 10
    namespace, skipped = {}, []
    for n, code in enumerate(found):
        if code.startswith("# GPU machine"):
            continue
        try:
            exec(compile(code, f"README block {n}", "exec"), namespace)
        except ImportError as e:
            if e.name not in OPTIONAL and not any(m in str(e) for m in OPTIONAL):
                raise
            skipped.append(f"block {n}: {e}")
    if skipped:
        pytest.skip("README blocks needing optional packages not run: " + "; ".join(skipped))
    assert (tmp_path / "walkthrough.png").stat().st_size > 1000
