"""A progress line for long work, drawn only on a terminal (``spartan estimate``'s layers).

The line goes to stderr, redrawn in place with carriage returns and erased when the work ends,
so stdout holds the report alone. When stderr is no terminal (a pipe, a file, a test's capture)
nothing is drawn, as tqdm does with ``disable=None``. Not tqdm itself: ``spartan estimate``
needs only the base install, and tqdm comes with the ``sim`` extra.
"""

from __future__ import annotations

import sys

__all__ = ["Progress", "on_terminal"]


def on_terminal(stream):
    """Whether ``stream`` is a terminal (a stream without ``isatty`` is not)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:    # a closed stream
        return False


class Progress:
    """``with Progress(total, what) as p: ... p.step(label)``: ``what: done/total label`` on
    ``stream`` (default stderr) if it is a terminal, else nothing."""

    def __init__(self, total, what, stream=None):
        self.total, self.what, self.done = total, what, 0
        self.stream = sys.stderr if stream is None else stream
        self.shown = on_terminal(self.stream)
        self._width = 0    # of the line drawn last, to blank what a shorter one leaves

    def step(self, label=""):
        self.done += 1
        self._draw(f"{self.what}: {self.done}/{self.total} {label}".rstrip())

    def counting(self, prefix):
        """A ``progress(name)`` callback for the estimators: one step, labelled
        ``prefix, name``."""
        return lambda name: self.step(f"{prefix}, {name}")

    def _draw(self, text):
        if self.shown:
            self.stream.write("\r" + text.ljust(self._width))
            self.stream.flush()
            self._width = len(text)

    def close(self):
        """Erase the line: what is printed next starts at the left margin of a clean line."""
        if self.shown and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self):
        self._draw(f"{self.what}: 0/{self.total}")
        return self

    def __exit__(self, *exc):
        self.close()
        return False
