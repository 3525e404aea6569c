"""Planning, once per input-shape signature: what every value's shape is and where it lives.

:mod:`~theano_dag.engines.cpu.plan.shapes` infers each intermediate's concrete shape
from the input shapes; :mod:`~theano_dag.engines.cpu.plan.program` turns a linked graph
into steps and, per signature, into a plan (value placement, Owl's memory plan from
:mod:`theano_dag.engines.memory`, the generated code).
"""
