"""``seabattle bench --plot FILE``: a sweep over ``--matches`` as a picture, for people who would
rather look than read. Two panels against the number of matches: the shot round trip (p50 and
p99) and the server's CPU per shot, one line per mode, the baseline's dashed beside it.

matplotlib is the optional ``[plot]`` extra: it is imported only when a picture is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

__all__ = ["plot_report"]


def plot_report(report: dict[str, Any], path: Path) -> None:
    """Draw ``report``'s scenarios into ``path`` (the format from its suffix: .png, .svg, .pdf)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display: a file is all that is asked for
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter, ScalarFormatter
    except ImportError:
        raise click.ClickException(
            "--plot needs matplotlib: pip install 'seabattle[plot]'"
        ) from None
    fig, (rtt, cpu) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    matches = sorted({sc["matches"] for sc in report["scenarios"]})
    series: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for sc in report["scenarios"]:
        series.setdefault((sc["mode"], sc["pace"]), []).append(sc)
    for (mode, pace), scs in sorted(series.items()):
        scs.sort(key=lambda sc: sc["matches"])
        xs = [sc["matches"] for sc in scs]
        name = mode if pace <= 0 else f"{mode}, 1 shot/{pace:g}s"
        for side, style in (("target", "-"), ("baseline", "--")):
            figs = [sc[side] or {} for sc in scs]
            label = (
                name if side == "target" else f"{name} ({'relay' if mode == 'blind' else 'echo'})"
            )
            for key, marker in (("rtt_p50_ms", "o"), ("rtt_p99_ms", "^")):
                ys = [f.get(key) for f in figs]
                if any(y is not None for y in ys):
                    pct = key.split("_")[1]
                    rtt.plot(xs, ys, style, marker=marker, label=f"{label} {pct}")
            ys = [f.get("server_cpu_us_per_shot") for f in figs]
            if any(y is not None for y in ys):
                cpu.plot(xs, ys, style, marker="o", label=label)
    for ax, title, unit in (
        (rtt, "shot round trip", "ms"),
        (cpu, "server CPU per shot", "µs"),
    ):
        ax.set_xscale("log")
        # The matches measured, as plain numbers (log-scale minor labels would overlap).
        ax.set_xticks(matches)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("concurrent matches")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    rtt.set_yscale("log")
    mc = report["machine"]
    load = mc.get("load_average")
    fig.suptitle(
        f"seabattle bench: {report['target']}, {mc['cores']} cores, {mc['implementation']} "
        f"{mc['python']}, rules {report['rules']}"
        + (f", load average {load[0]:.1f} at the end" if load else ""),
        fontsize="medium",
    )
    fig.savefig(path)
    plt.close(fig)
