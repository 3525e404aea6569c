"""Installing and removing the ``theano`` import alias (``compat.alias``) in a Python
environment: one ``.pth`` file in its site-packages, which loads the alias's finder at
start-up (``python -m theano_dag.compat install-theano-alias``; ``uninstall-theano-alias``
removes it).
"""

from __future__ import annotations

import os
import sysconfig

from theano_dag.compat.alias import real_theano_spec

PTH_NAME = "theano_dag_theano_alias.pth"

# The .pth line: site runs lines that start with "import". It finds theano_dag without
# importing it (so that a Python start-up does not pay for theano_dag), loads the alias's
# finder from its file and installs it; it does nothing where theano_dag is gone.
PTH_LINE = (
    "import importlib.util as u, os, sys; s = u.find_spec('theano_dag'); "
    "f = s and os.path.join(s.submodule_search_locations[0], 'compat', 'alias.py'); "
    "a = f and os.path.isfile(f) and u.spec_from_file_location('_theano_dag_alias', f); "
    "m = a and u.module_from_spec(a); a and a.loader.exec_module(m); "
    "m and sys.modules.setdefault('_theano_dag_alias', m).install()\n"
)


class RealTheanoError(RuntimeError):
    """A real Theano is importable where the alias would be installed."""


def default_site_dir() -> str:
    """The current environment's site-packages (its ``purelib`` directory)."""
    return sysconfig.get_paths()["purelib"]


def install_theano_alias(site_dir: str | None = None) -> str:
    """Write the alias's ``.pth`` file into ``site_dir`` (default: this environment's
    site-packages) and return its path. Refuses (``RealTheanoError``) where a real
    ``theano`` is importable: the alias would hide it."""
    real = real_theano_spec()
    if real is not None:
        where = (real.submodule_search_locations or [real.origin])[0]
        raise RealTheanoError(
            f"a real Theano is importable here ({where}): the theano alias of theano_dag "
            f"would hide it. Uninstall Theano (pip uninstall theano theano-pymc) or use "
            f"another environment, then install the alias."
        )
    path = os.path.join(site_dir or default_site_dir(), PTH_NAME)
    with open(path, "w") as f:
        f.write(PTH_LINE)
    return path


def uninstall_theano_alias(site_dir: str | None = None) -> str | None:
    """Remove the alias's ``.pth`` file from ``site_dir``; its path, or None if absent."""
    path = os.path.join(site_dir or default_site_dir(), PTH_NAME)
    if not os.path.exists(path):
        return None
    os.remove(path)
    return path
