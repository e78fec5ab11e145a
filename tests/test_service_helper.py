"""harness/service.py's ``Service`` always reaps its ``status-store serve``: stopped in time, or killed and waited for
when it does not stop (a SIGSTOPped process, the real stuck one), and by a ``with`` block however the block ends; once
the process has exited, its output is all of what it wrote, however late the threads that read it run."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from harness import free_port
from harness.service import Service


def test_a_service_that_does_not_stop_is_killed_and_reaped() -> None:
    with Service("--port", str(free_port()), stop_wait=2.0) as service:
        service.wait_for("Uvicorn running on")
        os.kill(service.process.pid, signal.SIGSTOP)
        with pytest.raises(AssertionError, match="did not stop within the bound"):
            service.stop()
        assert service.process.returncode == -signal.SIGKILL
        assert not Path(f"/proc/{service.process.pid}").exists()  # no zombie left


def test_a_with_block_reaps_the_service_whatever_happens_in_it() -> None:
    started: list[Service] = []

    def a_failing_test() -> None:
        with Service("--port", str(free_port())) as service:
            started.append(service)
            service.wait_for("Uvicorn running on")
            raise RuntimeError("the test failed")

    with pytest.raises(RuntimeError, match="the test failed"):
        a_failing_test()
    assert started[0].process.returncode == 0  # SIGTERM first: a clean stop
    assert not Path(f"/proc/{started[0].process.pid}").exists()


def test_a_stopped_service_is_only_waited_for() -> None:
    with Service("--port", str(free_port())) as service:
        service.wait_for("Uvicorn running on")
        assert service.stop() == 0
    assert service.process.returncode == 0


def test_the_output_of_an_exited_service_is_all_it_wrote_however_late_its_readers_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each reader thread runs late, as a thread of a busy test process does: 2 s after reading each line, it hands it
    # on. The output read at once after the exit used to miss the process's last lines (a whole-suite run of
    # test_stop_bound missed the store's last line, the one it looks for).
    def late_pump(self: Service, stream: Iterable[str]) -> None:
        for line in stream:
            time.sleep(2.0)
            self.lines.put(line)

    monkeypatch.setattr(Service, "_pump", late_pump)
    with Service("--config", "/nonexistent/sidecar.properties") as service:
        assert service.process.wait(30.0) == 2
        said = service.output()
    assert [line for line in said if "cannot read the file" in line] != [], said
