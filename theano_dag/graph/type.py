"""``Type``: what values a Variable may hold (``theano.graph.type``)."""

from __future__ import annotations

from theano_dag.config import config
from theano_dag.graph.basic import Constant, Variable
from theano_dag.graph.utils import MetaObject, MethodNotDefined, add_tag_trace

__all__ = ["Type", "Generic", "generic"]


class Type(MetaObject):
    """The set of values a Variable can take, and how to check and compare them.

    Subclasses implement ``filter``; the rest has sensible defaults.
    """

    Variable = Variable
    Constant = Constant

    def filter(self, data, strict=False, allow_downcast=None):
        """Return ``data`` as a legal value of this type, or raise TypeError."""
        raise MethodNotDefined(f"{type(self).__name__}.filter is not implemented")

    def filter_inplace(self, value, storage, strict=False, allow_downcast=None):
        raise NotImplementedError()

    def filter_variable(self, other, allow_convert=True):
        """Return ``other`` as a Variable of this type (wrapping a value as a Constant).

        Raises TypeError naming both types when they are not compatible.
        """
        if not isinstance(other, Variable):
            other = self.Constant(self, other)
        if other.type != self and allow_convert:
            converted = self.convert_variable(other)
            if converted is not None:
                return converted
        if other.type != self:
            raise TypeError(
                f"Cannot convert Type {other.type} (of Variable {other}) into Type {self}. "
                f"You can try to manually convert {other} into a {self}."
            )
        return other

    def convert_variable(self, var):
        """Return ``var`` converted to this type when that is always safe, else None."""
        return None

    def is_valid_value(self, data) -> bool:
        """Return True if ``data`` is a legal value of this type as it is."""
        try:
            self.filter(data, strict=True)
            return True
        except (TypeError, ValueError):
            return False

    def value_validity_msg(self, data) -> str:
        return "none"

    def make_variable(self, name=None) -> Variable:
        """Return a new Variable of this type."""
        return self.Variable(self, None, None, name)

    def make_constant(self, value, name=None) -> Constant:
        return self.Constant(self, value, name)

    def __call__(self, name=None) -> Variable:
        """Shorthand for ``make_variable``: ``x = t('x')``; the variable keeps the user's
        stack (``tag.trace``), as a node's outputs do."""
        return add_tag_trace([self.make_variable(name)], config.traceback__limit, 1)[0]

    @classmethod
    def values_eq(cls, a, b) -> bool:
        """Return True if ``a`` and ``b`` are equal values of this type."""
        return a == b

    @classmethod
    def values_eq_approx(cls, a, b) -> bool:
        """Like ``values_eq`` but with a tolerance where the type has one."""
        return cls.values_eq(a, b)

    def may_share_memory(self, a, b) -> bool:
        return a is b


class Generic(Type):
    """A type that accepts any Python object.

    >>> g = Generic()
    >>> g.filter([1, 2]), g == Generic(), str(g)
    ([1, 2], True, 'Generic')
    """

    __props__ = ()

    def filter(self, data, strict=False, allow_downcast=None):
        return data

    def is_valid_value(self, data) -> bool:
        return True


generic = Generic()
