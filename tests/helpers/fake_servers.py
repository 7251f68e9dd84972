"""Stand-ins for the local servers campaign starts: processes whose command lines look like them and that sleep."""

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from campaign_cli import local_api


@contextlib.contextmanager
def fake_kept_server(home: Path) -> Iterator[subprocess.Popen]:
    """A process that looks like a kept server (its command line names the app and a port) and sleeps."""
    home.mkdir(parents=True)
    port = 4
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", local_api.APP, "--port", str(port)],
        start_new_session=True,
    )
    info = {
        "pid": proc.pid,
        "port": port,
        "url": "http://127.0.0.1:4/api",
        "prefect": local_api.prefect_version(),
        "started_at": "now",
    }
    (home / "server.json").write_text(json.dumps(info))
    local_api._register(home)
    try:
        deadline = time.monotonic() + 30
        while not local_api._is_server(proc.pid, port) and time.monotonic() < deadline:
            time.sleep(0.01)  # the interpreter has not exec'd yet
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
