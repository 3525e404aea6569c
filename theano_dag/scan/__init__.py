"""Loops: ``scan`` and the loops written with it (``map``, ``reduce``, ``foldl``, ``foldr``).

What each module holds:

- :mod:`~theano_dag.scan.op`: the ``Scan`` op (its layout, ``perform``, ``infer_shape``);
- :mod:`~theano_dag.scan.basic`: ``scan``, which builds a Scan node from a step function,
  and ``until``;
- :mod:`~theano_dag.scan.grad`: the gradient (backpropagation through time);
- :mod:`~theano_dag.scan.views`: ``map``, ``reduce``, ``foldl``, ``foldr``;
- :mod:`~theano_dag.scan.checkpoints`: ``scan_checkpoints`` (a loop that stores its
  states every ``save_every_N`` steps and recomputes the others for the gradient);
- :mod:`~theano_dag.scan.rewriting`: rewrites of Scan nodes (loop-invariant hoisting,
  elementwise work on the sequences moved before the loop, unused inputs, merging,
  memory saving).

As in Theano, ``theano_dag.scan`` is the function once ``theano_dag`` is imported;
``from theano_dag.scan import until`` and ``theano_dag.scan_module.until`` import the rest.

>>> import numpy as np
>>> import theano_dag.tensor as tt
>>> k = tt.iscalar("k")
>>> a = tt.dvector("a")
>>> powers, _ = scan(lambda prev, a: prev * a, outputs_info=tt.ones_like(a),
...                  non_sequences=a, n_steps=k)
>>> powers[-1].eval({a: np.array([1.0, 2.0, 3.0]), k: 3})
array([ 1.,  8., 27.])
"""

from theano_dag.scan.basic import scan, until
from theano_dag.scan.checkpoints import scan_checkpoints
from theano_dag.scan.op import Scan
from theano_dag.scan.rewriting import (
    local_scan_hoist_invariants,
    local_scan_merge,
    local_scan_push_out_seq,
    local_scan_remove_unused_inputs,
    local_scan_save_memory,
)
from theano_dag.scan.views import foldl, foldr, map, reduce  # noqa: A004 (Theano's names)

__all__ = [
    "scan",
    "until",
    "Scan",
    "map",
    "reduce",
    "foldl",
    "foldr",
    "scan_checkpoints",
    "local_scan_hoist_invariants",
    "local_scan_push_out_seq",
    "local_scan_save_memory",
    "local_scan_remove_unused_inputs",
    "local_scan_merge",
]
