"""A scheduler address that is absent, silent or hostile (issue 53, item 1): one line within the
connection timeout (``BENANZA_CONNECT_TIMEOUT``, 3 s here), Ctrl-C stops a waiting ``run --cluster``
within 5 s, an empty or malformed address is refused before anything starts (no local run, no
``dask-scratch-space``). The servers run on 127.0.0.1 in this process, each for at most a minute."""
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")  # the `test` extra installs it (pyproject.toml)

from conftest import make_fake_suite  # noqa: E402

from benanza.database.store import open_db  # noqa: E402
from benanza.errors import UsageError  # noqa: E402
from benanza.runner import cluster as C  # noqa: E402
from benanza.runner.run import RunOptions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 3.0
LIFE_S = 60.0  # every server here stops by itself after this


def _raw_server(answer: bytes | None):
    """A TCP server on 127.0.0.1 that accepts and then says nothing (``answer`` None) or sends
    ``answer`` at once and keeps the connection open. Returns (port, accepted connections count)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    s.settimeout(0.2)
    accepted = []

    def serve():
        end = time.monotonic() + LIFE_S
        while time.monotonic() < end:
            try:
                c, _ = s.accept()
            except OSError:
                continue
            accepted.append(c)
            if answer is not None:
                try:
                    c.sendall(answer)
                except OSError:
                    pass
        for c in accepted:
            c.close()
        s.close()

    threading.Thread(target=serve, daemon=True).start()
    return s.getsockname()[1], accepted


def _http_server():
    """Python's http.server on 127.0.0.1, shut down after LIFE_S."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    threading.Timer(LIFE_S, srv.shutdown).start()
    return srv.server_address[1]


@pytest.fixture
def short_timeout(monkeypatch):
    monkeypatch.setenv("BENANZA_CONNECT_TIMEOUT", str(TIMEOUT_S))


@pytest.mark.parametrize("kind", ["silent", "http.server", "HTTP/1.1 at once"])
def test_a_silent_or_hostile_scheduler_is_one_line_within_the_timeout(kind, short_timeout):
    if kind == "silent":
        port, _ = _raw_server(None)
    elif kind == "http.server":
        port = _http_server()
    else:
        port, _ = _raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n" + b"\xff" * 64)
    addr = f"tcp://127.0.0.1:{port}"
    t = time.monotonic()
    conn = C.ClusterConnection(addr)
    with pytest.raises(UsageError) as e:
        conn.client()
    took = time.monotonic() - t
    conn.close()
    msg = str(e.value)
    assert msg.startswith(f"--cluster {addr}: ") and "\n" not in msg, msg
    assert "scheduler" in msg
    print(f"{kind}: one line after {took:.2f} s")
    assert took < TIMEOUT_S + 3, f"{kind}: {took:.1f} s"


def test_the_connect_timeout_is_checked(monkeypatch):
    for bad in ("abc", "0", "-5", "nan", "inf"):
        monkeypatch.setenv("BENANZA_CONNECT_TIMEOUT", bad)
        with pytest.raises(UsageError, match=r"^BENANZA_CONNECT_TIMEOUT"):
            C.connect_timeout()
    monkeypatch.setenv("BENANZA_CONNECT_TIMEOUT", "7.5")
    assert C.connect_timeout() == 7.5
    monkeypatch.delenv("BENANZA_CONNECT_TIMEOUT")
    assert C.connect_timeout() == C.CONNECT_TIMEOUT_S == 30.0


@pytest.mark.parametrize("addr", ["", "  ", "tcp://", "tcp://127.0.0.1", "tcp://127.0.0.1:notaport",
                                  "tcp://127.0.0.1:99999", "tcp://127.0.0.1:-1", "tcp://:8786", "http://h:80",
                                  "tcp://a b:80", "tcp://127.0.0.1:80/x", "tls://h:80"])
def test_an_empty_or_malformed_address_is_refused(addr, fake_suite, tmp_path):
    """``--cluster ''`` is an error, never a silent local run; so is an address without a port."""
    with pytest.raises(UsageError, match=r"^--cluster "):
        C.check_address(addr)
    db = open_db(f"sqlite:///{tmp_path / 'x.db'}")
    from benanza.generation.generator import load_suite

    with pytest.raises(UsageError, match=r"^--cluster "):
        C.run_cluster(load_suite(fake_suite), db, addr, RunOptions())
    with pytest.raises(UsageError, match=r"^--cluster "):
        C.ClusterConnection(addr)


def test_good_addresses_pass():
    for addr in ("tcp://127.0.0.1:8786", "tcp://10.0.0.1:1", "host.example:65535", "tcp://[::1]:8786",
                 "127.0.0.1:8786", "local"):
        assert C.check_address(addr) == addr


@pytest.mark.parametrize("addr", ["", "tcp://127.0.0.1:notaport", "tcp://127.0.0.1:70000", "nohost", "tcp://:1"])
def test_a_worker_with_a_malformed_scheduler_is_one_line_and_leaves_nothing(addr, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = C.WorkerSpec("w0", "GPU_A", {"CUDA_VISIBLE_DEVICES": "none"})
    with pytest.raises(UsageError, match=r"^--scheduler "):
        C.serve_workers(addr, [spec])
    assert list(tmp_path.iterdir()) == []


def test_a_worker_with_a_silent_scheduler_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, short_timeout):
    port, _ = _raw_server(None)
    monkeypatch.chdir(tmp_path)
    spec = C.WorkerSpec("w0", "GPU_A", {"CUDA_VISIBLE_DEVICES": "none"})
    t = time.monotonic()
    with pytest.raises(UsageError, match=rf"^--scheduler tcp://127\.0\.0\.1:{port}: "):
        C.serve_workers(f"tcp://127.0.0.1:{port}", [spec])
    assert time.monotonic() - t < TIMEOUT_S + 3
    assert list(tmp_path.iterdir()) == []


def _cli(args, env_extra, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_extra)
    return subprocess.Popen([sys.executable, "-m", "benanza", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def test_run_cluster_at_a_responder_exits_2_with_one_line(fake_suite, tmp_path):
    """The HTTP/1.1 responder once gave exit 70 "MemoryError: Unable to allocate 3.07 EiB"."""
    port, _ = _raw_server(b"HTTP/1.1 200 OK\r\n\r\n" + b"\x31" * 64)
    p = _cli(["run", str(fake_suite), "--db", str(tmp_path / "r.db"), "--cluster", f"tcp://127.0.0.1:{port}"],
             {"BENANZA_CONNECT_TIMEOUT": str(TIMEOUT_S)})
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"benanza: --cluster tcp://127.0.0.1:{port}: "), err


def test_ctrl_c_stops_run_cluster_waiting_for_a_silent_scheduler(fake_suite, tmp_path):
    """Ctrl-C (SIGINT) while the connection waits (a 60 s timeout): the process ends within 5 s."""
    port, accepted = _raw_server(None)
    p = _cli(["run", str(fake_suite), "--db", str(tmp_path / "r.db"), "--cluster", f"tcp://127.0.0.1:{port}"],
             {"BENANZA_CONNECT_TIMEOUT": "60"})
    t = time.monotonic()
    while not accepted and time.monotonic() - t < 30:  # it is connected and waiting for an answer
        time.sleep(0.05)
    assert accepted, "the client never connected"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    t = time.monotonic()
    try:
        out, err = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("Ctrl-C did not stop `run --cluster` within 5 s")
    took = time.monotonic() - t
    print(f"SIGINT to exit: {took:.2f} s")
    assert p.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err, err
    assert took < 5
