"""Theano's ``theano.misc.pkl_utils``: ``dump`` and ``load`` a pickled object whose numpy
arrays go beside the pickle, each in its own ``.npy`` member of a zip file, so that the
file also opens with ``numpy.load`` (the value of a shared variable ``W`` is ``"W"``);
``StripPickler`` pickles graphs without the notes their tags hold (the stack traces).

>>> import io, numpy as np
>>> from theano_dag.compile.sharedvalue import shared
>>> w = shared(np.arange(3.0), name="W")
>>> buf = io.BytesIO()
>>> dump((w, np.ones(2)), buf)
>>> sorted(np.load(io.BytesIO(buf.getvalue())).keys())
['W', 'array_0', 'pkl']
>>> w2, ones = load(io.BytesIO(buf.getvalue()))
>>> w2.get_value(), ones
(array([0., 1., 2.]), array([1., 1.]))
"""

from __future__ import annotations

import copy
import io
import pickle
import zipfile

import numpy as np

from theano_dag.graph.shared import SharedVariable
from theano_dag.graph.utils import Scratchpad

__all__ = ["StripPickler", "dump", "load"]


class _ArraysToZip:
    """The persistent ids of ``dump``: each ndarray is written to the zip as ``<name>.npy``
    and pickled as its member's name (a shared variable's name, else ``array_<n>``)."""

    def __init__(self, zip_file: zipfile.ZipFile):
        self.zip_file = zip_file
        self.written = {}  # id(array) -> member name: an array met twice is written once
        self.names_of = {}  # id(array) -> the name of the shared variable holding it
        self.used = set()
        self.count = 0
        self.keep = []  # the arrays seen: their ids must stay theirs until the dump ends

    def _unique(self, name: str) -> str:
        if name not in self.used:
            return name
        n = 2
        while f"{name}_{n}" in self.used:
            n += 1
        return f"{name}_{n}"

    def __call__(self, obj):
        if isinstance(obj, SharedVariable) and obj.name:
            value = obj.get_value(borrow=True)
            self.names_of.setdefault(id(value), obj.name)
            return None
        if type(obj) is not np.ndarray or obj.dtype.hasobject:
            return None
        if id(obj) in self.written:
            return self.written[id(obj)]
        name = self.names_of.get(id(obj))
        if name is None:
            name = f"array_{self.count}"
            self.count += 1
        name = self._unique(name)
        self.used.add(name)
        buf = io.BytesIO()
        np.lib.format.write_array(buf, obj, allow_pickle=False)
        self.zip_file.writestr(f"{name}.npy", buf.getvalue())
        self.written[id(obj)] = name
        self.keep.append(obj)
        return name


def dump(obj, file_handler, protocol=pickle.DEFAULT_PROTOCOL, persistent_id=None):
    """Write ``obj`` to ``file_handler`` (a binary file) as a zip: its numpy arrays as
    ``.npy`` members, then the pickle of the rest as the member ``pkl``. ``persistent_id``:
    another policy, a callable taking the open ``ZipFile`` and returning a pickler's
    ``persistent_id``."""
    with zipfile.ZipFile(file_handler, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        ids = (persistent_id or _ArraysToZip)(zf)
        buf = io.BytesIO()
        pickler = pickle.Pickler(buf, protocol=protocol)
        pickler.persistent_id = ids
        pickler.dump(obj)
        zf.writestr("pkl", buf.getvalue())


def load(f, persistent_load=None):
    """Read what ``dump`` wrote to ``f`` (a binary file). ``persistent_load``: another
    policy, a callable taking the open ``ZipFile`` and returning the unpickler's
    ``persistent_load``."""
    with zipfile.ZipFile(f, "r") as zf:

        def read_array(name):
            return np.lib.format.read_array(io.BytesIO(zf.read(f"{name}.npy")))

        unpickler = pickle.Unpickler(io.BytesIO(zf.read("pkl")))
        unpickler.persistent_load = (persistent_load or (lambda z: read_array))(zf)
        return unpickler.load()


class StripPickler(pickle.Pickler):
    """A pickler that leaves out of every variable's ``tag`` the stack ``trace`` (and the
    tag attributes named in ``extra_tag_to_remove``): smaller pickles, which do not change
    with the code that built the graph.

    >>> import io
    >>> import theano_dag.tensor as tt
    >>> m = tt.dmatrix("m")
    >>> m.tag.trace = ["built here"]
    >>> buf = io.BytesIO()
    >>> StripPickler(buf, protocol=-1).dump(m)
    >>> hasattr(pickle.loads(buf.getvalue()).tag, "trace"), hasattr(m.tag, "trace")
    (False, True)
    """

    def __init__(self, file, protocol=0, extra_tag_to_remove=None):
        super().__init__(file, protocol)
        self._protocol = pickle.HIGHEST_PROTOCOL if protocol is None or protocol < 0 else protocol
        self.tag_to_remove = ("trace", *(extra_tag_to_remove or ()))

    def reducer_override(self, obj):
        if not isinstance(obj, Scratchpad) or not any(
            name in obj.__dict__ for name in self.tag_to_remove
        ):
            return NotImplemented
        stripped = copy.copy(obj)  # the graph being pickled keeps its tags
        for name in self.tag_to_remove:
            stripped.__dict__.pop(name, None)
        return stripped.__reduce_ex__(self._protocol)
