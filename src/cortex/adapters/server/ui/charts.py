"""The dashboard's charts as inline SVG, built on the server (no JavaScript chart library).

Every piece of text that reaches the SVG (ids, projects, labels) goes through ``escape``; the
result is ``Markup`` so the templates insert it as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from urllib.parse import quote

from markupsafe import Markup, escape

from cortex.clock import parse_time
from cortex.core.models import ACTIVE, COMPLETE, SessionState
from cortex.errors import ValidationError
from cortex.services.dashboard import Candidate

WIDTH = 960
ROW = 16
LEFT = 170
COLORS = {"recency": "#4e79a7", "topic_overlap": "#59a14f", "pending_tasks": "#f28e2b"}


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return parse_time(value)
    except ValidationError:
        return None


def session_kind(state: SessionState) -> str:
    """``crashed``, ``active``, ``complete`` or ``other``: a bar's colour and the legend's."""
    if state.crash_recovered:
        return "crashed"
    if state.state == ACTIVE and state.end_time is None:
        return "active"
    return "complete" if state.state == COMPLETE else "other"


def timeline(sessions: Sequence[SessionState], now: datetime, base: str) -> Markup:
    """Sessions as bars over time (oldest at the top), chains as links between bars."""
    spans = []
    for state in sorted(sessions, key=lambda s: s.start_time):
        start = _time(state.start_time)
        if start is None:
            continue
        end = _time(state.end_time) or _time(state.last_activity) or start
        if state.end_time is None and session_kind(state) == "active":
            end = max(end, now)
        spans.append((state, start, max(end, start)))
    if not spans:
        return Markup('<p class="empty">no sessions match</p>')
    low = min(s for _, s, _ in spans)
    high = max(e for _, _, e in spans)
    seconds = max((high - low).total_seconds(), 1.0)
    plot = WIDTH - LEFT - 10

    def x(moment: datetime) -> float:
        return LEFT + (moment - low).total_seconds() / seconds * plot

    height = len(spans) * ROW + 30
    rows: dict[str, tuple[float, float, float]] = {}
    bars = []
    for i, (state, start, end) in enumerate(spans):
        top = 20 + i * ROW
        x0, x1 = x(start), max(x(end), x(start) + 3)
        rows[state.session_id] = (x0, x1, top + ROW / 2 - 1)
        kind = session_kind(state)
        title = escape(
            f"{state.session_id} {state.project or ''} {state.state} "
            f"{state.start_time} → {state.end_time or 'open'}"
            + (" (crash recovered)" if state.crash_recovered else "")
        )
        href = escape(f"{base}/sessions/{quote(state.session_id, safe='')}")
        bars.append(
            f'<a href="{href}"><text x="{LEFT - 6}" y="{top + 11}" class="label" '
            f'text-anchor="end">{escape(state.session_id[:8])} '
            f"{escape((state.project or '')[-12:])}</text>"
            f'<rect class="bar {kind}" x="{x0:.1f}" y="{top + 2}" width="{x1 - x0:.1f}" '
            f'height="{ROW - 5}" rx="2"><title>{title}</title></rect></a>'
        )
    links = []
    for state, _, _ in spans:
        prev = rows.get(state.previous_session_id or "")
        here = rows.get(state.session_id)
        if prev and here:
            links.append(
                f'<path class="chain" d="M{prev[1]:.1f},{prev[2]:.1f} '
                f"C{prev[1] + 20:.1f},{prev[2]:.1f} {here[0] - 20:.1f},{here[2]:.1f} "
                f'{here[0]:.1f},{here[2]:.1f}"/>'
            )
    axis = (
        f'<text x="{LEFT}" y="12" class="axis">{escape(low.strftime("%Y-%m-%d %H:%M"))}</text>'
        f'<text x="{WIDTH - 10}" y="12" class="axis" text-anchor="end">'
        f"{escape(high.strftime('%Y-%m-%d %H:%M'))} UTC</text>"
    )
    return Markup(
        f'<svg class="chart timeline" viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'role="img" aria-label="sessions over time">{axis}{"".join(links)}'
        f"{''.join(bars)}</svg>"
    )


def score_bars(candidates: Sequence[Candidate], threshold: float) -> Markup:
    """Each candidate's score as stacked recency, topic-overlap and pending-task parts."""
    if not candidates:
        return Markup('<p class="empty">no prior session of this project to weigh</p>')
    plot = WIDTH - LEFT - 120
    height = len(candidates) * (ROW + 4) + 40
    out = []
    for i, cand in enumerate(candidates):
        top = 20 + i * (ROW + 4)
        b = cand.scored.breakdown
        x = float(LEFT)
        sid = escape(cand.session.session_id[:8])
        out.append(
            f'<text x="{LEFT - 6}" y="{top + 12}" class="label" text-anchor="end">{sid}</text>'
        )
        for part, value in (
            ("recency", b.recency),
            ("topic_overlap", b.topic_overlap),
            ("pending_tasks", b.pending_tasks),
        ):
            w = max(value, 0.0) * plot
            out.append(
                f'<rect x="{x:.1f}" y="{top}" width="{w:.1f}" height="{ROW}" '
                f'fill="{COLORS[part]}"><title>{part} {value:.3f}</title></rect>'
            )
            x += w
        mark, css = ("included", "in") if cand.included else ("left out", "out")
        out.append(
            f'<text x="{x + 6:.1f}" y="{top + 12}" class="label {css}">{b.total:.3f} {mark}</text>'
        )
    tx = LEFT + threshold * plot
    out.append(
        f'<line class="threshold" x1="{tx:.1f}" y1="12" x2="{tx:.1f}" y2="{height - 18}"/>'
        f'<text x="{tx:.1f}" y="10" class="axis" text-anchor="middle">threshold '
        f"{threshold:g}</text>"
    )
    legend = "".join(
        f'<rect x="{LEFT + j * 150}" y="{height - 14}" width="10" height="10" fill="{c}"/>'
        f'<text x="{LEFT + j * 150 + 14}" y="{height - 5}" class="axis">{escape(name)}</text>'
        for j, (name, c) in enumerate(COLORS.items())
    )
    return Markup(
        f'<svg class="chart scores" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" '
        f'aria-label="candidate scores">{"".join(out)}{legend}</svg>'
    )


