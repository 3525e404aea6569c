"""``function(..., profile=True)`` on the CPU engine: where the time and the memory went.

A short form of Theano's ``ProfileStats``: calls and time per node and per op
type, the memory plan (planned bytes against what an eager evaluation keeps),
the compile time split into optimize / plan / codegen / C compile, and under
``incremental=True`` how many nodes each call ran.
"""

from __future__ import annotations

__all__ = ["CPUProfile"]


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n}"


class CPUProfile:
    """Counters one compiled function fills while it is linked and called.

    ``node_time[k]``/``node_calls[k]`` belong to ``nodes[k]`` (run order);
    ``optimizer_time`` is filled by the function maker, the other compile times
    by the engine. ``summary()`` renders it all.

    >>> p = CPUProfile("f")
    >>> print(p.summary().splitlines()[0])
    Function profile: f (CPU engine)
    """

    def __init__(self, name=None):
        self.name = name
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

    def set_nodes(self, nodes):
        self.nodes = list(nodes)
        self.node_time = [0.0] * len(self.nodes)
        self.node_calls = [0] * len(self.nodes)

    def op_totals(self):
        """``{op type name: (time, calls, nodes)}`` summed over the nodes."""
        out: dict = {}
        for node, t, c in zip(self.nodes, self.node_time, self.node_calls):
            key = type(node.op).__name__
            tt, cc, nn = out.get(key, (0.0, 0, 0))
            out[key] = (tt + t, cc + c, nn + 1)
        return out

    def summary(self, n_nodes=15) -> str:
        """A readable report (a few tables of text)."""
        lines = [f"Function profile: {self.name or '<unnamed>'} (CPU engine)"]
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
        lines.append("  per op type:  time(s)   share  calls  nodes  op")
        for name, (t, c, n) in sorted(self.op_totals().items(), key=lambda kv: -kv[1][0]):
            lines.append(f"    {t:12.6f}  {100 * t / total:5.1f}%  {c:5d}  {n:5d}  {name}")
        lines.append(f"  per node (top {n_nodes}):  time(s)   share  calls  node")
        ranked = sorted(range(len(self.nodes)), key=lambda k: -self.node_time[k])
        for k in ranked[:n_nodes]:
            t = self.node_time[k]
            lines.append(
                f"    {t:12.6f}  {100 * t / total:5.1f}%  {self.node_calls[k]:5d}  "
                f"#{k} {self.nodes[k]}"
            )
        return "\n".join(lines)

    def __str__(self):
        return self.summary()
