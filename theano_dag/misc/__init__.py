"""``theano.misc``'s path for the helpers Theano code imports from it (``safe_asarray``)."""

from theano_dag.misc import safe_asarray  # noqa: F401

__all__ = ["safe_asarray"]
