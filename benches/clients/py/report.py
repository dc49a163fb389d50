"""workers.md from the samples of run.py: medians over rounds, ratios as the median of the
per-round ratios with every round's value, the load average next to each table, and the
targets of the issue as verdicts."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PY_WORKERS = ["orca-aio", "orca-sync"]
PEERS = ["dramatiq", "taskiq", "celery", "rq"]
LAT_PEERS = ["dramatiq", "taskiq"]


def is_per_job(name: str) -> bool:
    """A worker's command of the trickle: not connection upkeep (HELLO, CLIENT ..., QUIT: a
    worker's start and stop, not per job)."""
    return name not in ("hello", "quit") and not name.startswith("client|")


def per_job_commands(calls: dict[str, int], jobs: int) -> float:
    return sum(n for k, n in calls.items() if is_per_job(k)) / jobs


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def per_round(
    samples: list[dict[str, Any]], fn: Callable[[dict[str, dict[str, Any]]], float | None]
) -> list[float]:
    """``fn(side -> sample)`` for each round that has what it needs."""
    rounds = sorted({s["round"] for s in samples})
    out = []
    for r in rounds:
        v = fn({s["side"]: s for s in samples if s["round"] == r})
        if v is not None:
            out.append(v)
    return out


def join(xs: list[float], spec: str) -> str:
    return ", ".join(format(x, spec) for x in xs)


def ratio_cell(xs: list[float], want: str = "") -> str:
    if not xs:
        return "-"
    spread = ", ".join(f"{x:.2f}" for x in xs)
    return f"**{med(xs):.2f}x** ({spread})" + (f" {want}" if want else "")


def verdict(x: float, target: float, low_is_good: bool = False) -> str:
    ok = x <= target if low_is_good else x >= target
    return "met" if ok else "**missed**"


def _drain(samples: list[dict[str, Any]], meta: dict[str, Any], w: Callable[[str], None]) -> None:
    ds = [s for s in samples if s["section"] == "drain"]
    if not ds:
        return
    ld = meta["loads"].get("drain", ["?", "?"])
    w("## Drain of a full queue")
    w("")
    w(
        f"Load average (1, 5, 15 min) at the start {ld[0]}, at the end {ld[1]}. Each side drains a "
        "queue filled beforehand (not timed) with its own client; from the worker's start to its "
        "last finished job. CPU is the worker process's own (RQ: with its forked work horses; "
        "Celery: the parent only, its pool's children are not counted)."
    )
    w("")
    w(
        "| side | setting | jobs | jobs/s (median) | per round | worker CPU µs/job | "
        "/ best peer (per round) | / Node (per round) |"
    )
    w("|---|---|---|---|---|---|---|---|")
    sides = list(dict.fromkeys(s["side"] for s in ds))
    for side in sides:
        xs = [s for s in ds if s["side"] == side]
        rates = [s["rate"] for s in xs]
        cpu = med([s["cpu_us_per_job"] for s in xs])
        best = per_round(
            ds,
            lambda m, side=side: (
                m[side]["rate"] / max(m[p]["rate"] for p in PEERS if p in m)
                if side in m and any(p in m for p in PEERS)
                else None
            ),
        )
        node = per_round(
            ds,
            lambda m, side=side: (
                m[side]["rate"] / m["node"]["rate"] if side in m and "node" in m else None
            ),
        )
        w(
            f"| {side} | {meta['drain_settings'].get(side, '')} | {xs[0]['jobs']:,} | {med(rates):,.0f} | "
            f"{join(rates, ',.0f')} | {cpu:.1f} | "
            f"{ratio_cell(best) if side not in PEERS else '-'} | {ratio_cell(node) if side != 'node' else '-'} |"
        )
    w("")
    for side in PY_WORKERS:
        best = per_round(
            ds,
            lambda m, side=side: (
                m[side]["rate"] / max(m[p]["rate"] for p in PEERS if p in m)
                if side in m and any(p in m for p in PEERS)
                else None
            ),
        )
        node = per_round(
            ds,
            lambda m, side=side: (
                m[side]["rate"] / m["node"]["rate"] if side in m and "node" in m else None
            ),
        )
        if best:
            w(
                f"- **{side}**: {med(best):.2f}x the best Python peer (target >= 4x: "
                f"{verdict(med(best), 4)}); {med(node):.2f}x the Node Worker (target >= 0.25x: "
                f"{verdict(med(node), 0.25)})."
            )
    w("")


