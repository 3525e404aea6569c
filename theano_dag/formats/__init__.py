"""Graph formats: plain-dict dags (dag, tuple-dag, index-dag, unidag) and the OpGraph.

The dict formats and their conversions live in :mod:`~theano_dag.formats.dicts`
and :mod:`~theano_dag.formats.chain`, networkx/DOT output in
:mod:`~theano_dag.formats.export`, the OpGraph and its operations in
:mod:`~theano_dag.formats.opgraph`.
"""

from theano_dag.formats.chain import (
    FORMATS,
    convert,
    detect_format,
    graph_inputs,
    graph_outputs,
    interpret,
    register_conversion,
    toposort,
    validate,
)
from theano_dag.formats.dicts import (
    CycleError,
    GraphFormatError,
    IndexOutOfRangeError,
    dag_jobs,
    dag_to_index_dag,
    dag_to_unidag,
    index,
    index_dag_to_dag,
    index_dag_to_tuple_dag,
    tuple_dag_to_index_dag,
    unidag_to_dag,
)
from theano_dag.formats.export import to_dot, to_networkx
from theano_dag.formats.opgraph import BasicOps, OpGraph, UnsupportedOperationError, rewrite_for

__all__ = [
    "FORMATS",
    "BasicOps",
    "OpGraph",
    "UnsupportedOperationError",
    "rewrite_for",
    "CycleError",
    "GraphFormatError",
    "IndexOutOfRangeError",
    "convert",
    "dag_jobs",
    "dag_to_index_dag",
    "dag_to_unidag",
    "detect_format",
    "graph_inputs",
    "graph_outputs",
    "index",
    "index_dag_to_dag",
    "index_dag_to_tuple_dag",
    "interpret",
    "register_conversion",
    "to_dot",
    "to_networkx",
    "toposort",
    "tuple_dag_to_index_dag",
    "unidag_to_dag",
    "validate",
]
