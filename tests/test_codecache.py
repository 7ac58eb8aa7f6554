"""The dataclass method cache: the same classes as plain ``dataclasses``, compiled once."""

from __future__ import annotations

import builtins
import dataclasses
import marshal
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from cortex import bytecode, codecache

POINT_TEXTS = 6 if sys.version_info < (3, 13) else 1
"""The texts ``dataclasses`` compiles for ``Point``: one per method, or (3.13) one for all."""

POINT = """
import dataclasses

@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list, compare=False)
"""


def _point_class(monkeypatch: pytest.MonkeyPatch, module: str = "cortex.codecache_fixture") -> type:
    """A frozen dataclass made in a module named ``module`` (the cache holds Cortex's)."""
    namespace = types.ModuleType(module)
    monkeypatch.setitem(sys.modules, module, namespace)
    exec(POINT, vars(namespace))
    return namespace.Point  # type: ignore[no-any-return]


def _code_of(cls: type) -> dict[str, tuple[object, ...]]:
    out = {}
    for name in ("__init__", "__repr__", "__eq__", "__setattr__", "__delattr__", "__hash__"):
        code = getattr(cls, name).__code__
        out[name] = (code.co_code, code.co_consts, code.co_names, code.co_varnames, code.co_flags)
    return out


def test_another_package_s_class_is_made_as_plain_dataclasses_make_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cortex.store  # noqa: F401 - installs the cache

    assert dataclasses.exec is codecache.cached_exec  # type: ignore[attr-defined]
    other = _point_class(monkeypatch, "elsewhere")
    monkeypatch.setattr(dataclasses, "exec", builtins.exec)
    plain = _point_class(monkeypatch, "elsewhere")
    assert _code_of(other) == _code_of(plain)  # no future flag of codecache's own
    # (the annotations' values, not the names of dataclasses' locals, such as '_type_x')
    assert other.__init__.__annotations__ == plain.__init__.__annotations__


def test_the_cache_is_installed_by_the_engine_and_makes_the_same_methods(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cortex.store  # noqa: F401 - the store installs the cache before the models

    assert dataclasses.exec is codecache.cached_exec  # type: ignore[attr-defined]
    for name in ("_codes", "_used"):  # this test's classes stay out of the file
        monkeypatch.setattr(codecache, name, {})
    monkeypatch.setattr(codecache, "_changed", set())
    monkeypatch.setattr(codecache, "_added", 0)
    cached = _point_class(monkeypatch)
    assert len(codecache._codes["cortex.codecache_fixture"]) == POINT_TEXTS  # Point's, held
    assert _code_of(_point_class(monkeypatch)) == _code_of(cached)  # made from the cache
    assert codecache._added == POINT_TEXTS
    _point_class(monkeypatch, "elsewhere")
    assert list(codecache._codes) == ["cortex.codecache_fixture"]  # another package's class
    monkeypatch.setattr(dataclasses, "exec", builtins.exec)
    plain = _point_class(monkeypatch)
    assert _code_of(cached) == _code_of(plain)
    point = cached(1, tags=["a"])
    assert point == cached(1, tags=["b"]) and hash(point) == hash(cached(1))
    assert repr(point).endswith("Point(x=1, y=0, tags=['a'])")
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]


def _loaded(path: Path) -> dict[str, dict[str, types.CodeType]]:
    opened, places = codecache.load(str(path))
    try:
        return {module: codecache.decode(opened.piece(*place)) for module, place in places.items()}
    finally:
        opened.close()