def _latency(samples: list[dict[str, Any]], meta: dict[str, Any], w: Callable[[str], None]) -> None:
    ls = [s for s in samples if s["section"] == "latency"]
    if not ls:
        return
    ld = meta["loads"].get("latency", ["?", "?"])
    w("## Latency: enqueue -> handler start")
    w("")
    w(
        f"Load average at the start {ld[0]}, at the end {ld[1]}. An open-loop producer in a process "
        "of its own (the side's own client: redis-py for the Python sides, ioredis/BullMQ for Node) "
        "sends on a fixed schedule whatever the worker does, every ~0.5 ms the jobs due by then; "
        "each job carries its send time (CLOCK_MONOTONIC) and the handler takes the difference at "
        "its start. Milliseconds, medians over rounds of each round's percentile. `producer/s` is "
        "the rate the producer achieved (a Python peer's producer falls behind at 5k and 20k jobs/s: "
        "its send costs more than the schedule allows). A side whose p50 grows to seconds is "
        "saturated: its worker finishes fewer jobs per second than it is sent, and its latency is "
        "its backlog."
    )
    w("")
    for rate in sorted({s["offered"] for s in ls}):
        rs = [s for s in ls if s["offered"] == rate]
        w(f"### {rate:,} jobs/s")
        w("")
        w(
            "| side | p50 ms | p99 ms | p99.9 ms | max ms | p99 per round | producer/s | "
            "p99 / best peer's (per round) |"
        )
        w("|---|---|---|---|---|---|---|---|")
        for side in dict.fromkeys(s["side"] for s in rs):
            xs = [s for s in rs if s["side"] == side]

            def p(k: str, xs: list[dict[str, Any]] = xs) -> float:
                return med([s["lat"][k] for s in xs])

            rel: list[float] = []
            if side in PY_WORKERS:
                rel = per_round(
                    rs,
                    lambda m, side=side: (
                        m[side]["lat"]["p99"] / min(m[q]["lat"]["p99"] for q in LAT_PEERS if q in m)
                        if side in m and any(q in m for q in LAT_PEERS)
                        else None
                    ),
                )
            elif side == "node":
                rel = per_round(
                    rs,
                    lambda m: (
                        m["node"]["lat"]["p99"] / m["bull"]["lat"]["p99"]
                        if "node" in m and "bull" in m
                        else None
                    ),
                )
            w(
                f"| {side} | {p('p50'):.2f} | {p('p99'):.2f} | {p('p999'):.2f} | {p('max'):.1f} | "
                f"{join([s['lat']['p99'] for s in xs], '.1f')} | "
                f"{med([s['producer']['rate'] for s in xs]):,.0f} | "
                f"{ratio_cell(rel) + (' (of BullMQ)' if side == 'node' and rel else '') if rel else '-'} |"
            )
        w("")
        if rate == 1000:
            for side in PY_WORKERS:
                rel = per_round(
                    rs,
                    lambda m, side=side: (
                        m[side]["lat"]["p99"] / min(m[q]["lat"]["p99"] for q in LAT_PEERS if q in m)
                        if side in m and any(q in m for q in LAT_PEERS)
                        else None
                    ),
                )
                p50 = med([s["lat"]["p50"] for s in rs if s["side"] == side])
                if rel:
                    w(
                        f"- **{side}** at 1k/s: p99 {med(rel):.2f}x the best peer's (target <= 0.5x: "
                        f"{verdict(med(rel), 0.5, True)}), p50 {p50:.2f} ms (target <= 1 ms: "
                        f"{verdict(p50, 1, True)})."
                    )
            rel = per_round(
                rs,
                lambda m: (
                    m["node"]["lat"]["p99"] / m["bull"]["lat"]["p99"]
                    if "node" in m and "bull" in m
                    else None
                ),
            )
            if rel:
                w(
                    f"- **node** at 1k/s: p99 {med(rel):.2f}x BullMQ's (target <= 0.2x: "
                    f"{verdict(med(rel), 0.2, True)})."
                )
            w("")


