"""``python -m theano_dag.compat install-theano-alias`` / ``uninstall-theano-alias``
(``--site-dir DIR``: another site-packages than this environment's)."""

from __future__ import annotations

import argparse
import sys

from theano_dag.compat.install import (
    RealTheanoError,
    install_theano_alias,
    uninstall_theano_alias,
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m theano_dag.compat",
        description="Make `import theano` give theano_dag in this Python environment.",
    )
    parser.add_argument("command", choices=("install-theano-alias", "uninstall-theano-alias"))
    parser.add_argument("--site-dir", help="the site-packages directory (default: this one's)")
    args = parser.parse_args(argv)
    if args.command == "install-theano-alias":
        try:
            path = install_theano_alias(args.site_dir)
        except RealTheanoError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"installed the theano alias: {path}")
        return 0
    path = uninstall_theano_alias(args.site_dir)
    print(f"removed {path}" if path else "the theano alias was not installed here")
    return 0


if __name__ == "__main__":
    sys.exit(main())
