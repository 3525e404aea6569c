"""Turn ``benchmarks/results/latest.jsonl`` into ``docs/performance.png`` and the tables
of ``docs/performance.md``.

The tables replace what lies between ``<!-- results:start -->`` and
``<!-- results:end -->`` in ``docs/performance.md``: where the figures come from (the
results file, the run's date, machine and commit), a summary with one line per workload
and case (theano_dag, the peers, the ratio its target is about, the target, met or not),
then every benchmark's figures. The targets are those of "The workloads and their
targets" in ``docs/performance.md``; change both together. The plot has one panel per
workload with a target: for each case, theano_dag's figure divided by each peer's (log
scale; below 1 means theano_dag is faster or smaller), with the target drawn as a red
mark.

Run: ``.venv/bin/python benchmarks/plot_results.py [--results PATH] [--doc PATH]
[--png PATH] [--no-plot]`` (matplotlib is the ``plot`` extra; without it the tables
are still written and the plot is skipped with a message).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
START, END = "<!-- results:start -->", "<!-- results:end -->"

# Per workload: the unit suffix of its figures, theano_dag's main figure, the peers
# compared with it (in plot order).
UNITS = {"us": "us", "ms": "ms", "s": "s", "mib": "MiB"}
NOT_ENGINES = ("_vs_", "target", "compile_s", "first_build_s", "kernels_ready", "one_vector")
WORKLOADS = {
    "call_overhead": {
        "title": "1. call overhead (length-10 vector)",
        "unit": "us",
        "ours": "theano_dag",
        "peers": ["numpy_eager", "pytensor_c", "jax_jit"],
    },
    "fused_elementwise": {
        "title": "2. fused elementwise (10^7 values)",
        "unit": "ms",
        "ours": "theano_dag_borrow",
        "peers": ["hand_c", "numpy_eager", "pytensor_c", "jax_jit"],
    },
    "mlp_training": {
        "title": "3. MLP training step",
        "unit": "ms",
        "ours": "theano_dag",
        "peers": ["jax_jit", "pytensor_numba", "numpy", "pytensor_c"],
    },
    "memory_peak": {
        "title": "4. peak memory of one call",
        "unit": "mib",
        "ours": "theano_dag",
        "peers": ["numpy_eager", "pytensor_c", "jax_jit"],
    },
    "first_result": {
        "title": "5. time to first result",
        "unit": "s",
        "ours": "theano_dag_cold",
        "peers": ["pytensor_best_cold", "jax"],
    },
    "compile_time": {
        "title": "6. optimization time (FAST_RUN rewrites)",
        "unit": "s",
        "ours": "theano_dag",
        "peers": ["pytensor"],
    },
}


def load(path):
    """(machine dict, data rows, run records) from a run_all.py jsonl file."""
    machine, rows, runs = {}, [], []
    with open(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            if "machine" in row and isinstance(row["machine"], dict):
                machine = row["machine"]
            elif "status" in row:
                runs.append(row)
            elif "error" in row and "benchmark" not in row and "workload" not in row:
                runs.append(row)
            else:
                rows.append(row)
    return machine, rows, runs


def case_name(row):
    case = str(row.get("case", ""))
    if "dtype" in row and row.get("benchmark") == "fused_elementwise":
        case = f"{row['dtype']}"
    return case


def engines(row, unit):
    """engine -> figure for every ``<engine>_<unit>`` field of a row."""
    out = {}
    suffix = f"_{unit}"
    for key, val in row.items():
        if key.endswith(suffix) and isinstance(val, (int, float)) and not isinstance(val, bool):
            if not any(bad in key for bad in NOT_ENGINES):
                out[key[: -len(suffix)]] = val
    return out


# The call's own target: ``x + 1`` costs at most this many times numpy eager's ``x + 1``.
CALL_VS_EAGER = 1.2
# The optimizer's target: PyTensor's FAST_RUN rewriting takes at least 10x as long.
COMPILE_VS_PYTENSOR = 0.1


def target(bench, row):
    """(text of the target, met: True/False/None) for one row of a workload with a target."""
    fig = engines(row, WORKLOADS[bench]["unit"])
    if bench == "call_overhead":
        absolute = 2.0 if row.get("case") == "x+1" else 3.0
        ours, scaled = fig.get("theano_dag"), row.get("target_us_scaled")
        text, checks = f"<= {absolute} us", []
        if ours is not None:
            checks.append(("absolute", ours <= absolute))
        if scaled is not None:
            # The absolute figures are for a 0.9 us numpy eager ``x + 1``; the script
            # also scales them by this machine's.
            text += f"; scaled to this machine: <= {scaled} us"
            if ours is not None:
                checks.append(("scaled", ours <= scaled))
        eager = fig.get("numpy_eager")
        if row.get("case") == "x+1":
            text += f"; <= {CALL_VS_EAGER}x numpy eager"
            if ours is not None and eager:
                checks.append(("vs eager", ours <= CALL_VS_EAGER * eager))
        if not checks:
            return text, None
        return text, ", ".join(f"{_fmt(ok)} ({what})" for what, ok in checks)
    if bench == "fused_elementwise":
        if "hand_c" not in fig or "theano_dag_borrow" not in fig:
            return "<= 1.25x hand-written C", None
        return "<= 1.25x hand-written C", fig["theano_dag_borrow"] <= 1.25 * fig["hand_c"]
    if bench == "mlp_training":
        if "jax_jit" not in fig or "theano_dag" not in fig:
            return "<= JAX jit", None
        return "<= JAX jit", fig["theano_dag"] <= fig["jax_jit"]
    if bench == "memory_peak":
        ours = fig.get("theano_dag")
        if row.get("case") == "chain50":
            floor = row.get("one_vector_mib")
            if ours is None or floor is None:
                return "one output vector", None
            # The floor is one output vector; allow 5% for allocator and interpreter noise.
            return f"<= one vector ({floor} MiB)", ours <= 1.05 * floor
        if ours is None or "jax_jit" not in fig:
            return "<= JAX jit", None
        return "<= JAX jit", ours <= fig["jax_jit"]
    if bench == "first_result":
        mets = []
        for temp in ("cold", "warm"):
            ours, best = fig.get(f"theano_dag_{temp}"), fig.get(f"pytensor_best_{temp}")
            if ours is not None and best is not None:
                mets.append(ours <= 0.1 * best)
        return "<= 0.1x PyTensor's best mode, cold and warm", (all(mets) if mets else None)
    if bench == "compile_time":
        text = f"<= {COMPILE_VS_PYTENSOR}x PyTensor's FAST_RUN"
        ours, theirs = fig.get("theano_dag"), fig.get("pytensor")
        if ours is None or theirs is None:
            return text, None
        return text, ours <= COMPILE_VS_PYTENSOR * theirs
    if "meets_target" in row:
        return str(row.get("target", "")), bool(row["meets_target"])
    return str(row.get("target", "")), None


def _fmt(v):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def _table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_fmt(c) for c in line) + " |" for line in lines]
    return "\n".join(out)


def summary_table(rows):
    lines = []
    for row in rows:
        bench = row.get("benchmark")
        if bench not in WORKLOADS:
            continue
        spec = WORKLOADS[bench]
        fig = engines(row, spec["unit"])
        ours = fig.get(spec["ours"])
        peers = (
            ", ".join(f"{p} {_fmt(fig[p])}" for p in spec["peers"] if p in fig) or "(none measured)"
        )
        first = next((p for p in spec["peers"] if p in fig), None)
        ratio = ours / fig[first] if ours is not None and first and fig[first] else None
        text, met = target(bench, row)
        lines.append(
            [
                bench,
                case_name(row),
                UNITS[spec["unit"]],
                f"{spec['ours']} {_fmt(ours)}",
                peers,
                f"{_fmt(ratio)} (vs {first})" if ratio is not None else "-",
                text,
                met,
            ]
        )
    header = ["workload", "case", "unit", "theano_dag", "peers", "ratio", "target", "met"]
    return _table(header, lines)


def detail_tables(rows):
    """One table per benchmark: every engine's figure per case, then its ratios."""
    parts = []
    by_bench = {}
    for row in rows:
        name = row.get("benchmark") or row.get("workload") and "opencl" or row.get("script")
        by_bench.setdefault(name, []).append(row)
    for bench, brows in by_bench.items():
        if bench in WORKLOADS:
            unit = WORKLOADS[bench]["unit"]
            cols = []
            for row in brows:
                cols += [e for e in engines(row, unit) if e not in cols]
            lines = [[case_name(r)] + [engines(r, unit).get(c) for c in cols] for r in brows]
            parts.append(f"#### {bench} ({UNITS[unit]})\n\n" + _table(["case", *cols], lines))
            ratio_keys = []
            for row in brows:
                ratio_keys += [k for k in row if "_vs_" in k and k not in ratio_keys]
            if ratio_keys:
                lines = [[case_name(r)] + [r.get(k) for k in ratio_keys] for r in brows]
                parts.append(_table(["case (ratios)", *ratio_keys], lines))
        elif bench == "opencl":
            lines = []
            for r in brows:
                if "median_s" not in r:
                    continue
                moved = r.get("bytes_moved_per_call")
                lines.append(
                    [r["workload"], r["engine"], r.get("transfer"), r["median_s"] * 1e3, moved]
                )
            notes = [r["note"] for r in brows if "note" in r]
            text = _table(["workload", "engine", "transfer", "ms", "bytes moved/call"], lines)
            parts.append("#### opencl\n\n" + text + "".join(f"\n\n{n}" for n in notes))
        elif bench == "graph_core":
            lines = [
                [r["op"], r["graph"], r["nodes"], r["gc"], r["median_s"], r["us_per_node"]]
                for r in brows
                if "op" in r
            ]
            scal = [r for r in brows if "scaling" in r]
            text = _table(["op", "graph", "nodes", "gc", "median s", "us/node"], lines)
            for r in scal:
                text += f"\n\nScaling (gc {r['gc']}): {r['scaling']}, worst {r['worst']}."
            parts.append("#### graph_core (CPU seconds)\n\n" + text)
    return "\n\n".join(parts)


