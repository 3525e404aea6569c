"""Build the wheel and the sdist, install each into a fresh venv, and smoke-test it there.

``make dist-check`` (a step of ``make test``) runs this. What it checks is what a user who
installs the package gets, not the checkout: ``import theano_dag`` imports no scipy, the
bundled data and C sources are installed, and the README's example and the "Sixty seconds"
example of docs/index.md run. Usage: ``python tools/check_dist.py [--keep]``; needs the
``build`` package (the ``test`` extra) and network access for numpy (or a pip cache).
"""

from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

# Run inside the fresh venv, from a folder outside the checkout.
SMOKE = """
import pathlib, sys
import theano_dag
where = pathlib.Path(theano_dag.__file__).resolve()
assert {root!r} not in str(where), f"imported the checkout, not the install: {{where}}"
scipy = sorted(m for m in sys.modules if m == "scipy" or m.startswith("scipy."))
assert not scipy, f"import theano_dag imported scipy: {{scipy[:3]}}"
from theano_dag.datasets import load_digits
assert load_digits()[0].shape == (1348, 64)
native = where.parent / "engines" / "cpu" / "native"
assert sorted(p.name for p in native.glob("*.c")) == {c_files!r}, sorted(native.glob("*.c"))
for name, code in {examples!r}:
    exec(compile(code, name, "exec"), {{"__name__": "smoke"}})
print("smoke test passed:", where.parent)
"""


def examples():
    """The README's python blocks and the "Sixty seconds" block of docs/index.md."""
    out = [(f"README.md[{k}]", b) for k, b in enumerate(BLOCK.findall(read("README.md")))]
    index = read("docs/index.md")
    section = index.split("## Sixty seconds", 1)[1].split("\n## ", 1)[0]
    out += [("docs/index.md[sixty seconds]", b) for b in BLOCK.findall(section)]
    assert len(out) >= 2, "no example found to run"
    return out


def read(rel):
    return (ROOT / rel).read_text()


def run(*cmd, cwd=None):
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, cwd=cwd)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args(argv)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="theano_dag-dist-"))
    try:
        run(sys.executable, "-m", "build", "--outdir", tmp / "dist", ROOT)
        c_files = sorted(p.name for p in (ROOT / "theano_dag/engines/cpu/native").glob("*.c"))
        smoke = tmp / "smoke.py"
        smoke.write_text(SMOKE.format(root=str(ROOT), c_files=c_files, examples=examples()))
        for pattern in ("*.whl", "*.tar.gz"):
            (artifact,) = (tmp / "dist").glob(pattern)
            venv = tmp / ("venv-" + pattern.strip("*."))
            run(sys.executable, "-m", "venv", venv)
            run(venv / "bin/python", "-m", "pip", "install", "-q", artifact)
            run(venv / "bin/python", smoke, cwd=tmp)
    finally:
        if args.keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
