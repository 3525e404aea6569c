"""Run Theano 1.1.2 programs twice, with theano-pymc (in its own venv) and with theano_dag
(their imports changed by ``tools/theano_names.py``, as for Theano's tests), and compare what
they print.

    python tools/compare_theano_programs.py /path/to/theano-venv/bin/python [programs...]

Default programs: ``examples/theano_programs/*.py`` (a custom COp, a pickled predict function
loaded in a new process, a function under NanGuardMode). Exits 1 when an output differs.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile

from theano_names import rewrite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(python, path, env):
    proc = subprocess.run([python, path], capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        return f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"
    return proc.stdout.strip()


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    theano_python, programs = argv[0], argv[1:]
    programs = programs or sorted(
        glob.glob(os.path.join(ROOT, "examples", "theano_programs", "*.py"))
    )
    env_theano = dict(
        os.environ,
        THEANO_FLAGS="blas__ldflags=,base_compiledir=" + os.path.join(ROOT, "build", "theano"),
    )
    env_dag = dict(os.environ, PYTHONPATH=ROOT)
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in programs:
            changed = os.path.join(tmp, os.path.basename(path))
            with open(path) as src, open(changed, "w") as dst:
                dst.write(rewrite(src.read()))
            want = _run(theano_python, path, env_theano)
            got = _run(sys.executable, changed, env_dag)
            same = want == got
            differ += not same
            print(f"{'same' if same else 'DIFFERENT'}: {os.path.basename(path)}")
            if not same:
                print(f"  theano-pymc: {want}\n  theano_dag:  {got}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
