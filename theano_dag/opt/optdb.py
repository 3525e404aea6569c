"""The optimization database: what ``function`` runs between building and running a graph.

``build_optdb()`` makes a fresh database; ``optdb`` is the one ``Mode`` queries. Its
layout, the whole pipeline in one table (``PIPELINE``):

========  =======================  ========================================  ====================
position  name                     what                                      tags
========  =======================  ========================================  ====================
0         merge1                   merge identical computations, constants   fast_run fast_compile
0.6       useless                  remove nodes that compute nothing new     fast_run fast_compile
0.8       conv_fold                batch norm, bias, relu -> convolution     fast_run
1         canonicalize             identities, canonical products, constant  fast_run fast_compile
                                   folding, canonical argument order
1.2       merge1.2                 merge what canonicalize made identical    fast_run fast_compile
1.5       stabilize                stable forms (log1p, log_softmax, ...)    fast_run
1.7       blas                     dot plus accumulation -> Gemm/Gemv/Ger    fast_run
2         specialize               x**2 -> sqr, Adagrad fusion               fast_run
2.5       fma                      a*b + c -> fma                            fast_run
3         uncanonicalize           DimShuffles folded into Alloc, Reshape,   fast_run
                                   Subtensor
48        elemwise_fusion          elementwise trees -> Elemwise{Composite}  fast_run fusion
48.5      fused_reduce             reduce(elemwise) -> FusedReduce           fast_run fusion
49        merge2                   merge again                               fast_run merge
49.5      add_destroy_handler      attach the DestroyHandler (a marker)      fast_run inplace
50        insert_inplace           overwrite inputs nothing else needs       fast_run inplace
100       merge3                   last merge                                fast_run merge
110       cpu_row_tiling           CPU engine: batch rows a tile at a time   cpu row_tiling
120       opencl_device_placement  OpenCL engine: host/device transfers      opencl
                                                                             device_placement
========  =======================  ========================================  ====================

FAST_RUN queries ``fast_run`` (everything); FAST_COMPILE queries ``fast_compile``: the
merges, the useless-code pass and the light part of canonicalize (the rules tagged
``fast_compile``). Rewrites that insert inplace ops must sit at position 50 or more,
after ``add_destroy_handler``.

The engine lowering passes (``theano_dag.opt.lowering``, all also tagged ``lowering``)
come last, on the graph the engine will link, and carry no ``fast_run`` tag: a Mode
adds its engine's tag to its query (the linker's ``required_rewrites``: ``cpu`` for the
CPU engine, ``opencl`` for the OpenCL engine), so only that engine's Modes run them.
``Mode.excluding("row_tiling")`` leaves the tiling out.

>>> [o.name for o in optdb.query(OPT_FAST_RUN.including("cpu"))][-2:]
['merge3', 'cpu_row_tiling']
>>> [o.name for o in optdb.query(Query(include=["opencl"]))]
['opencl_device_placement']

``register_canonicalize``, ``register_stabilize``, ``register_specialize``,
``register_uncanonicalize`` and ``register_useless`` add a local rewrite to the global
optdb (or to ``db=`` another one).

Note: ``theano_dag.opt.optdb`` is the *database* (as ``theano.compile.optdb``); import
this module's functions with ``from theano_dag.opt.optdb import build_optdb``.
"""

from __future__ import annotations

from theano_dag.config import config
from theano_dag.graph.destroyhandler import DestroyHandler
from theano_dag.graph.rewriting.basic import GlobalOptimizer
from theano_dag.graph.rewriting.db import EquilibriumDB, LocalGroupDB, Query, SequenceDB, TopoDB
from theano_dag.graph.rewriting.merge import MergeOptimizer
from theano_dag.graph.rewriting.navigator import NavigatorOptimizer
from theano_dag.opt.lowering import (
    DASK_GATHER_TAGS,
    DASK_INLINE_TAGS,
    DASK_ROW_CHUNKS_TAGS,
    DEVICE_PLACEMENT_TAGS,
    ROW_TILING_TAGS,
    DaskGathering,
    DaskInlineElementwise,
    DaskRowChunks,
    DevicePlacement,
    RowTiling,
)
from theano_dag.opt.rewrites import RULES
from theano_dag.opt.rewrites.fusion import FusionOptimizer
from theano_dag.opt.rewrites.inplace import InplaceOptimizer

__all__ = [
    "AddDestroyHandler",
    "PIPELINE",
    "build_optdb",
    "optdb",
    "register_canonicalize",
    "register_stabilize",
    "register_specialize",
    "register_uncanonicalize",
    "register_useless",
    "OPT_FAST_RUN",
    "OPT_FAST_COMPILE",
    "OPT_NONE",
    "ROW_TILING_POSITION",
    "DEVICE_PLACEMENT_POSITION",
    "DASK_INLINE_POSITION",
    "DASK_GATHER_POSITION",
]