def day_bars(days: Sequence[tuple[str, int, int]]) -> Markup:
    """Sessions started and events recorded per day, side by side, each on its own scale."""
    if not days:
        return Markup('<p class="empty">nothing recorded</p>')
    height, top, bottom = 180, 24, 30
    plot_h = height - top - bottom
    step = (WIDTH - 60) / len(days)
    highest = [max(d[1] for d in days), max(d[2] for d in days)]
    peaks = [n or 1 for n in highest]  # the scale; an empty series stays flat
    out = [
        f'<rect x="50" y="4" width="10" height="10" class="day sessions"/>'
        f'<text x="64" y="13" class="axis">sessions started (peak {highest[0]:,})</text>'
        f'<rect x="260" y="4" width="10" height="10" class="day events"/>'
        f'<text x="274" y="13" class="axis">events recorded (peak {highest[1]:,})</text>'
    ]
    width = max(step / 2 - 1, 1)
    for i, (day, sessions, events) in enumerate(days):
        x = 50 + i * step
        for k, (n, css) in enumerate(((sessions, "sessions"), (events, "events"))):
            h = n / peaks[k] * plot_h
            out.append(
                f'<rect class="day {css}" x="{x + k * width:.1f}" y="{top + plot_h - h:.1f}" '
                f'width="{width:.1f}" height="{h:.1f}">'
                f"<title>{escape(day)}: {n:,} {css}</title></rect>"
            )
        if i % 7 == 0 or i == len(days) - 1:
            out.append(f'<text x="{x:.1f}" y="{height - 10}" class="axis">{escape(day[5:])}</text>')
    return Markup(
        f'<svg class="chart days" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" '
        f'aria-label="captures per day">{"".join(out)}</svg>'
    )
