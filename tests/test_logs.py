"""``cortex.logs``: records as ``logging`` makes them, and ``logging`` imported only for one."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator

import pytest

from cortex.logs import configure, getLogger, routed


@pytest.fixture
def cortex_logger() -> Iterator[logging.Logger]:
    """The ``cortex`` logger, left as it was found."""
    logger = logging.getLogger("cortex")
    handlers, propagate, level = list(logger.handlers), logger.propagate, logger.level
    yield logger
    logger.handlers[:], logger.propagate = handlers, propagate
    logger.setLevel(level)


def test_a_record_is_logging_s_own_and_names_the_line_that_logged_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = getLogger("cortex.store")
    with caplog.at_level(logging.INFO, logger="cortex"):
        log.info("session %s read", "s1")
        line = sys._getframe().f_lineno - 1
        log.warning("session %s skipped", "s2")
        try:
            raise ValueError("bad row")
        except ValueError:
            log.exception("row of %s unreadable", "s3")
    info, warning, error = caplog.records
    assert (info.name, info.levelno, info.getMessage()) == ("cortex.store", 20, "session s1 read")
    assert (info.pathname, info.lineno, info.funcName) == (
        __file__,
        line,
        sys._getframe().f_code.co_name,
    )
    assert (warning.levelno, warning.lineno) == (logging.WARNING, line + 2)
    assert (error.levelno, error.lineno) == (logging.ERROR, line + 6) and error.exc_info
    assert error.exc_info[0] is ValueError and "bad row" in caplog.text


def test_a_routed_block_takes_cortex_warnings_and_leaves_the_rest(
    cortex_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []
    with caplog.at_level(logging.WARNING), routed(seen.append):
        getLogger("cortex.store").warning("mirror %s not written", "s1")
        getLogger("cortex").error("metrics not recorded")
        getLogger("cortex").info("recovered a session")  # under WARNING: nowhere
        logging.getLogger("other").warning("not ours")
    assert seen == ["mirror s1 not written", "metrics not recorded"]
    assert [r.getMessage() for r in caplog.records] == ["not ours"]  # ours did not propagate
    assert cortex_logger.propagate and cortex_logger.handlers == []  # as it was, after the block
    getLogger("cortex").warning("after the block")
    assert seen == ["mirror s1 not written", "metrics not recorded"]
    assert caplog.records[-1].getMessage() == "after the block"


LAZY = """
import sys
from cortex.logs import configure, getLogger, routed
configure(lambda: print("configured"))
seen = []
with routed(seen.append):
    log = getLogger("cortex.store")
print("logging" in sys.modules)
with routed(seen.append):
    log.warning("%s not written", "mirror")
print("logging" in sys.modules, seen)
import logging
print(logging.getLogger("cortex").handlers, logging.getLogger("cortex").propagate)
"""


def test_logging_is_imported_at_the_first_record_and_set_up_then() -> None:
    out = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "False",
        "configured",
        "True ['mirror not written']",
        "[] True",
    ]
    assert out.stderr == ""  # routed: not on stderr


def test_configure_runs_at_once_when_logging_is_imported(cortex_logger: logging.Logger) -> None:
    ran: list[str] = []
    configure(lambda: ran.append("now"))  # this process imported logging already
    assert ran == ["now"]


ROUTED_ONLY = """
import sys
from cortex.logs import getLogger, routed
seen = []
log = getLogger("cortex.store")
with routed(seen.append):
    log.debug("dropped %s", 1)
    log.info("dropped too")
    log.warning("incident: session %s interrupted (%s)", "s1", {"a": 1})
    log.error("%(what)s not written", {"what": "mirror"})
    log.warning("100% plain")
print("logging" in sys.modules, seen)
try:
    with routed(seen.append):
        log.warning("%d sessions", "not a number")  # fails in logging, as it always did
except TypeError as exc:
    print("logging" in sys.modules, seen[3:], exc)
"""


def test_a_routed_block_takes_records_without_importing_logging() -> None:
    """The records reach the block as ``logging`` would hand them on (the next test), and a
    start that recovers a crashed session imports no ``logging`` for its incident line."""
    out = subprocess.run(
        [sys.executable, "-c", ROUTED_ONLY], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    expected = [
        "incident: session s1 interrupted ({'a': 1})",
        "mirror not written",
        "100% plain",
    ]
    assert out.stdout.splitlines()[0] == f"False {expected}"
    assert out.stdout.splitlines()[1].startswith("True [] %d format")


def test_routed_records_read_the_same_with_logging_imported(cortex_logger: logging.Logger) -> None:
    seen: list[str] = []
    log = getLogger("cortex.store")
    with routed(seen.append):
        log.debug("dropped %s", 1)
        log.warning("incident: session %s interrupted (%s)", "s1", {"a": 1})
        log.error("%(what)s not written", {"what": "mirror"})
        log.warning("100% plain")
    assert seen == [
        "incident: session s1 interrupted ({'a': 1})",
        "mirror not written",
        "100% plain",
    ]
