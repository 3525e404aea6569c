"""The Dask engine's error of a failed task: named where it ran, and of the error's type.

A task that fails (an op's ``perform``, a chunk's kernel, one of dask.array's own
tasks) is reported as a :class:`DaskTaskError` naming the task's key and the op it
ran. The error raised is also an instance of the type the task raised (a failing
Cholesky's is a ``LinAlgError``, a failing ``Assert``'s an ``AssertionError``), so that
a program catching that type, as it does on the other engines, catches it here too.

A call that loses its cluster (``engines.dask.cluster``) runs locally with one
:class:`ClusterLostWarning`, or, where it cannot, raises :class:`DaskClusterError`
naming the cluster.
"""

from __future__ import annotations

__all__ = ["DaskTaskError", "task_error", "DaskClusterError", "ClusterLostWarning"]


class DaskTaskError(RuntimeError):
    """A task of a Dask engine call failed; the message names the task's key and the
    op it was running (or the input it was making), then the error itself. Made by
    :func:`task_error`, it is an instance of that error's type too."""

    # The type of the error the task raised (None: none, or none this class can be).
    error_type = None

    def __str__(self):
        # One message, as given: not the repr a KeyError's own __str__ would make.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()

    def __reduce__(self):
        # A class made by task_error has no importable name: a distributed worker's
        # error is pickled as the call that makes it again.
        return (task_error, (str(self), self.error_type))


# error type -> the DaskTaskError subclass that is one (None: no class can be)
_CLASSES: dict = {}


def _class_of(error_type):
    if error_type is None or issubclass(error_type, DaskTaskError):
        return DaskTaskError if error_type is None else error_type
    if error_type not in _CLASSES:
        try:
            cls = type("DaskTaskError", (DaskTaskError, error_type), {"error_type": error_type})
            cls.__module__, cls.__qualname__ = __name__, "DaskTaskError"
        except TypeError:  # a type that cannot be a base beside RuntimeError
            cls = None
        _CLASSES[error_type] = cls
    return _CLASSES[error_type] or DaskTaskError


def task_error(message: str, error_type=None) -> DaskTaskError:
    """A :class:`DaskTaskError` saying ``message`` that is also an ``error_type`` (the
    type of the error the task raised) where that type allows it.

    >>> err = task_error("Dask engine: task 'x' failed: ValueError: bad", ValueError)
    >>> isinstance(err, DaskTaskError), isinstance(err, ValueError), str(err)[-3:]
    (True, True, 'bad')
    """
    cls = _class_of(error_type)
    try:
        return cls(message)
    except Exception:  # noqa: BLE001 (a type whose constructor wants more: the plain error)
        return DaskTaskError(message)


class DaskClusterError(RuntimeError):
    """A Dask engine call could not run on its cluster and has nowhere else to go: the
    ``distributed.Client`` it was given is closed, or the cluster was lost during the
    call while the call's inputs live there (persisted dask arrays). The message names
    the cluster (its scheduler's address) and what happened."""


class ClusterLostWarning(RuntimeWarning):
    """A Dask engine call's cluster was lost (its scheduler gone, its client closed, or
    no workers left while the call waited), and the call ran on the local threaded
    scheduler instead: the same values, on this machine's cores and memory."""