def test_saved_codes_load_back_and_a_bad_file_counts_as_empty(tmp_path: Path) -> None:
    import cortex.store  # noqa: F401 - the engine's classes, made through the cache

    path = tmp_path / "__pycache__" / "methods.bin"
    assert codecache.load(str(path))[1] == {}  # missing
    codecache._added = max(codecache._added, 1)
    codecache.save(str(path))
    assert codecache._added == 0
    loaded = _loaded(path)
    assert loaded.keys() >= {m for m, codes in codecache._codes.items() if codes}
    for module, codes in codecache._codes.items():
        back = loaded.get(module, {})
        assert back.keys() <= codes.keys() and codecache._used[module] <= back.keys()
        assert all(back[k].co_code == codes[k].co_code for k in back)
    data = path.read_bytes()
    for bad in (
        b"\0\0\0\0" + data[4:],  # another interpreter's magic number
        data[: len(data) // 2],  # cut short
        data[:4] + b"CXM1" + data[8:],  # another layout
        codecache.dump({}).replace(marshal.dumps({}), marshal.dumps(["not", "a", "dict"])),
        bytecode.MAGIC_NUMBER + marshal.dumps({"text": compile("x = 1", "<string>", "exec")}),
    ):
        path.write_bytes(bad)
        assert codecache.load(str(path))[1] == {}
    assert codecache.decode(b"\xff") == {} and codecache.decode(marshal.dumps([1])) == {}


def test_a_module_is_decoded_at_its_first_class_and_its_old_texts_dropped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A start decodes only the modules whose classes it makes; a module whose classes
    changed keeps only the texts it makes now."""
    module = "cortex.codecache_fixture"
    old_text = "def __create_fn__():\n def __init__(self): pass\n return __init__\n"
    other = {"x = 1": compile("x = 1", "<string>", "exec")}
    path = tmp_path / "methods.bin"
    path.write_bytes(
        codecache.dump(
            {
                module: marshal.dumps({old_text: compile(old_text, "<string>", "exec")}),
                "cortex.unused": marshal.dumps(other),
            }
        )
    )
    data, places = codecache.load(str(path))
    for name, value in (("_codes", {}), ("_used", {}), ("_changed", set()), ("_added", 0)):
        monkeypatch.setattr(codecache, name, value)
    monkeypatch.setattr(codecache, "_file", data)
    monkeypatch.setattr(codecache, "_pieces", places)
    _point_class(monkeypatch)
    assert list(codecache._codes) == [module] and list(codecache._pieces) == ["cortex.unused"]
    codecache.save(str(path))
    saved = _loaded(path)
    assert saved["cortex.unused"].keys() == other.keys()  # not decoded, kept as it was
    assert old_text not in saved[module]  # Point's module changed: its old text dropped
    assert saved[module].keys() == codecache._used[module] and len(saved[module]) == POINT_TEXTS
    data.close()


def test_what_another_process_saved_meanwhile_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "cortex.codecache_fixture"
    path = tmp_path / "methods.bin"
    first = {"x = 1": compile("x = 1", "<string>", "exec")}
    path.write_bytes(codecache.dump({"cortex.first": marshal.dumps(first)}))
    data, places = codecache.load(str(path))  # what this process read at its start
    for name, value in (("_codes", {}), ("_used", {}), ("_changed", set()), ("_added", 0)):
        monkeypatch.setattr(codecache, name, value)
    monkeypatch.setattr(codecache, "_file", data)
    monkeypatch.setattr(codecache, "_pieces", places)
    held = {("a+", 0): marshal.dumps(codecache._program("a+", 0))}
    monkeypatch.setattr(codecache, "_programs", held)
    # meanwhile another process saved a module and a pattern of its own
    other = {"y = 2": compile("y = 2", "<string>", "exec")}
    theirs = {("b+", 0): marshal.dumps(codecache._program("b+", 0))}
    path.write_bytes(
        codecache.dump(
            {
                "cortex.first": marshal.dumps(first),
                "cortex.other": marshal.dumps(other),
                codecache.PROGRAMS: marshal.dumps(theirs),
            }
        )
    )
    _point_class(monkeypatch)  # this process's addition
    codecache.save(str(path))
    saved = _loaded(path)
    assert saved["cortex.first"].keys() == first.keys()
    assert saved["cortex.other"].keys() == other.keys()  # not lost to this save
    assert len(saved[module]) == POINT_TEXTS
    data.close()
    data, places = codecache.load(str(path))
    start, end = places[codecache.PROGRAMS]
    assert set(codecache._decode_programs(data.piece(start, end))) == {("a+", 0), ("b+", 0)}
    data.close()


def test_a_process_reads_the_file_it_opened_and_no_more_of_it_than_it_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file stays open and each piece is read at its module's first class: a rewrite by
    another process (a new file in its place) leaves this process reading the version it
    opened, and where ``os.pread`` is missing the whole file is read at once instead."""
    path = tmp_path / "methods.bin"
    first = {"x = 1": compile("x = 1", "<string>", "exec")}
    second = {"y = 2": compile("y = 2", "<string>", "exec")}
    path.write_bytes(codecache.dump({"cortex.a": marshal.dumps(first)}))
    opened, places = codecache.load(str(path))
    assert opened.descriptor is not None and not opened.data  # nothing read but the header
    bytecode.replace(str(path), codecache.dump({"cortex.a": marshal.dumps(second)}))
    assert codecache.decode(opened.piece(*places["cortex.a"])).keys() == first.keys()
    assert _loaded(path)["cortex.a"].keys() == second.keys()  # a new process: the new file
    opened.close()
    assert codecache.decode(opened.piece(*places["cortex.a"])) == {}  # closed: nothing held
    monkeypatch.delattr(os, "pread")
    whole, places = codecache.load(str(path))
    assert whole.descriptor is None and len(whole.data) == path.stat().st_size
    assert codecache.decode(whole.piece(*places["cortex.a"])).keys() == second.keys()
    path.write_bytes(b"\0" * 8)
    assert codecache.load(str(path))[1] == {}


def test_an_unwritable_place_is_left_alone(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    codecache._added = max(codecache._added, 1)
    codecache.save(str(blocked / "__pycache__" / "methods.bin"))  # its parent is a file
    assert codecache._added >= 1
    assert list(tmp_path.iterdir()) == [blocked]


def _second_run(code: str) -> list[str]:
    """The words a second process running ``code`` prints (the first one filled the cache)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
    return done.stdout.split()


def test_a_second_process_compiles_none_of_the_engines_methods() -> None:
    code = (
        "import dataclasses, sys\n"
        "import cortex.store.sqlite.store, cortex.services.sessions.manager\n"
        "import cortex.adapters.hooks.dispatch\n"
        "import cortex.core.memory_models, cortex.core.history_models\n"
        "from cortex import codecache\n"
        "print(codecache._added, sum(map(len, codecache._codes.values())))\n"
    )
    compiled, held = map(int, _second_run(code))
    assert compiled == 0 and held >= (200 if POINT_TEXTS > 1 else 30)  # a text per class on 3.13


def test_the_hook_server_compiles_without_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook server lives for hours: the cache's texts and code would stay in its memory,
    and it compiles the methods once. It turns the cache off for itself before the engine's
    first import, and a process with ``CORTEX_CODECACHE=0`` leaves ``dataclasses`` alone."""
    from cortex.adapters.hooks import server

    seen: dict[str, str | None] = {}
    # (set, not deleted: the monkeypatch then removes what ``server.main`` sets, and later
    # tests' processes use the cache)
    monkeypatch.setenv("CORTEX_CODECACHE", "")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # (``main`` takes a finder out)
    monkeypatch.setattr(
        server, "serve", lambda home, idle: seen.update(env=os.environ.get("CORTEX_CODECACHE")) or 0
    )
    assert server.main(["/nowhere"]) == 0 and seen == {"env": "0"}
    code = "import dataclasses, cortex.config\nprint(hasattr(dataclasses, 'exec'))\n"
    env = {**os.environ, "CORTEX_CODECACHE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


PATTERNS = (
    (r"(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)|\bago\b", int(re.IGNORECASE)),
    (r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}", 0),
    (rb"[\x80-\xff]+(?!x)", 0),
    (r"(?x) a b  # verbose, an inline flag", 0),
)


def _same_pattern(made: re.Pattern[Any], plain: re.Pattern[Any]) -> None:
    assert (made.pattern, made.flags, made.groups) == (plain.pattern, plain.flags, plain.groups)
    assert made.groupindex == plain.groupindex
    sample = "On 2023-05 and 7 days AGO; ab user@host:1 \xe9" if made.pattern is str else ""
    text: Any = sample.encode("utf-8") if isinstance(made.pattern, bytes) else sample
    assert [m.span() for m in made.finditer(text)] == [m.span() for m in plain.finditer(text)]
    if isinstance(made.pattern, str):
        assert [m.groupdict() for m in made.finditer(text)] == [
            m.groupdict() for m in plain.finditer(text)
        ]


def _compile_as_ours(pattern: Any, flags: int = 0) -> re.Pattern[Any]:
    """``re``'s compiler (the cache's) called by a function of a Cortex module."""
    fixture = types.ModuleType("cortex.codecache_fixture")
    source = "def make(p, f):\n    return codecache.compile_pattern(p, f)\n"
    fixture.codecache = codecache  # type: ignore[attr-defined]
    exec(source, vars(fixture))
    return fixture.make(pattern, flags)  # type: ignore[no-any-return]


def test_a_kept_pattern_is_made_from_its_program_and_matches_as_re_compiles_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cortex.store  # noqa: F401 - installs the cache

    monkeypatch.setattr(codecache, "_programs", {})
    monkeypatch.setattr(codecache, "_programs_used", set())
    monkeypatch.setattr(codecache, "_added", 0)
    for pattern, flags in PATTERNS:
        first = _compile_as_ours(pattern, flags)
        assert (pattern, int(flags)) in codecache._held_programs()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(codecache._parser, "parse", None)  # nothing parsed: from the program
            again = _compile_as_ours(pattern, flags)
        plain = codecache._compile_pattern(pattern, flags)
        _same_pattern(first, plain)
        _same_pattern(again, plain)
    assert codecache._added == len(PATTERNS)
    # A damaged program (``_sre`` checks the code) is compiled again, and replaced.
    key = (PATTERNS[1][0], 0)
    flags, code, groups, groupindex, indexgroup = marshal.loads(codecache._programs[key])
    damaged = (flags, [99999, *code], groups, groupindex, indexgroup)
    codecache._programs[key] = marshal.dumps(damaged)
    _same_pattern(_compile_as_ours(*key), codecache._compile_pattern(*key))
    assert marshal.loads(codecache._programs[key])[1] == code


def test_only_constant_patterns_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Cortex module's patterns and any module's top-level ones are constants; what another
    package's function compiles (from its input, perhaps) is compiled as always."""
    import cortex.store  # noqa: F401 - installs the cache

    monkeypatch.setattr(codecache, "_programs", {})
    monkeypatch.setattr(codecache, "_programs_used", set())
    monkeypatch.setattr(codecache, "_added", 0)
    assert re._compiler.compile is codecache.compile_pattern  # type: ignore[attr-defined]
    other = types.ModuleType("elsewhere")
    source = "import re\ndef search(p):\n    return re.compile(p)\nTOP = re.compile('top-[0-9]')\n"
    exec(source, vars(other))
    other.search("inner-[0-9]+")
    assert list(codecache._programs) == [("top-[0-9]", 0)]
    assert codecache.compile_pattern("theirs-[0-9]").match("theirs-1")  # (this test's call)
    assert _compile_as_ours("ours-[0-9]").match("ours-1")
    assert list(codecache._programs) == [("top-[0-9]", 0), ("ours-[0-9]", 0)]


def test_a_full_piece_keeps_what_this_process_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecache, "MAX_PROGRAMS", 3)
    monkeypatch.setattr(codecache, "_programs_used", set())
    monkeypatch.setattr(codecache, "_added", 0)
    monkeypatch.setattr(codecache, "_programs", {})
    for n in range(3):
        _compile_as_ours(f"old{n}")
    monkeypatch.setattr(codecache, "_programs_used", set())  # another process: none used yet
    _compile_as_ours("old1")
    _compile_as_ours("new")
    assert list(codecache._programs) == [("old1", 0), ("new", 0)]


def test_saved_programs_load_back_and_bad_ones_are_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "methods.bin"
    good = marshal.dumps(codecache._program(*PATTERNS[0]))
    bad = {
        ("bad", 0): marshal.dumps((0, "not a list", 0, {}, ())),
        ("short", 0): marshal.dumps((0,)),
        ("cut", 0): good[:-3],
    }
    held = {(PATTERNS[0][0], 2): good, **bad, ("not bytes", 0): (0,), (1, 0): good}
    path.write_bytes(codecache.dump({codecache.PROGRAMS: marshal.dumps(held)}))
    data, places = codecache.load(str(path))
    start, end = places[codecache.PROGRAMS]
    decoded = codecache._decode_programs(data.piece(start, end))
    assert decoded == {(PATTERNS[0][0], 2): good, **bad}  # each program checked when used
    assert codecache._decode_programs(b"\xff") == {}
    assert codecache._decode_programs(marshal.dumps([1])) == {}
    monkeypatch.setattr(codecache, "_programs", decoded)
    monkeypatch.setattr(codecache, "_programs_used", set())
    assert codecache._from_program((PATTERNS[0][0], 2)) is not None
    for key in bad:
        assert codecache._from_program(key) is None  # damaged: dropped, compiled again
    assert list(decoded) == [(PATTERNS[0][0], 2)]


def test_a_second_process_parses_none_of_the_engines_patterns() -> None:
    code = (
        "import re, sys\n"
        "import cortex.config\n"
        "parsed = []\n"
        "parse = re._parser.parse\n"
        "re._parser.parse = lambda *a: parsed.append(a[0]) or parse(*a)\n"
        "import cortex.adapters.hooks.dispatch, cortex.core.retrieval, cortex.core.redaction\n"
        "cortex.core.redaction.redact('password=hunter2hunter2 and ghp_' + 'a' * 36)\n"
        "print(len(parsed))\n"
    )
    assert _second_run(code) == ["0"]


STAND_IN_RE = """
import sys
import cortex.adapters.hooks.dispatch, cortex.core.redaction, json
from cortex import bytecode, codecache
re = sys.modules["re"]
print(re.compile is codecache._re_compile, "enum" in sys.modules, "re._parser" in sys.modules)
print(json.loads('{"a": [1, 2.5e3, "x\\\\u00e9"]}'), json.dumps({"b": "\\\\u00e9\\\\n"}))
print(cortex.core.redaction.redact("password=hunter2hunter2 and ghp_" + "a" * 36))
words = re.compile(r"(?P<w>[a-z]+)-(\\\\d+)", re.I)  # a Cortex module's: a held program
print(words.groupindex["w"], words.findall("Ab-1 cd-22"), re.sub(r"\\\\s+", " ", "a \\\\t b"))
print(re.split(r"[,;]", "a,b;c", 1), re.search("b+", "abbc").span(), re.fullmatch("x", "x"))
print([m.span() for m in re.finditer("o", "foo")], re.subn("o", "0", "foo"), re.escape("a.b"))
print(re.compile is codecache._re_compile, words.sub(r"\\2", "ab-7"), "enum" in sys.modules)
import pickle  # (its own names' listing compiles a pattern: by the real re)
print(pickle.loads(pickle.dumps(words)) == words, re.compile is codecache._re_compile)
print(re.error.__name__, re.IGNORECASE, re.compile is sys.modules["re"].compile)
import re._compiler
print(re._compiler.compile is codecache.compile_pattern)
"""


def test_re_is_a_stand_in_until_something_needs_more_than_held_programs() -> None:
    """Where nothing imported ``re`` before the engine (the hook client), ``re`` is a stand-in
    that makes constant patterns from their held programs: ``enum`` and ``re``'s parser are
    not loaded. Any other name loads the real ``re``, which takes the stand-in's place."""
    out = _second_run(STAND_IN_RE.replace("\\\\", "\\"))
    text = " ".join(out)
    assert out[:3] == ["True", "False", "False"]  # the stand-in, no enum, no parser
    assert "{'a': [1, 2500.0, 'xé']} {\"b\": \"\\u00e9\\n\"}" in text
    assert "hunter2" not in text and "ghp_aaaa" not in text and "[REDACTED" in text
    assert "1 [('Ab', '1'), ('cd', '22')] a b" in text
    assert "['a', 'b;c'] (1, 3) <re.Match object; span=(0, 1), match='x'>" in text
    assert "[(1, 2), (2, 3)] ('f00', 2) a\\.b" in text
    # a template: ``_sre`` calls ``re._subx`` back, which loads the real ``re``
    # (``re.error`` is named ``PatternError`` from Python 3.13)
    error = re.error.__name__
    assert text.endswith(f"True 7 True True False {error} re.IGNORECASE True True")


def test_the_stand_in_s_flags_and_escape_are_re_s(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in codecache.FLAGS.items():
        assert int(getattr(re, name)) == value, name
    every = "".join(map(chr, range(256))) + "é€"
    assert codecache._re_escape(every) == re.escape(every)
    assert codecache._re_escape(bytes(range(256))) == re.escape(bytes(range(256)))


def test_a_stand_in_s_pattern_from_elsewhere_is_compiled_by_the_real_re(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What another package's function compiles (from its input, perhaps) is not looked up:
    the real ``re`` compiles it, and its compiler keeps nothing."""
    monkeypatch.setattr(codecache, "_programs", {})
    monkeypatch.setattr(codecache, "_programs_used", set())
    monkeypatch.setattr(codecache, "_served", {})
    monkeypatch.setattr(codecache, "_added", 0)
    monkeypatch.setattr(codecache, "_load_re", lambda name: getattr(re, name))
    other = types.ModuleType("elsewhere")
    exec("def search(p):\n    return re.compile(p)\n", vars(other))
    other.re = types.SimpleNamespace(compile=codecache._re_compile)  # type: ignore[attr-defined]
    assert other.search("inner-[0-9]+").match("inner-12")
    assert codecache._programs == {} and codecache._served == {}
    assert _compile_as_ours("ours-[0-9]").match("ours-1")  # (through the real compiler)
    assert list(codecache._programs) == [("ours-[0-9]", 0)]
