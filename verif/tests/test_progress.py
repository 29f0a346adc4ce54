"""Long commands say what they do while they work (issue 24, item 5): ``spartan estimate``
prints its header before the work and a per-layer progress line on a terminal only (stderr;
nothing when piped, as tqdm with ``disable=None``); ``spartan sim`` says what it builds and how
long the build and the run took (verif/tests/test_cli.py, test_sim_ends_with_pass_or_fail, and
verif/tests/test_wheel.py check that on real runs)."""

import io
import os
import pty
import select
import subprocess
import sys

from spartan_rtl.progress import Progress, on_terminal
from verif.flows import ROOT

TRACE = ROOT / "data" / "traces" / "digits_cnn_epoch15.npz"
LAYERS = ("conv1", "conv2", "conv3")   # the trace's, data/traces/README.md


class FakeStream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_draws_on_a_terminal_and_erases_itself():
    stream = FakeStream(tty=True)
    with Progress(2, "estimating", stream) as bar:
        step = bar.counting("stream core")
        step("conv1")
        step("c2")
    text = stream.getvalue()
    assert text.startswith("\restimating: 0/2\restimating: 1/2 stream core, conv1")
    # The shorter label blanks what the longer one left; the end erases the whole line.
    assert "\restimating: 2/2 stream core, c2   \r" in text
    assert text.endswith("\r" + " " * len("estimating: 2/2 stream core, c2") + "\r")


def test_progress_silent_off_a_terminal():
    for stream in (FakeStream(tty=False), io.StringIO()):
        with Progress(3, "estimating", stream) as bar:
            bar.step("conv1")
        assert stream.getvalue() == ""
    closed = io.StringIO()
    closed.close()
    assert not on_terminal(closed) and not on_terminal(object())


def spartan_command(*args):
    return [sys.executable, "-m", "spartan_rtl.cli", *map(str, args)]


def test_estimate_piped_prints_no_progress():
    done = subprocess.run(spartan_command("estimate", TRACE), capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith(f"estimate: {TRACE}\n  GEMM k=64 ")
    assert "\r" not in done.stdout


def test_estimate_progress_on_a_terminal():
    """stderr on a pseudo-terminal: a counter per layer, stream core then layer engine, erased
    at the end; stdout (a pipe) holds the report only."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(spartan_command("estimate", TRACE), stdout=subprocess.PIPE,
                            stderr=follower, cwd=ROOT)
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:    # EIO: the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    report = proc.stdout.read().decode()
    assert proc.wait(timeout=300) == 0
    os.close(leader)
    steps = [f"stream core, {name}" for name in LAYERS] + \
        [f"layer engine, {name}" for name in LAYERS]
    text = drawn.decode()
    for i, label in enumerate(steps, 1):
        assert f"\restimating: {i}/6 {label}" in text, text
    assert text.endswith("\r" + " " * len("estimating: 6/6 layer engine, conv3") + "\r")
    assert report.startswith(f"estimate: {TRACE}\n") and "\r" not in report


def test_estimate_header_comes_before_the_work():
    """The header reaches a pipe while the estimate is still running: here the estimator
    waits for a line on stdin, which the test sends only after it has read the header."""
    stalled = ("import sys\n"
               "from spartan_rtl import cli\n"
               "from spartan_rtl import estimate\n"
               "real = estimate.estimate_trace\n"
               "def waiting(*args, **kwargs):\n"
               "    sys.stdin.readline()\n"
               "    return real(*args, **kwargs)\n"
               "estimate.estimate_trace = waiting\n"
               f"sys.exit(cli.main(['estimate', {str(TRACE)!r}]))\n")
    # Buffered as a user's pipe is: only a flush lets the header out before the end.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen([sys.executable, "-c", stalled], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "no header while the estimate runs"
        assert proc.stdout.readline().decode() == f"estimate: {TRACE}\n"
        assert proc.poll() is None    # still waiting: the header came first
    finally:
        out, err = proc.communicate(b"\n", timeout=300)
    assert proc.returncode == 0, err
    assert b"whole training step" in out
