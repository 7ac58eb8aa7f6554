"""Client mode against a real HTTP peer (``fake_server``): transport, spooling, drains."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cortex.clock import FixedClock
from cortex.config import load_config
from cortex.errors import ConfigError, UnavailableError
from cortex.services.app import Services
from cortex.services.remote.app import RemoteServices
from fake_server import Peer, serve
from test_hooks import child_env

KEY = "ctx_k1_s3cret"


def client(home: Path, url: str, timeout: float = 0.5) -> RemoteServices:
    env = {
        "CORTEX_SERVER": url,
        "CORTEX_API_KEY": KEY,
        "CORTEX_SERVER_TIMEOUT_SECONDS": str(timeout),
    }
    services = Services.open(load_config(home, env), FixedClock("2026-01-01T00:00:00Z"))
    assert isinstance(services, RemoteServices)
    return services


def journal_lines(home: Path) -> list[dict[str, object]]:
    path = home / "spool" / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def free_url() -> str:
    with serve() as (url, _):
        pass
    return url  # nothing listens there any more


def test_start_turn_end_reach_the_server_over_one_kept_alive_connection(home: Path) -> None:
    with serve() as (url, peer):
        app = client(home, url)
        restored = app.sessions.on_session_start("s1", "claude-code", project="p")
        app.sessions.capture.record("s1", text="hello")
        ended = app.sessions.on_session_end("s1")
        app.close()
    assert restored.preamble == "restored s1"
    assert ended.end_time is not None
    assert peer.paths() == ["/v1/sessions/start", "/v1/sessions/s1/turns", "/v1/sessions/end"]
    assert len({r["port"] for r in peer.requests}) == 1  # keep-alive: one connection
    assert all(r["auth"] == f"Bearer {KEY}" for r in peer.requests)
    ids = [r["body"]["request_id"] for r in peer.requests]
    assert len(set(ids)) == 3 and all(len(i) == 32 for i in ids)


def test_server_down_spools_and_a_start_is_cold(home: Path) -> None:
    app = client(home, free_url())
    restored = app.sessions.on_session_start("s1", "cli")
    app.sessions.capture.record("s1", text="token=sk-live-abcdefghijklmnop1234")
    assert restored.preamble is None and restored.session_id == "s1"
    lines = journal_lines(home)
    assert [line["path"] for line in lines] == ["/v1/sessions/start", "/v1/sessions/s1/turns"]
    assert "sk-live-abcdefghijklmnop1234" not in (home / "spool" / "journal.jsonl").read_text()
    assert (home / "spool").stat().st_mode & 0o777 == 0o700
    assert (home / "spool" / "journal.jsonl").stat().st_mode & 0o777 == 0o600


def test_a_start_waiting_in_the_journal_means_open_and_a_second_is_spooled_too(
    home: Path,
) -> None:
    app = client(home, free_url())
    app.sessions.on_session_start("s1", "cli")
    again = app.sessions.on_session_start("s1", "cli")  # a resume: sent online, so kept
    state = app.sessions.get_session("s1")
    assert again.preamble is None
    assert state is not None and state.is_open and state.session_id == "s1"
    assert [line["path"] for line in journal_lines(home)] == ["/v1/sessions/start"] * 2
    with pytest.raises(UnavailableError):
        app.sessions.get_session("never-started")


def test_a_hooks_reopen_waiting_in_the_journal_is_the_servers_to_decide(home: Path) -> None:
    """A reopen with ``keep_ended`` (a hook's, offline) is kept once a stretch, and the
    session it names reads as unknown (the server decides) until a start or an end follows."""
    app = client(home, free_url())
    for _ in range(2):
        app.sessions.on_session_start("s1", "claude-code", keep_ended=True)
    assert [line["body"].get("keep_ended") for line in journal_lines(home)] == [True]
    with pytest.raises(UnavailableError):
        app.sessions.get_session("s1")
    app.sessions.on_session_start("s1", "cli")  # an explicit start is never folded into it
    state = app.sessions.get_session("s1")
    assert state is not None and state.is_open
    app.sessions.on_session_end("s1")
    ended = app.sessions.get_session("s1")
    assert ended is not None and ended.ended_normally
    assert [line["path"].rsplit("/", 1)[-1] for line in journal_lines(home)] == [
        "start", "start", "end"
    ]  # fmt: skip


@pytest.mark.parametrize("mode", ["500", "429"])
def test_5xx_and_429_spool(home: Path, mode: str) -> None:
    with serve(Peer(mode=mode)) as (url, _):
        client(home, url).sessions.capture.record("s1", text="x")
    assert [line["path"] for line in journal_lines(home)] == ["/v1/sessions/s1/turns"]


def test_a_slow_server_times_out_spools_and_is_not_waited_for_again(home: Path) -> None:
    with serve(Peer(mode="slow", slow_seconds=3)) as (url, _):
        app = client(home, url, timeout=0.3)
        began = time.monotonic()
        app.sessions.capture.record("s1", text="one")
        app.sessions.capture.record("s1", text="two")  # fails fast: the server just failed
        elapsed = time.monotonic() - began
    assert elapsed < 1.5
    assert len(journal_lines(home)) == 2


def test_401_is_one_line_naming_the_key_and_never_shows_it(home: Path) -> None:
    with serve(Peer(mode="401")) as (url, _):
        with pytest.raises(ConfigError) as caught:
            client(home, url).sessions.list_pins("s1")
    message = str(caught.value)
    assert "\n" not in message and "CORTEX_API_KEY" in message and "s3cret" not in message
    assert "journal" not in message  # a read: nothing was kept
    with serve(Peer(mode="401")) as (url, _):
        with pytest.raises(ConfigError) as caught:
            client(home, url).sessions.capture.record("s1", text="a write")
    assert str(caught.value).endswith(  # a write: kept, and said so
        "; the write waits in the local journal: fix the key, then `cortex sync`"
    )
    assert len(journal_lines(home)) == 1


def test_the_next_call_drains_the_journal_first_in_order_and_replays_dedupe(home: Path) -> None:
    dead = free_url()
    app = client(home, dead)
    app.sessions.on_session_start("s1", "cli")
    for n in range(3):
        app.sessions.capture.record("s1", text=f"turn {n}")
    spooled = [line["body"]["request_id"] for line in journal_lines(home)]
    port = int(dead.rsplit(":", 1)[1])
    with serve(port=port) as (url, peer):
        peer.applied.append(str(spooled[0]))  # the start had reached it before the timeout
        app = client(home, url)
        app.sessions.capture.record("s1", text="live")
    paths = peer.paths()
    assert paths == ["/v1/sessions/start"] + ["/v1/sessions/s1/turns"] * 4
    assert [r["body"]["request_id"] for r in peer.requests[:4]] == spooled
    assert peer.applied == spooled + [peer.requests[4]["body"]["request_id"]]  # each once
    assert journal_lines(home) == []


def test_a_permanent_rejection_moves_aside_and_the_drain_goes_on(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = free_url()
    app = client(home, dead)
    app.sessions.capture.record("bad", text="x")
    app.sessions.capture.record("s1", text="y")
    port = int(dead.rsplit(":", 1)[1])
    with serve(Peer(reject={"/v1/sessions/bad/turns"}), port=port) as (url, peer):
        report = client(home, url).sync()
    assert (report.sent, report.left, report.rejected) == (1, 0, 1)
    assert peer.applied == [
        journal_body["request_id"] for journal_body in [peer.requests[1]["body"]]
    ]
    rejected = (home / "spool" / "rejected.jsonl").read_text().splitlines()
    assert len(rejected) == 1 and "bad input" in json.loads(rejected[0])["error"]
    assert "rejected for good" in caplog.text


def test_an_outage_logs_one_line_where_no_answer_reports_it(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Python caller (nothing answers its queued writes): the first write of an outage,
    the one that finds the journal empty, logs one line naming `cortex sync`; the writes
    behind it, in this process or another, log nothing. Once the journal was delivered, the
    next outage logs its line again."""
    caplog.set_level("WARNING", logger="cortex")
    dead = free_url()
    for text in ("one", "two"):  # two processes' worth of clients
        app = client(home, dead)
        app.sessions.capture.record("s1", text=text)
        app.sessions.capture.record("s1", text=text + " more")
    lines = [r.getMessage() for r in caplog.records if r.name == "cortex.remote"]
    assert len(lines) == 1 and lines[0].startswith(f"server {dead} is unavailable (")
    assert "`cortex sync`" in lines[0]
    port = int(dead.rsplit(":", 1)[1])
    with serve(port=port) as (url, _):
        assert client(home, url).sync().left == 0
    caplog.clear()
    client(home, dead).sessions.capture.record("s1", text="three")
    assert len([r for r in caplog.records if r.name == "cortex.remote"]) == 1


def test_an_answer_that_reports_queued_writes_is_the_only_report(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="cortex")
    app = client(home, free_url()).answers_queued()
    app.sessions.capture.record("s1", text="offline")
    assert app.queued() is not None and caplog.records == []


def test_sync_reports_what_is_left_while_the_server_is_down(home: Path) -> None:
    app = client(home, free_url())
    app.sessions.capture.record("s1", text="x")
    report = client(home, app.client.transport.url).sync()
    assert (report.sent, report.left, report.rejected) == (0, 1, 0)
    assert report.error is not None


def test_operations_the_contract_lacks_name_the_local_store(home: Path) -> None:
    app = client(home, free_url())
    with pytest.raises(ConfigError) as refused:
        app.sessions.detect_and_recover_crashed("")
    assert str(refused.value) == (  # the store method it reached ("transaction") is not named
        "this operation is not in the team server's API and needs a local store, and this home "
        f"is a client of {app.client.transport.url}; unset CORTEX_SERVER (server_url) to run it "
        "on the local database"
    )
    with pytest.raises(UnavailableError):
        app.sessions.get_session("s1")


def test_config_show_masks_the_key() -> None:
    config = load_config(Path("/tmp/h"), {"CORTEX_API_KEY": KEY, "CORTEX_SERVER": "http://x"})
    assert config.as_dict()["api_key"] == "ctx_k1_****"
    assert "s3cret" not in repr(config)
    assert config.as_dict(reveal=True)["api_key"] == KEY


OTHER_KEY = "ctx_0123456789ab_" + "S" * 40


def test_a_write_is_only_ever_sent_with_the_server_and_key_it_was_written_for(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = free_url()
    client(home, dead).sessions.capture.record("s1", text="acme's roadmap")
    (line,) = journal_lines(home)
    assert (line["server"], line["key"]) == (dead, "sha256:" + line["key"][7:])
    assert len(str(line["key"])) == 23 and "s3cret" not in json.dumps(line)
    port = int(dead.rsplit(":", 1)[1])
    with serve(port=port) as (url, peer):
        other = Services.open(
            load_config(home, {"CORTEX_SERVER": url, "CORTEX_API_KEY": OTHER_KEY}),
            FixedClock("2026-01-01T00:00:00Z"),
        )
        assert isinstance(other, RemoteServices)
        report = other.sync()  # another tenant's key: set aside, never sent
        other.sessions.capture.record("s2", text="the other tenant's turn")
        assert peer.paths() == ["/v1/sessions/s2/turns"]
        assert peer.requests[0]["auth"] == f"Bearer {OTHER_KEY}"
        assert (report.sent, report.left, report.held) == (0, 0, 1)
        assert "1 write(s) in spool/held.jsonl were made for key sha256:" in caplog.text
        assert OTHER_KEY not in (home / "spool" / "held.jsonl").read_text()
        back = client(home, url).sync()  # its own key again: delivered
    assert (back.sent, back.left, back.held) == (1, 0, 0)
    assert peer.paths()[1:] == ["/v1/sessions/s1/turns"]
    assert peer.requests[1]["auth"] == f"Bearer {KEY}"
    assert (home / "spool" / "held.jsonl").read_text() == ""


def test_a_credential_in_a_pin_label_is_redacted_before_the_journal_and_the_echo(
    home: Path,
) -> None:
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    app = client(home, free_url())
    pinned = app.sessions.add_pin(f"gh {token}", f"use {token}", "s1")
    removed = app.sessions.remove_pin(f"gh {token}", "s1")
    assert pinned.label == removed.label == "gh [REDACTED]"
    assert token not in pinned.content
    journal = (home / "spool" / "journal.jsonl").read_text()
    assert token not in journal
    assert [line["path"] for line in journal_lines(home)] == [
        "/v1/sessions/s1/pins/gh%20%5BREDACTED%5D"
    ] * 2


def cortex(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in client mode of ``url``."""
    env = child_env(home, CORTEX_SERVER=url, CORTEX_API_KEY=KEY)
    return subprocess.run(
        [sys.executable, "-m", "cortex.entry", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_credentials_in_the_server_url_are_never_shown(home: Path) -> None:
    url = "http://admin:S3cretPassw0rd@127.0.0.1:9/?token=S3cretTok"
    app = client(home, url)
    assert app.client.transport.url == "http://127.0.0.1:9"
    assert app.client.journal.target["server"] == "http://127.0.0.1:9"
    config = load_config(home, {"CORTEX_SERVER": url})
    assert config.as_dict()["server_url"] == "http://admin:****@127.0.0.1:9/?****"
    assert "S3cret" not in repr(config)
    synced = cortex(home, url, "--json", "sync")
    shown = cortex(home, url, "config", "show")
    assert synced.returncode == 0 and json.loads(synced.stdout)["server"] == "http://127.0.0.1:9"
    assert "admin:****@127.0.0.1:9/?****" in shown.stdout
    assert "S3cret" not in synced.stdout + synced.stderr + shown.stdout + shown.stderr


def test_the_session_manager_opened_in_client_mode_goes_to_the_server(home: Path) -> None:
    from cortex import SessionPersistenceManager
    from cortex.services.memory import MemoryService

    with serve() as (url, peer):
        config = load_config(home, {"CORTEX_SERVER": url, "CORTEX_API_KEY": KEY})
        with SessionPersistenceManager.open(config) as manager:
            restored = manager.on_session_start("s1", project="api")
        with pytest.raises(ConfigError, match=r"^MemoryService.open .* use Services.open\("):
            MemoryService.open(config)
    assert restored.preamble == "restored s1"
    assert peer.paths() == ["/v1/sessions/start"]
    assert not (home / "brain.db").exists()  # no local database beside the server


def test_a_refused_key_is_said_even_while_older_writes_wait(home: Path) -> None:
    dead = free_url()
    client(home, dead).sessions.capture.record("s1", text="offline")
    port = int(dead.rsplit(":", 1)[1])
    with serve(Peer(mode="401"), port=port) as (url, peer):
        with pytest.raises(ConfigError, match="refused the request \\(401\\).*CORTEX_API_KEY") as e:
            client(home, url).sessions.capture.record("s1", text="with a wrong key")
    assert str(e.value).endswith(
        "; the write waits in the local journal: fix the key, then `cortex sync`"
    )
    assert peer.paths() == ["/v1/sessions/s1/turns"]  # the oldest, refused: the drain stopped
    assert len(journal_lines(home)) == 2  # both kept for when the key is fixed


def test_commands_whose_writes_wait_in_the_journal_say_so_not_zeros(home: Path) -> None:
    url = free_url()
    session = ("--session-id", "s1")

    def queued(waiting: int, what: str = "") -> str:
        return (
            f"queued for the server {url} (not reachable now): {what}{waiting} write(s) waiting "
            "in the journal; `cortex sync` delivers them\n"
        )

    # a start says what it queued, and nothing else: not also that the session started
    started = cortex(home, url, "session", "start", *session)
    assert (started.returncode, started.stdout) == (0, queued(1, (
        "the start of session s1, which exists there once delivered (no preamble could be "
        "restored offline); "
    )))  # fmt: skip
    assert started.stderr == ""  # the answer is the one report: no log line beside it
    commands = [
        ("pin", "add", "lab", "the rig is on COM7", *session),
        ("session", "record", "--text", "tuning the antenna", *session),
        ("session", "checkpoint", "--summary", "tuned", *session),
        ("session", "event", "we keep SQLite", *session),
        ("session", "continue", "s0", *session),
        ("pin", "remove", "lab", *session),
        ("memory", "add", "The lab rig is on COM7"),
        ("task", "add", "t-1", "Draft"),
        ("task", "done", "t-1"),
        ("session", "end", *session),
    ]
    for waiting, command in enumerate(commands, start=2):
        result = cortex(home, url, *command)
        assert (result.returncode, result.stdout, result.stderr) == (0, queued(waiting), ""), (
            command,
            result,
        )
    ended = cortex(home, url, "--json", "session", "end", *session)
    assert (ended.returncode, ended.stderr) == (0, "")
    assert json.loads(ended.stdout)["queued"] == {
        "server": url, "writes": 1, "waiting": len(commands) + 2, "deliver": "cortex sync"
    }  # fmt: skip
    fresh = cortex(home, url, "--json", "session", "start", "--session-id", "s2")
    again = json.loads(fresh.stdout)
    assert (again["session_id"], again["preamble"], again["queued"]["waiting"]) == (
        "s2",
        None,
        len(commands) + 3,
    )
    assert len(journal_lines(home)) == len(commands) + 3
    with serve() as (live, peer):  # a server that takes the writes: no queued field
        answer = json.loads(cortex(home, live, "--json", "session", "start", "--session-id",
                                   "s3").stdout)  # fmt: skip
    assert "queued" not in answer and peer.paths() == ["/v1/sessions/start"]


def test_a_server_that_answers_a_byte_at_a_time_is_bounded_by_the_whole_timeout(
    home: Path,
) -> None:
    """Each byte came within the socket's timeout, so a request (and the hook making it) was
    held for as long as the server (or a proxy) kept dripping: the timeout bounds the whole
    request now, and the write is kept in the journal."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not stop.wait(0.1):
                try:
                    conn.sendall(b"X")  # a header line that never ends
                except OSError:
                    return

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    try:
        app = client(home, f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=0.5)
        began = time.monotonic()
        app.sessions.capture.record("s1", text="one")
        elapsed = time.monotonic() - began
    finally:
        stop.set()
        listener.close()
    assert elapsed < 2.0
    assert [line["path"] for line in journal_lines(home)] == ["/v1/sessions/s1/turns"]