def _rush(samples: list[dict[str, Any]], meta: dict[str, Any], w: Callable[[str], None]) -> None:
    rs = [s for s in samples if s["section"] == "rush"]
    if not rs:
        return
    ld = meta["loads"].get("rush", ["?", "?"])
    n = rs[0]["jobs"]
    w("## The deadline rush")
    w("")
    w(
        f"Load average at the start {ld[0]}, at the end {ld[1]}. {n:,} jobs from 2,000 students "
        "(collation = student), sent by one Node producer with 64 enqueues in flight (orca-queue's "
        "`Queue.enqueue`, or BullMQ's `Queue.add` with a priority) while the worker, started "
        "before, drains. Drain time: from the first enqueue to the worker's last finished job; "
        "enqueue latency: each call as the producer saw it."
    )
    w("")
    w(
        "| side | worker | drain s (median) | per round | enqueue p50 ms | enqueue p99 ms | "
        "enqueue p99.9 ms | / Node's drain time (per round) |"
    )
    w("|---|---|---|---|---|---|---|---|")
    settings = {
        "node": "Node Worker, c64",
        "orca-aio": "asyncio Worker, c64",
        "orca-sync": "thread Worker, c16",
        "bull": "BullMQ Worker, c64",
    }
    for side in dict.fromkeys(s["side"] for s in rs):
        xs = [s for s in rs if s["side"] == side]
        rel = per_round(
            rs,
            lambda m, side=side: (
                m[side]["drain_s"] / m["node"]["drain_s"] if side in m and "node" in m else None
            ),
        )
        e = [s["producer"]["enqueue"] for s in xs]
        w(
            f"| {side} | {settings.get(side, '')} | {med([s['drain_s'] for s in xs]):.2f} | "
            f"{join([s['drain_s'] for s in xs], '.2f')} | {med([x['p50'] for x in e]):.2f} | "
            f"{med([x['p99'] for x in e]):.2f} | {med([x['p999'] for x in e]):.2f} | "
            f"{ratio_cell(rel) if side != 'node' else '-'} |"
        )
    w("")
    for side in PY_WORKERS:
        rel = per_round(
            rs,
            lambda m, side=side: (
                m[side]["drain_s"] / m["node"]["drain_s"] if side in m and "node" in m else None
            ),
        )
        if rel:
            w(
                f"- **{side}** drains in {med(rel):.2f}x the Node Worker's time (target <= 1.5x: "
                f"{verdict(med(rel), 1.5, True)})."
            )
    w("")


def _trickle(samples: list[dict[str, Any]], meta: dict[str, Any], w: Callable[[str], None]) -> None:
    ts = [s for s in samples if s["section"] == "trickle"]
    if not ts:
        return
    ld = meta["loads"].get("trickle", ["?", "?"])
    w("## Commands per job at a trickle")
    w("")
    w(
        f"Load average at the start {ld[0]}, at the end {ld[1]}. The worker waits idle in its "
        "blocking pop; then 100 jobs arrive 20 ms apart (one ORCA.ENQUEUE each, from the bench). "
        "Every command the server ran other than those enqueues and the worker's connection upkeep (HELLO, CLIENT ..., QUIT at its start and stop), per job (INFO commandstats)."
    )
    w("")
    w("| side | commands/job (median) | per round | commands (last round) |")
    w("|---|---|---|---|")
    for side in dict.fromkeys(s["side"] for s in ts):
        xs = [s for s in ts if s["side"] == side]
        cmds = ", ".join(
            f"{k} {v}" for k, v in sorted(xs[-1]["commands"].items(), key=lambda kv: -kv[1])
        )
        w(
            f"| {side} | {med([per_job_commands(s['commands'], s['jobs']) for s in xs]):.2f} | "
            f"{join([per_job_commands(s['commands'], s['jobs']) for s in xs], '.2f')} | {cmds} |"
        )
    w("")
    for side in PY_WORKERS + ["node"]:
        xs = [per_job_commands(s["commands"], s["jobs"]) for s in ts if s["side"] == side]
        if xs:
            w(
                f"- **{side}**: {med(xs):.2f} worker commands per job (target ~1.2: "
                f"{verdict(med(xs), 1.25, True)})."
            )
    w("")


def _rel_drain(ds: list[dict[str, Any]], side: str, to: str) -> list[float]:
    def fn(m: dict[str, dict[str, Any]]) -> float | None:
        if side not in m:
            return None
        if to == "peer":
            peers = [m[p]["rate"] for p in PEERS if p in m]
            return m[side]["rate"] / max(peers) if peers else None
        return m[side]["rate"] / m[to]["rate"] if to in m else None

    return per_round(ds, fn)