class AddDestroyHandler(GlobalOptimizer):
    """Attach a ``DestroyHandler``: after it, rewrites may insert inplace ops.

    Not attached from the start because it makes every later change more expensive to
    validate; optimizations before position 49.5 run as if no op overwrote anything.
    """

    def add_requirements(self, fgraph):
        if not hasattr(fgraph, "destroy_handler"):
            fgraph.attach_feature(DestroyHandler(algo=config.cycle_detection))

    def apply(self, fgraph):
        pass

    def __str__(self):
        return getattr(self, "name", None) or "AddDestroyHandler"


def _equilibrium(**kwargs):
    return EquilibriumDB(**kwargs)


def _topo(apply_all_opts=False, order="in_to_out"):
    return TopoDB(
        LocalGroupDB(apply_all_opts=apply_all_opts),
        order=order,
        failure_callback=NavigatorOptimizer.warn_inplace,
    )


# Engine lowering runs after the last merge (100): the engine's passes see the final
# graph, the one its linker will link. Tiling first: placement reads the tiled graph.
# Where stabilize sits: OPT_STABILIZE keeps the fast_run passes up to it.
STABILIZE_POSITION = 1.5
ROW_TILING_POSITION = 110
DEVICE_PLACEMENT_POSITION = 120
# Row chunks before the inline pass: values of the region are computed once per chunk.
DASK_ROW_CHUNKS_POSITION = 128
DASK_INLINE_POSITION = 129
DASK_GATHER_POSITION = 130

# position, name, factory of the optimizer or DB, tags
PIPELINE = (
    (0, "merge1", MergeOptimizer, ("fast_run", "fast_compile", "merge")),
    (0.6, "useless", lambda: _topo(apply_all_opts=True), ("fast_run", "fast_compile")),
    (0.8, "conv_fold", _equilibrium, ("fast_run",)),
    (1, "canonicalize", lambda: _equilibrium(ignore_newtrees=False), ("fast_run", "fast_compile")),
    (1.2, "merge1.2", MergeOptimizer, ("fast_run", "fast_compile", "merge")),
    # FAST_COMPILE runs the stabilize rules tagged fast_compile or fast_compile_gpu (the
    # softmax and cross-entropy forms), as Theano's FAST_COMPILE runs them in its
    # specialize DB, which it tags fast_compile_gpu: log(softmax(x)) is not -inf there.
    (STABILIZE_POSITION, "stabilize", _equilibrium, ("fast_run", "fast_compile_gpu")),
    # (also tagged with its Theano name, THEANO_PASS_NAMES)
    (1.7, "blas", _equilibrium, ("fast_run",)),
    (2, "specialize", _equilibrium, ("fast_run",)),
    (2.5, "fma", lambda: _topo(order="out_to_in"), ("fast_run",)),
    (3, "uncanonicalize", _equilibrium, ("fast_run",)),
    # Theano's name of the fusion pass, as a tag: Theano code excludes it by that name.
    (48, "elemwise_fusion", FusionOptimizer, ("fast_run", "fusion", "local_elemwise_fusion")),
    (48.5, "fused_reduce", _topo, ("fast_run", "fusion")),
    (49, "merge2", MergeOptimizer, ("fast_run", "merge")),
    # An ifelse computes only the branch taken: the nodes one branch alone needs move into
    # a graph of its own (theano_dag.ifelse), after the rewrites that see the whole graph.
    (49.2, "lazy_branches", _topo, ("fast_run", "fast_compile", "lazy_evaluation")),
    (49.5, "add_destroy_handler", AddDestroyHandler, ("fast_run", "inplace")),
    # Theano's names of its inplace passes (elementwise, BLAS, typed lists), as tags:
    # Theano code includes or excludes them by these names (here each one stands for the
    # whole pass: excluding one leaves out every inplace op; no value changes).
    (
        50,
        "insert_inplace",
        InplaceOptimizer,
        (
            "fast_run",
            "inplace",
            "inplace_elemwise_optimizer",
            "inplace_elemwise_opt",
            "inplace_opt",
            "InplaceBlasOpt",
            "blas_opt_inplace",
            "typed_list_inplace_opt",
        ),
    ),
    (100, "merge3", MergeOptimizer, ("fast_run", "merge")),
    (ROW_TILING_POSITION, "cpu_row_tiling", RowTiling, ROW_TILING_TAGS),
    (DEVICE_PLACEMENT_POSITION, "opencl_device_placement", DevicePlacement, DEVICE_PLACEMENT_TAGS),
    (DASK_ROW_CHUNKS_POSITION, "dask_row_chunks", DaskRowChunks, DASK_ROW_CHUNKS_TAGS),
    (DASK_INLINE_POSITION, "dask_inline_elementwise", DaskInlineElementwise, DASK_INLINE_TAGS),
    (DASK_GATHER_POSITION, "dask_gathering", DaskGathering, DASK_GATHER_TAGS),
)


# Theano's names of passes that hold rules, tags of the pass and of its rules: Theano code
# includes or excludes the pass by them, and ``Mode(optimizer=None).including("BlasOpt")``
# runs the pass's rules (in Theano the pass is named so, and its rules carry its name).
THEANO_PASS_NAMES = {"blas": ("BlasOpt",)}


def _local_db(optdb, name):
    """The DB of ``optdb`` that local rewrites named ``name`` go into."""
    db = optdb[name]
    return db.db if isinstance(db, TopoDB) else db


