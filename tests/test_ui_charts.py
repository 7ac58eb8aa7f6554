"""The dashboard's SVG charts: escaped text, one mark per value, honest scales."""

from __future__ import annotations

from datetime import UTC, datetime

from cortex.adapters.server.ui import charts
from cortex.core.models import COMPLETE, SessionState

NOW = datetime(2026, 2, 16, 12, tzinfo=UTC)


def test_the_timeline_escapes_ids_and_projects_and_links_a_chain() -> None:
    first = SessionState(
        "a<b>", "2026-02-16T09:00:00Z", end_time="2026-02-16T10:00:00Z", state=COMPLETE,
        project='"><script>x</script>', continued_by="b2",
    )  # fmt: skip
    second = SessionState(
        "b2", "2026-02-16T11:00:00Z", project="api", previous_session_id="a<b>",
        crash_recovered=True,
    )  # fmt: skip
    svg = str(charts.timeline([second, first], NOW, "/ui"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "a&lt;b&gt;" in svg
    assert svg.count('class="bar ') == 2 and 'class="bar crashed"' in svg
    assert svg.count('class="chain"') == 1
    assert 'href="/ui/sessions/a%3Cb%3E"' in svg


def test_day_bars_show_the_real_peaks_and_keep_an_empty_series_flat() -> None:
    svg = str(charts.day_bars([("2026-02-15", 0, 0), ("2026-02-16", 2, 0)]))
    assert "sessions started (peak 2)" in svg and "events recorded (peak 0)" in svg
    assert svg.count('class="day sessions"') == 3  # two bars and the legend
    assert 'height="0.0"' in svg
