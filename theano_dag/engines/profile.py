"""``ProfileStats``: where one compiled function's time and memory went, on any engine.

Theano's ``theano.compile.profiling.ProfileStats`` in a short form: calls and time
per node, summed per op class and per op, the compile time (optimize, link, and the
CPU engine's plan / codegen / C compile), the memory plan when the engine has one.
Every engine fills the same object: the reference engine (``linker="py"``) times each
node's thunk, the CPU engine its generated code's steps, the OpenCL engine each node
(waiting for the device's queue). ``summary()`` prints it (to stderr unless given a
``file``, as in Theano) and ``str(profile)`` is its text.
"""

from __future__ import annotations

import sys

__all__ = ["ProfileStats"]


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n}"


class ProfileStats:
    """Counters one compiled function fills while it is linked and called.

    ``node_time[k]``/``node_calls[k]`` belong to ``nodes[k]`` (run order);
    ``optimizer_time`` is filled by the function maker, the other compile times
    by the engine. ``summary()`` prints it all, ``str()`` gives the text.

    >>> import numpy as np
    >>> import theano_dag
    >>> import theano_dag.tensor as tt
    >>> x = tt.dvector("x")
    >>> f = theano_dag.function([x], tt.exp(x).sum(), mode="FAST_COMPILE", profile=True)
    >>> _ = f(np.ones(3)); _ = f(np.ones(3))
    >>> isinstance(f.profile, ProfileStats), f.profile.calls
    (True, 2)
    >>> f.profile.summary(file=sys.stdout)
    Function profile: <unnamed> (reference engine)
      calls: 2, ...
    """

    engine = "engine"

    def __init__(
        self,
        atexit_print=True,
        flag_time_thunks=None,
        gpu_checks=True,
        *,
        name=None,
        engine=None,
        **kwargs,
    ):
        # Theano's signature: ``atexit_print`` (print the summary at exit when
        # config.profile is set), ``flag_time_thunks`` and ``gpu_checks`` (its GPU
        # back-end's timing; every engine here times its nodes, so both are kept and
        # unused), ``message`` (the name shown), other keywords set as attributes.
        self.atexit_print = bool(atexit_print)
        self.flag_time_thunks = flag_time_thunks
        self.gpu_checks = gpu_checks
        self.name = name if name is not None else kwargs.pop("message", None)
        if engine is not None:
            self.engine = engine
        self.nodes: list = []
        self.node_time: list = []
        self.node_calls: list = []
        self.calls = 0
        self.call_time = 0.0
        self.optimizer_time = 0.0
        self.link_time = 0.0
        self.plan_time = 0.0
        self.codegen_time = 0.0
        self.c_compile_time = 0.0
        self.n_plans = 0
        self.memory = None
        self.n_unplanned = 0
        self.own_bytes = 0
        self.nodes_run_last = None
        self.nodes_run_total = 0
        for key, value in kwargs.items():
            setattr(self, key, value)

    # Theano's names of the counters (ProfileStats.fct_callcount...), which its clients
    # read (PyMC3's Model.profile).
    @property
    def fct_callcount(self) -> int:
        """Theano's name of ``calls``."""
        return self.calls

    @property
    def fct_call_time(self) -> float:
        """Theano's name of ``call_time``: seconds spent in the calls."""
        return self.call_time

    @property
    def linker_time(self) -> float:
        """Theano's name of ``link_time``."""
        return self.link_time

    def set_nodes(self, nodes):
        self.nodes = list(nodes)
        self.node_time = [0.0] * len(self.nodes)
        self.node_calls = [0] * len(self.nodes)

    def _totals(self, key) -> dict:
        out: dict = {}
        for node, t, c in zip(self.nodes, self.node_time, self.node_calls):
            k = key(node)
            tt, cc, nn = out.get(k, (0.0, 0, 0))
            out[k] = (tt + t, cc + c, nn + 1)
        return out

    def op_totals(self):
        """``{op class name: (time, calls, nodes)}`` summed over the nodes (Theano's
        "Class" table)."""
        return self._totals(lambda node: type(node.op).__name__)

    def op_instance_totals(self):
        """``{str(op): (time, calls, nodes)}`` (Theano's "Ops" table: one row per
        distinct op, so ``Elemwise{exp}`` and ``Elemwise{add}`` apart)."""
        return self._totals(lambda node: str(node.op))

    def summary(self, file=None, n_ops_to_print=20, n_apply_to_print=20) -> None:
        """Print the report to ``file`` (default: ``sys.stderr``), as Theano's
        ``ProfileStats.summary`` does: the ``n_ops_to_print`` slowest ops of each op
        table and the ``n_apply_to_print`` slowest nodes. ``str(profile)`` is the text."""
        text = self.text(n_ops_to_print=n_ops_to_print, n_apply_to_print=n_apply_to_print)
        print(text, file=sys.stderr if file is None else file)

    def text(self, n_ops_to_print=20, n_apply_to_print=20) -> str:
        """The report (a few tables of text) that :meth:`summary` prints."""
        lines = [f"Function profile: {self.name or '<unnamed>'} ({self.engine})"]
        per = self.call_time / self.calls * 1e6 if self.calls else 0.0
        lines.append(
            f"  calls: {self.calls}, time in calls: {self.call_time:.6f} s "
            f"({per:.1f} us per call)"
        )
        lines.append(
            "  compile time: optimize {:.4f} s, link {:.4f} s, plan {:.4f} s ({} plan{}), "
            "codegen {:.4f} s, C compile {:.4f} s".format(
                self.optimizer_time,
                self.link_time,
                self.plan_time,
                self.n_plans,
                "" if self.n_plans == 1 else "s",
                self.codegen_time,
                self.c_compile_time,
            )
        )
        if self.memory is not None:
            m = self.memory
            lines.append(
                f"  memory: {m.n_blocks} block{'s' * (m.n_blocks != 1)}, "
                f"{_fmt_bytes(m.planned_bytes)} planned for {len(m.assignment)} values "
                f"({len(m.inplace)} in place); eager (keep-all) {_fmt_bytes(m.eager_peak_bytes)}, "
                f"live peak {_fmt_bytes(m.live_peak_bytes)}; {self.n_unplanned} values "
                f"allocated by numpy, {_fmt_bytes(self.own_bytes)} in own buffers"
            )
        if self.nodes_run_last is not None:
            lines.append(
                f"  incremental: last call ran {self.nodes_run_last} of "
                f"{len(self.nodes)} nodes; {self.nodes_run_total} node runs in all"
            )
        total = sum(self.node_time) or 1.0
        for title, table in (
            ("per op type", self.op_totals()),
            ("per op", self.op_instance_totals()),
        ):
            lines.append(f"  {title}:  time(s)   share  calls  nodes  op")
            ranked_ops = sorted(table.items(), key=lambda kv: -kv[1][0])
            for name, (t, c, n) in ranked_ops[:n_ops_to_print]:
                lines.append(f"    {t:12.6f}  {100 * t / total:5.1f}%  {c:5d}  {n:5d}  {name}")
        lines.append(f"  per node (top {n_apply_to_print}):  time(s)   share  calls  node")
        ranked = sorted(range(len(self.nodes)), key=lambda k: -self.node_time[k])
        for k in ranked[:n_apply_to_print]:
            t = self.node_time[k]
            lines.append(
                f"    {t:12.6f}  {100 * t / total:5.1f}%  {self.node_calls[k]:5d}  "
                f"#{k} {self.nodes[k]}"
            )
        return "\n".join(lines)

    def __str__(self):
        return self.text()
