"""The pure part of file mode: paths, parsing memory files, rendering the semantic file."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex.core import filemode
from cortex.core.filemode import (
    MAX_ENTRY_BYTES,
    ParseNotes,
    body_checksum,
    canonical,
    check_slug,
    daily_entry,
    layout,
    parse_entries,
    render_semantic,
    strip_markers,
)
from cortex.core.memory_models import Memory
from cortex.errors import UnsafeIdError


def mem(i: int, content: str, **kw: object) -> Memory:
    at = f"2026-01-01T00:00:{i % 60:02d}Z"
    return Memory(id=f"m-{i}", content=content, created_at=at, updated_at=at, **kw)  # type: ignore[arg-type]


def entries(text: str) -> list[tuple[str, str | None]]:
    return [(e.text, e.marker) for e in parse_entries(text.splitlines())]


@pytest.mark.parametrize(
    ("name", "daily", "snapshot", "semantic"),
    [
        ("rfc", "memory/daily/2026-02-16.md", "memory/snapshots/2026-02-16/auth.md", "memory.md"),
        ("openclaw", "memory/2026-02-16.md", "memory/2026-02-16-auth.md", "MEMORY.md"),
    ],
)
def test_layouts(name: str, daily: str, snapshot: str, semantic: str) -> None:
    lay = layout(name)
    assert lay.daily("2026-02-16") == daily
    assert lay.snapshot("2026-02-16", "auth") == snapshot
    assert lay.semantic_names[0] == semantic
    assert lay.daily_day("2026-02-16.md") == "2026-02-16"
    assert lay.daily_day("2026-02-16-auth.md") is None
    assert lay.daily_day("notes.md") is None


def test_unknown_layout_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="use rfc or openclaw"):
        layout("weird")


@pytest.mark.parametrize(
    "slug", ["../x", "/etc/passwd", "a/b", "..", "A-B", "a b", "", "-x", "x" * 65, "a\x00b"]
)
def test_unsafe_slugs_are_refused(slug: str) -> None:
    with pytest.raises(UnsafeIdError, match="lowercase letters"):
        check_slug(slug)
    with pytest.raises(UnsafeIdError):
        layout("rfc").snapshot("2026-02-16", slug)


def test_unsafe_days_are_refused() -> None:
    with pytest.raises(UnsafeIdError, match="YYYY-MM-DD"):
        layout("rfc").daily("../2026")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- one\n- two", [("one", None), ("two", None)]),
        ("* a\n  more of a\n+ b", [("a\nmore of a", None), ("b", None)]),
        ("1. first\n2) second", [("first", None), ("second", None)]),
        (
            "a paragraph\nits second line\n\nanother",
            [("a paragraph\nits second line", None), ("another", None)],
        ),
        ("- x <!-- cortex:abc-1 -->\n  y", [("x\ny", "abc-1")]),
        ("# Title\n\n## Section\n- under", [("under", None)]),
        ("- item\n  ```\n  - not an item\n  ```", [("item\n```\n- not an item\n```", None)]),
        ("-\n- \n-x", [("-x", None)]),
        ("<!-- a comment -->", [("<!-- a comment -->", None)]),
    ],
)
def test_parse_entries(text: str, expected: list[tuple[str, str | None]]) -> None:
    assert entries(text) == expected


def test_an_unclosed_fence_keeps_the_rest_in_one_entry_and_says_where() -> None:
    notes = ParseNotes()
    found = list(parse_entries(["- a", "```", "- b", "", "- c"], notes))
    assert [e.text for e in found] == ["a\n```\n- b\n- c"]
    assert notes.open_fence_line == 2


def test_a_cortex_section_of_a_daily_log_ends_at_its_end_mark() -> None:
    block = daily_entry("2026-02-16T09:30:00Z", "checkpoint", "ckpt-1", "SUMMARY: x\n\n- pin")
    text = "# 2026-02-16\n" + block + "\n- my own note\n\nagent paragraph\n"
    found = list(parse_entries(text.splitlines()))
    assert [(e.marker, e.cortex_section) for e in found] == [
        ("ckpt-1", True),
        (None, False),
        (None, False),
    ]
    assert found[0].text.startswith("09:30 UTC checkpoint")
    assert "- pin" in found[0].text
    assert [e.text for e in found[1:]] == ["my own note", "agent paragraph"]


def test_an_entry_over_the_limit_is_cut_and_counted() -> None:
    big = ["- start"] + ["  " + "x" * 1000] * 100
    notes = ParseNotes()
    (entry,) = parse_entries(big, notes)
    assert len(entry.text.encode()) <= MAX_ENTRY_BYTES
    assert entry.truncated_bytes > 0
    assert notes.truncated_entries == 1


def test_rendering_round_trips_and_its_header_checks_the_body() -> None:
    memories = [mem(1, "fact one"), mem(2, "multi\nline\n\n  indented"), mem(3, "- dash")]
    r = render_semantic(memories, 200)
    parsed = list(parse_entries(r.text.splitlines()))
    assert {e.marker: e.sha for e in parsed} == r.entries
    assert {e.marker: e.text for e in parsed} == {m.id: canonical(m.content) for m in memories}
    assert body_checksum(r.text) == r.sha
    assert body_checksum(r.text.replace("fact one", "fact 1")) != r.sha


def test_rules_come_first_then_explicit_then_confidence() -> None:
    memories = [
        mem(1, "low", confidence=0.2),
        mem(2, "rule", layer="rule", type="rule"),
        mem(3, "explicit", remember_intent="explicit"),
        mem(4, "high", confidence=0.9),
    ]
    r = render_semantic(memories, 200)
    assert [e.text for e in parse_entries(r.text.splitlines())] == [
        "rule",
        "explicit",
        "high",
        "low",
    ]


@pytest.mark.parametrize("cap", [20, 25, 50])
def test_the_line_cap_holds_and_counts_what_is_left_out(cap: int) -> None:
    memories = [mem(i, f"memory {i}\nsecond line") for i in range(100)]
    r = render_semantic(memories, cap)
    assert len(r.text.splitlines()) <= cap
    assert r.omitted == 100 - len(r.entries) > 0
    assert f"{r.omitted} more memories" in r.text.splitlines()[-1]


def test_everything_fits_without_an_omitted_line() -> None:
    r = render_semantic([mem(i, f"m{i}") for i in range(16)], 20)
    assert len(r.text.splitlines()) == 20
    assert r.omitted == 0


def test_strip_markers_leaves_the_text() -> None:
    r = render_semantic([mem(1, "fact")], 200)
    assert strip_markers(r.text) == "# Memory\n\n\n- fact"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_parsing_any_text_never_fails_and_keeps_every_word(text: str) -> None:
    """Every word of the text's entries is kept. A heading's words name the entries under it
    (``Entry.heading``) and are no entry themselves: a heading with none under it ("# :")
    keeps nothing, as it should."""
    found = list(parse_entries(text.splitlines()))
    kept = " ".join(e.text for e in found)
    body = [line for line in text.splitlines() if not filemode._HEADING.fullmatch(line)]
    for word in " ".join(body).split():
        if "<!--" not in word and "-->" not in word and word.strip("-*+#`~0123456789.)"):
            assert word.strip("-*+#`~0123456789.)") in kept or word in kept


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=80),
        min_size=1,
        max_size=10,
    )
)
def test_any_memory_renders_and_parses_back_to_itself(contents: list[str]) -> None:
    memories = [mem(i, c) for i, c in enumerate(contents) if canonical(c)]
    r = render_semantic(memories, 10_000)
    parsed = {e.marker: e.text for e in parse_entries(r.text.splitlines()) if e.marker}
    for m in memories:
        assert parsed.get(m.id) == canonical(m.content), m.content
