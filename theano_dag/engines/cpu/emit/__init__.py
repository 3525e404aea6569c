"""Code emission: what the CPU engine writes for a graph, in Python and in C.

:mod:`~theano_dag.engines.cpu.emit.impls` holds the per-Op-class registry of emitters
and the :class:`~theano_dag.engines.cpu.emit.impls.Step` they produce (the elementwise
and fallback ones); :mod:`~theano_dag.engines.cpu.emit.emitters` the emitters of the
other ops (views, reductions, BLAS, copies, shapes);
:mod:`~theano_dag.engines.cpu.emit.codegen` the straight-line Python source of one plan;
:mod:`~theano_dag.engines.cpu.emit.csource` the C source of the fused elementwise
kernels (templates filled per node around the fixed C of
:mod:`theano_dag.engines.cpu.native`).
"""