def build_optdb(rules=RULES) -> SequenceDB:
    """A fresh optimization database laid out as ``PIPELINE``, filled with ``rules``.

    >>> db = build_optdb()
    >>> [o.name for o in db.query(Query(include=["fast_compile"]))]
    ['merge1', 'useless', 'canonicalize', 'merge1.2', 'lazy_branches']
    """
    db = SequenceDB()
    for position, name, make, tags in PIPELINE:
        obj = make()
        aliases = THEANO_PASS_NAMES.get(name, ())
        db.register(name, obj, position, *tags, *aliases)
        if isinstance(obj, TopoDB):
            obj.db.name = name  # its rewrites answer to the pass's name as a tag
        if aliases:
            (obj.db if isinstance(obj, TopoDB) else obj).name_aliases = aliases
    # Merging after every change lets canonicalize see the shared subexpressions at once.
    db["canonicalize"].register("merge", MergeOptimizer(), "fast_run", "fast_compile", cleanup=True)
    # A stable form runs in other passes too (to meet the forms they make): it is tagged
    # stabilize wherever it runs, so that excluding("stabilize") leaves all of it out.
    stable = {id(rule.rewrite) for rule in rules if rule.db == "stabilize"}
    for rule in rules:
        target = _local_db(db, rule.db)
        tags = rule.tags
        if rule.db != "stabilize" and id(rule.rewrite) in stable and "stabilize" not in tags:
            tags += ("stabilize",)
        if rule.opt_in:  # neither fast_run nor the DB's name selects it
            target.register(rule.name, rule.rewrite, *tags, use_db_name_as_tag=False)
        else:
            target.register(rule.name, rule.rewrite, "fast_run", *tags, **rule.kwargs)
    return db


optdb = build_optdb()

OPT_FAST_RUN = Query(include=["fast_run"])
OPT_FAST_COMPILE = Query(include=["fast_compile", "fast_compile_gpu"])
OPT_MERGE = Query(include=["merge"])
# No rewrites but the engine's lowering passes, which a Mode adds (PyTensor's OPT_NONE).
OPT_NONE = Query(include=[])
# Passes before stabilize that only make the graph faster (they change no value's
# stability): the stabilize optimizer leaves them out with the later ones.
SPEED_ONLY_EARLY = ("conv_fold",)
# Everything up to and including stabilize: what a stable but unspecialized graph needs.
# The later fast_run passes are left out by name, not by a position cutoff, which would
# also cut off the engines' lowering passes that a Mode adds to the query.
OPT_STABILIZE = Query(
    include=["fast_run"],
    exclude=[
        name
        for position, name, _, tags in PIPELINE
        if (position > STABILIZE_POSITION or name in SPEED_ONLY_EARLY)
        and "fast_run" in tags
        and "lazy_evaluation" not in tags
    ],
)


def _register(db_name, lopt, tags, kwargs):
    if lopt is None or isinstance(lopt, str):  # used as @register_xxx("tag", ..., db=...)
        more = () if lopt is None else (lopt,)

        def decorator(inner):
            return _register(db_name, inner, (*more, *tags), kwargs)

        return decorator
    kwargs = dict(kwargs)
    name = kwargs.pop("name", None) or getattr(lopt, "__name__", None) or str(lopt)
    target_db = kwargs.pop("db", None) or optdb
    _local_db(target_db, db_name).register(name, lopt, "fast_run", *tags, **kwargs)
    if db_name == "useless":
        _local_db(target_db, "canonicalize").register(name, lopt, "fast_run", *tags, **kwargs)
    return lopt


def register_canonicalize(lopt=None, *tags, **kwargs):
    """Add ``lopt`` to canonicalize (tagged 'fast_run' and ``tags``); usable as a decorator.

    ``name=`` overrides the rewrite's name, ``db=`` targets another optdb than the global.

    >>> from theano_dag.opt import local_optimizer
    >>> db = build_optdb()
    >>> @register_canonicalize("fast_compile", db=db)
    ... @local_optimizer(None)
    ... def local_my_rule(fgraph, node):
    ...     return False
    >>> "local_my_rule" in db["canonicalize"]
    True
    """
    return _register("canonicalize", lopt, tags, kwargs)


def register_stabilize(lopt=None, *tags, **kwargs):
    """Add ``lopt`` to stabilize (see ``register_canonicalize``)."""
    return _register("stabilize", lopt, tags, kwargs)


def register_specialize(lopt=None, *tags, **kwargs):
    """Add ``lopt`` to specialize (see ``register_canonicalize``)."""
    return _register("specialize", lopt, tags, kwargs)


def register_uncanonicalize(lopt=None, *tags, **kwargs):
    """Add ``lopt`` to uncanonicalize, after specialize (see ``register_canonicalize``)."""
    return _register("uncanonicalize", lopt, tags, kwargs)


def register_useless(lopt=None, *tags, **kwargs):
    """Add ``lopt`` to the useless-code pass and to canonicalize (see
    ``register_canonicalize``)."""
    return _register("useless", lopt, tags, kwargs)