def summary(data: dict[str, Any]) -> str:
    """The issue's rows in one table (docs/benchmarks.md's summary of this run)."""
    meta, samples = data["meta"], data["samples"]
    rows: list[tuple[str, str, str, str]] = []

    def add(what: str, got: list[float], fmt: str, target: str, ok: bool | None) -> None:
        if got:
            cell = f"{format(med(got), fmt)} ({join(got, fmt)})"
            rows.append((what, cell, target, "-" if ok is None else ("met" if ok else "**missed**")))

    ds = [s for s in samples if s["section"] == "drain"]
    names = {"orca-aio": "asyncio Worker (c64)", "orca-sync": "thread Worker (c16)"}
    for side in PY_WORKERS:
        x = _rel_drain(ds, side, "peer")
        add(f"drain, {names[side]} / best Python peer", x, ".2f", ">= 4x", bool(x) and med(x) >= 4)
        x = _rel_drain(ds, side, "node")
        add(f"drain, {names[side]} / Node Worker", x, ".2f", ">= 0.25x", bool(x) and med(x) >= 0.25)
    ls = [s for s in samples if s["section"] == "latency" and s["offered"] == 1000]
    for side in PY_WORKERS:
        x = per_round(
            ls,
            lambda m, side=side: (
                m[side]["lat"]["p99"] / min(m[q]["lat"]["p99"] for q in LAT_PEERS if q in m)
                if side in m and any(q in m for q in LAT_PEERS)
                else None
            ),
        )
        add(f"latency at 1k/s, {names[side]}: p99 / best peer's", x, ".2f", "<= 0.5x", bool(x) and med(x) <= 0.5)
        p50 = [s["lat"]["p50"] for s in ls if s["side"] == side]
        add(f"latency at 1k/s, {names[side]}: p50 ms", p50, ".2f", "<= 1 ms", bool(p50) and med(p50) <= 1)
    x = per_round(
        ls,
        lambda m: m["node"]["lat"]["p99"] / m["bull"]["lat"]["p99"] if "node" in m and "bull" in m else None,
    )
    add("latency at 1k/s, Node Worker: p99 / BullMQ's", x, ".2f", "<= 0.2x", bool(x) and med(x) <= 0.2)
    rs = [s for s in samples if s["section"] == "rush"]
    for side in PY_WORKERS:
        x = per_round(
            rs,
            lambda m, side=side: (
                m[side]["drain_s"] / m["node"]["drain_s"] if side in m and "node" in m else None
            ),
        )
        add(f"deadline rush, {names[side]}: drain time / Node's", x, ".2f", "<= 1.5x", bool(x) and med(x) <= 1.5)
    ts = [s for s in samples if s["section"] == "trickle"]
    for side in [*PY_WORKERS, "node"]:
        x = [per_job_commands(s["commands"], s["jobs"]) for s in ts if s["side"] == side]
        what = names.get(side, "Node Worker (c16)")
        add(f"at a trickle, {what}: commands per job", x, ".2f", "~1.2", bool(x) and med(x) <= 1.25)
    loads = ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in meta.get("loads", {}).items())
    intro = (
        f"From `make bench-workers` on {meta['date']} ({meta['rounds']} rounds; load average "
        f"(1, 5, 15 min) by section: {loads}; the full tables, the peers' settings and the "
        "analysis in benches/clients/workers.md). Ratios are the median of the per-round "
        "ratios (each round's in brackets)."
    )
    out = [
        intro,
        "",
        "| row | this run | target | verdict |",
        "|---|---|---|---|",
    ]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(out) + "\n"


WORKERS_BEGIN = "<!-- WORKERS -->"
WORKERS_END = "<!-- /WORKERS -->"


def put_summary(page: Path, data: dict[str, Any]) -> bool:
    """Replace the summary between the markers of docs/benchmarks.md; False without them."""
    if not page.exists():
        return False
    text = page.read_text()
    a, b = text.find(WORKERS_BEGIN), text.find(WORKERS_END)
    if a < 0 or b < a:
        return False
    page.write_text(text[: a + len(WORKERS_BEGIN)] + "\n" + summary(data) + text[b:])
    return True


def render(data: dict[str, Any]) -> str:
    meta, samples = data["meta"], data["samples"]
    lines: list[str] = []
    w = lines.append
    v = meta["versions"]
    w("# Workers: orca-queue's Python Workers against the Python peers and the Node Worker")
    w("")
    w(
        f"Generated by `make bench-workers` (`benches/clients/py/run.py`) on {meta['date']}: one "
        f"redis-server {meta['redis']} with the module, {meta['cpus']} CPUs shared with everything "
        f"else on the machine, Python {meta['python']} (redis-py {v['redis']}, hiredis "
        f"{v['hiredis']}), node {meta['node']}; peers Dramatiq {v['dramatiq']}, taskiq "
        f"{v['taskiq']} with taskiq-redis {v['taskiq-redis']}, Celery {v['celery']} (kombu "
        f"{v['kombu']}), RQ {v['rq']}; BullMQ {v['bullmq']}. {meta['rounds']} rounds; the order "
        "of the sides alternates from round to round; rates are medians over the rounds, ratios "
        "the median of the per-round ratios (every round's value in brackets)."
    )
    w("")
    _drain(samples, meta, w)
    _latency(samples, meta, w)
    _rush(samples, meta, w)
    _trickle(samples, meta, w)
    analysis = HERE.parent / "analysis-workers.md"
    if analysis.exists():
        w(analysis.read_text())
    return "\n".join(lines)
