"""What the op audits share (test_op_table for the tensor ops, tests/sparse/test_op_audit
for the sparse ones): every Op class a set of packages defines, and the check that each
has a table row or an exemption saying where it is tested instead."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from theano_dag.graph.op import Op


def op_classes(package_names):
    """Every Op class defined in a module of the packages ``package_names`` (their
    sub-modules included), by qualified name."""
    found = {}
    for pkg_name in package_names:
        pkg = importlib.import_module(pkg_name)
        modules = [pkg] + [
            importlib.import_module(m.name)
            for m in pkgutil.walk_packages(getattr(pkg, "__path__", []), pkg_name + ".")
        ]
        for mod in modules:
            for obj in vars(mod).values():
                if inspect.isclass(obj) and issubclass(obj, Op) and obj.__module__ == mod.__name__:
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def assert_every_class_covered(classes, covered, exempt, what):
    """Every class of ``classes`` (name -> class) is in ``covered`` or named in
    ``exempt``, and every exemption is of a class that still exists and has no row."""
    missing = sorted(n for n, c in classes.items() if c not in covered and n not in exempt)
    assert not missing, f"{len(missing)} {what} with no row and no exemption: {missing}"
    stale = sorted(n for n in exempt if n not in classes or classes[n] in covered)
    assert not stale, f"exemptions of classes that are gone or now have a row: {stale}"
