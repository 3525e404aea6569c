"""``scan_checkpoints``: a loop that keeps its states every ``save_every_N`` steps only.

Theano 1.1.2's function of that name, with its signature: the steps are cut into chunks
of ``save_every_N``; an outer ``scan`` walks the chunks and an inner one the steps of a
chunk, returning only the chunk's last values. The outer loop stores one row per chunk,
so the gradient recomputes each chunk's steps from its first state (a backward loop per
chunk) instead of reading all ``n_steps`` stored rows: memory for ``n / N + N`` rows
instead of ``n``.
"""

from __future__ import annotations

from theano_dag import tensor as tt
from theano_dag.scan.basic import scan

__all__ = ["scan_checkpoints"]


class CheckpointTapsError(RuntimeError, ValueError):
    """``scan_checkpoints`` was given output taps other than ``[-1]``: Theano's
    RuntimeError, and a ValueError as theano_dag raised before."""


def _as_list(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def scan_checkpoints(
    fn,
    sequences=None,
    outputs_info=None,
    non_sequences=None,
    name="checkpointscan_fn",
    n_steps=None,
    save_every_N=10,
    padding=True,
):
    """``scan`` over chunks of ``save_every_N`` steps, returning ``(outputs, updates)``
    whose outputs hold each chunk's last step only (Theano's ``scan_checkpoints``).

    As in Theano: sequences all have ``n_steps`` rows (the first one's length when
    ``n_steps`` is None), outputs are fed back by their last step only (no taps), and
    ``padding`` pads the sequences with zero rows to whole chunks (with ``padding=False``,
    ``save_every_N`` must divide their length). The last chunk runs the steps left.

    >>> import numpy as np
    >>> import theano_dag.tensor as tt
    >>> v = tt.dvector("v")
    >>> sums, _ = scan_checkpoints(lambda x, acc: acc + x, sequences=v,
    ...                            outputs_info=tt.zeros((), "float64"), save_every_N=4)
    >>> sums.eval({v: np.arange(1.0, 11.0)})
    array([10., 36., 55.])
    """
    seqs = [tt.as_tensor_variable(s) for s in _as_list(sequences)]
    infos = outputs_info if isinstance(outputs_info, (list, tuple)) else [outputs_info]
    infos = list(infos)
    nonseqs = _as_list(non_sequences)
    for info in infos:
        if isinstance(info, dict) and ("taps" in info and list(info["taps"]) != [-1]):
            raise CheckpointTapsError(
                "scan_checkpoints: outputs are fed back by their last step only; "
                f"got taps {list(info['taps'])}"
            )
    every = int(save_every_N)
    if every < 1:
        raise ValueError(f"scan_checkpoints: save_every_N must be positive, got {save_every_N}")
    if n_steps is None:
        if not seqs:
            raise ValueError("scan_checkpoints: give sequences or n_steps")
        n_steps = seqs[0].shape[0]
    n_steps = tt.cast(tt.as_tensor_variable(n_steps), "int64")
    n_chunks = (n_steps + (every - 1)) // every
    # Steps per chunk: save_every_N, and what is left for the last.
    chunk_steps = tt.set_subtensor(
        tt.alloc(tt.constant(every, dtype="int64"), n_chunks)[-1],
        n_steps - (n_chunks - 1) * every,
    )
    chunks = []
    for s in seqs:
        if padding:
            pad = tt.zeros((n_chunks * every - n_steps, *[s.shape[d] for d in range(1, s.ndim)]),
                           dtype=s.dtype)  # fmt: skip
            s = tt.concatenate([s[:n_steps], pad], axis=0)
        shape = [n_chunks, every, *[s.shape[d] for d in range(1, s.ndim)]]
        chunks.append(s.reshape(shape, ndim=s.ndim + 1))
    n_seq = len(chunks)
    n_fed = sum(1 for info in infos if info is not None)

    def outer_step(*args):
        chunk_seqs, steps = list(args[:n_seq]), args[n_seq]
        prev = iter(args[n_seq + 1 : n_seq + 1 + n_fed])
        inner_infos = [None if info is None else next(prev) for info in infos]
        results, updates = scan(
            fn,
            sequences=chunk_seqs,
            outputs_info=inner_infos,
            non_sequences=list(args[n_seq + 1 + n_fed :]),
            n_steps=steps,
            name=f"{name}_inner",
            return_list=True,
        )
        return [r[-1] for r in results], updates

    return scan(
        outer_step,
        sequences=[*chunks, chunk_steps],
        outputs_info=infos,
        non_sequences=nonseqs,
        n_steps=n_chunks,
        name=f"{name}_outer",
    )