def render(machine, rows, runs, png_name, source="benchmarks/results/latest.jsonl"):
    peers = ", ".join(f"{k} {v}" for k, v in (machine.get("peers") or {}).items() if v)
    out = [
        f"From `{source}`, written by `benchmarks/run_all.py` (`make bench`): measured "
        f"{machine.get('date', '?')} at commit {machine.get('git_commit', '?')} on "
        f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, Python "
        f"{machine.get('python', '?')}, numpy {machine.get('numpy', '?')}; peers: "
        f"{peers or 'none'}; compiler: {machine.get('cc') or 'none'}. The targets are those "
        "of the list above, applied by `benchmarks/plot_results.py`.",
        "",
        "### Summary",
        "",
        summary_table(rows),
        "",
        f"![theano_dag against its peers]({png_name})",
        "",
    ]
    failed = [r for r in runs if r.get("status") == "failed" or "error" in r]
    if failed:
        out += ["### Scripts that failed", ""]
        out += [f"- `{r['script']}`: {r['error']}" for r in failed if "error" in r] + [""]
    out += ["### All figures", "", detail_tables(rows), ""]
    return "\n".join(out)


def update_doc(doc, text):
    src = doc.read_text()
    if START not in src or END not in src:
        raise SystemExit(f"{doc}: expected the markers {START} and {END} around the results")
    head, rest = src.split(START, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(f"{head}{START}\n{text}\n{END}{tail}")


def plot(rows, png):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        print("matplotlib is not installed (pip install '.[plot]'): no plot", file=sys.stderr)
        return False
    panels = []
    for bench, spec in WORKLOADS.items():
        brows = [r for r in rows if r.get("benchmark") == bench]
        if any(spec["ours"] in engines(r, spec["unit"]) for r in brows):
            panels.append((bench, spec, brows))
    if not panels:
        print("no results of the workloads with a target: no plot", file=sys.stderr)
        return False
    ncols = 2
    nrows = (len(panels) + 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(12, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, (bench, spec, brows) in zip(axes.flat, panels):
        unit = spec["unit"]
        peers = [p for p in spec["peers"] if any(p in engines(r, unit) for r in brows)]
        n_peers = len(peers)
        width = 0.8 / max(1, n_peers)

        def offset(j, width=width, n=n_peers):
            return (j - (n - 1) / 2) * width

        for j, peer in enumerate(peers):
            xs, ys = [], []
            for i, row in enumerate(brows):
                fig_row = engines(row, spec["unit"])
                if spec["ours"] in fig_row and fig_row.get(peer):
                    xs.append(i + offset(j))
                    ys.append(fig_row[spec["ours"]] / fig_row[peer])
            # Bars grow from 1 (parity): up when theano_dag is slower, down when faster.
            ax.bar(xs, [y - 1 for y in ys], width, bottom=1, label=f"vs {peer}")
            for x, y in zip(xs, ys):
                ax.annotate(f"{y:.2g}", (x, y), ha="center", va="bottom" if y >= 1 else "top",
                            fontsize=7)  # fmt: skip
        for i, row in enumerate(brows):
            goal = _target_ratio(bench, row)
            # The target is a ratio to the panel's first peer: mark it over that bar.
            first = spec["peers"][0]
            if goal is not None and peers and peers[0] == first and first in engines(row, unit):
                x0 = i + offset(0)
                ax.plot([x0 - width / 2, x0 + width / 2], [goal, goal], color="red", lw=2.5)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_yscale("log")
        plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(_minor_label))
        ax.tick_params(axis="y", which="both", labelsize=7)
        ax.set_xticks(range(len(brows)), [case_name(r)[:24] for r in brows], fontsize=8)
        ax.set_title(spec["title"], fontsize=10)
        ax.set_ylabel(f"{spec['ours']} / peer", fontsize=8)
        ax.legend(fontsize=7)
    fig.suptitle("theano_dag / peer (log scale; < 1: theano_dag faster or smaller; red: target)")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return True


def _minor_label(value, _pos):
    """Label the minor ticks 2 and 5 of each decade only, so that the labels stay legible."""
    text = f"{value:g}"
    return text if text.strip("0.")[:1] in ("2", "5") else ""


def _target_ratio(bench, row):
    """The target as a ratio to the first peer of the panel, where it is one."""
    if bench == "fused_elementwise":
        return 1.25
    if bench in ("mlp_training",):
        return 1.0
    if bench == "memory_peak":
        if row.get("case") == "chain50":
            floor, eager = row.get("one_vector_mib"), row.get("numpy_eager_mib")
            return floor / eager if floor and eager else None
        return None  # the MLP target is against JAX, not the panel's first peer
    if bench == "first_result":
        return 0.1
    if bench == "compile_time":
        return COMPILE_VS_PYTENSOR
    if bench == "call_overhead" and row.get("target_us_scaled") and row.get("numpy_eager_us"):
        scaled = row["target_us_scaled"] / row["numpy_eager_us"]
        # x + 1 has two targets against eager numpy: draw the tighter one.
        return min(scaled, CALL_VS_EAGER) if row.get("case") == "x+1" else scaled
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=HERE / "results" / "latest.jsonl")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md")
    ap.add_argument("--png", type=Path, default=ROOT / "docs" / "performance.png")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    if not args.results.exists():
        raise SystemExit(f"{args.results} not found: run benchmarks/run_all.py first")
    machine, rows, runs = load(args.results)
    if not args.no_plot:
        plot(rows, args.png)
    try:
        source = args.results.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        source = args.results.name
    update_doc(args.doc, render(machine, rows, runs, args.png.name, source))
    print(f"wrote {args.doc}" + ("" if args.no_plot else f" and {args.png}"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
