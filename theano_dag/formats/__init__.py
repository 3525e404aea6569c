"""Graph formats: plain-dict dags (dag, tuple-dag, index-dag, unidag), FunctionGraphs, the
OpGraph, and Theano's and PyTensor's FunctionGraphs.

The dict formats and their conversions live in :mod:`~theano_dag.formats.dicts`
and :mod:`~theano_dag.formats.chain`, networkx/DOT output in
:mod:`~theano_dag.formats.export`, FunctionGraph <-> tuple-dag in
:mod:`~theano_dag.formats.fgraph`, the OpGraph and its operations in
:mod:`~theano_dag.formats.opgraph`, ONNX in :mod:`~theano_dag.formats.onnx`, Theano and PyTensor in
:mod:`~theano_dag.formats.theano_interop` and :mod:`~theano_dag.formats.pytensor_interop`;
:mod:`~theano_dag.formats.decompose` writes our compound scalar ops in elementary ones for
the formats that lack them.
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
from theano_dag.formats.dask_graph import dask_to_dag, function_to_dag
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
from theano_dag.formats.fgraph import fgraph_to_tuple_dag, tuple_dag_to_fgraph
from theano_dag.formats.foreign import NoCounterpartError
from theano_dag.formats.onnx import OnnxExportError, from_onnx, to_onnx
from theano_dag.formats.opgraph import (
    BasicOps,
    OpGraph,
    UnsupportedOperationError,
    fgraph_to_opgraph,
    opgraph_to_fgraph,
    rewrite_for,
)
from theano_dag.formats.pytensor_interop import from_pytensor, to_pytensor
from theano_dag.formats.theano_interop import from_theano, to_theano

__all__ = [
    "OnnxExportError",
    "from_onnx",
    "to_onnx",
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
    "dask_to_dag",
    "function_to_dag",
    "dag_to_index_dag",
    "dag_to_unidag",
    "fgraph_to_opgraph",
    "fgraph_to_tuple_dag",
    "from_pytensor",
    "from_theano",
    "detect_format",
    "graph_inputs",
    "graph_outputs",
    "index",
    "index_dag_to_dag",
    "index_dag_to_tuple_dag",
    "interpret",
    "opgraph_to_fgraph",
    "register_conversion",
    "NoCounterpartError",
    "to_dot",
    "to_networkx",
    "to_pytensor",
    "to_theano",
    "toposort",
    "tuple_dag_to_fgraph",
    "tuple_dag_to_index_dag",
    "unidag_to_dag",
    "validate",
]
