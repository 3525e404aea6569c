"""``map``, ``reduce``, ``foldl`` and ``foldr``: Theano's loops written with ``scan``."""

from __future__ import annotations

from theano_dag.scan.basic import scan

__all__ = ["map", "reduce", "foldl", "foldr"]


def map(  # noqa: A001 (Theano's name)
    fn,
    sequences,
    non_sequences=None,
    truncate_gradient=-1,
    go_backwards=False,
    mode=None,
    name=None,
):
    """``fn`` applied to each step of ``sequences``: ``scan`` without feedback.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> squares, _ = map(lambda v: v * v, x)
    >>> squares.eval({x: np.array([1.0, 2.0, 3.0])})
    array([1., 4., 9.])
    """
    return scan(
        fn,
        sequences=sequences,
        outputs_info=None,
        non_sequences=non_sequences,
        truncate_gradient=truncate_gradient,
        go_backwards=go_backwards,
        mode=mode,
        name=name,
    )


def reduce(  # noqa: A001 (Theano's name)
    fn, sequences, outputs_info, non_sequences=None, go_backwards=False, mode=None, name=None
):
    """The last step of ``scan``: ``fn(step, accumulated)`` folded over ``sequences``.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> total, _ = reduce(lambda v, acc: acc + v, x, np.float64(0.0))
    >>> total.eval({x: np.array([1.0, 2.0, 3.0])})
    array(6.)
    """
    outs, updates = scan(
        fn,
        sequences=sequences,
        outputs_info=outputs_info,
        non_sequences=non_sequences,
        go_backwards=go_backwards,
        mode=mode,
        name=name,
        return_list=True,
    )
    last = [o[-1] for o in outs]
    if len(last) == 1 and not isinstance(outputs_info, (list, tuple)):
        return last[0], updates
    return last, updates


def foldl(fn, sequences, outputs_info, non_sequences=None, mode=None, name=None):
    """``reduce`` from the first step to the last.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> r, _ = foldl(lambda v, acc: acc * 10 + v, x, np.float64(0.0))
    >>> r.eval({x: np.array([1.0, 2.0, 3.0])})
    array(123.)
    """
    return reduce(
        fn, sequences, outputs_info, non_sequences, go_backwards=False, mode=mode, name=name
    )


def foldr(fn, sequences, outputs_info, non_sequences=None, mode=None, name=None):
    """``reduce`` from the last step to the first.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> r, _ = foldr(lambda v, acc: acc * 10 + v, x, np.float64(0.0))
    >>> r.eval({x: np.array([1.0, 2.0, 3.0])})
    array(321.)
    """
    return reduce(
        fn, sequences, outputs_info, non_sequences, go_backwards=True, mode=mode, name=name
    )
