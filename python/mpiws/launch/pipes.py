"""The pipes between a launcher and the Python processes it starts (``mpiws
run``'s ranks, ``Spawn``'s children): a child's output copied to ours in
whole lines, and the endpoint URL a starting child reports."""

import os
import select
import time

#: How long a rank process may take to report its endpoint URL.
STARTUP_SECONDS = 60.0
#: How long an unfinished output line waits for its end before it is shown
#: as it is: a prompt (``input("n? ")``) must appear before the answer is typed.
PROMPT_SECONDS = 0.2


def _write(out, data):
    try:
        out.write(data)
        out.flush()
    except BrokenPipeError:
        pass  # nobody reads our output (``| head``): keep draining the rank's


def forward(stream, out, prefix):
    """Copy a rank's output to ``out`` in whole lines (ranks' lines do not
    mix), each after ``prefix``; an unfinished line once the rank pauses."""
    fd = stream.fileno()
    poll = select.poll()  # not select(): ranks' pipes may be past fd 1023
    poll.register(fd, select.POLLIN)
    parts, mid_line = [], False  # the unfinished line's pieces; whether its start is out, prefixed
    while True:
        if parts and not poll.poll(PROMPT_SECONDS * 1000):
            _write(out, (b"" if mid_line else prefix) + b"".join(parts))
            parts, mid_line = [], True
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        *lines, rest = chunk.split(b"\n")
        if lines:
            lines[0] = b"".join(parts) + lines[0]
            text = b"".join(prefix + line + b"\n" for line in lines)
            _write(out, text[len(prefix) :] if mid_line else text)
            parts, mid_line = [], False
        if rest:
            parts.append(rest)
    if parts:
        _write(out, (b"" if mid_line else prefix) + b"".join(parts))
    stream.close()


def read_url(fd, proc, deadline):
    """The URL process ``proc`` writes on pipe ``fd`` (a line) before
    ``deadline`` (``time.monotonic``); closes ``fd``."""
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            raise RuntimeError(f"rank process {proc.pid} did not start (exit status {proc.poll()})")
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(fd, 1024)
            if not chunk:
                raise RuntimeError(f"rank process {proc.pid} exited during start-up")
            data += chunk
    os.close(fd)
    return data.decode().strip()
