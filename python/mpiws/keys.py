"""Endpoint keys on this machine: where ``mpiws serve`` keeps the one it
generates, and which key a client sends.

A server started without ``--keys`` uses the user's key file
(``$MPIWS_KEY_FILE``, else ``$XDG_CONFIG_HOME/mpiws/key``, else
``~/.config/mpiws/key``), creating it with a new random key if it does not
exist; the file and its folder are readable by their owner only. A client
takes its key from, in order: an explicit ``key=`` (``--key``), the
``MPIWS_KEY`` environment variable, that same file. So on one machine a
user's endpoints and clients agree with nothing to configure.
"""

import os
import secrets
import stat
import tempfile
from pathlib import Path


def key_file():
    """Where the user's generated key lives."""
    if os.environ.get("MPIWS_KEY_FILE"):
        return Path(os.environ["MPIWS_KEY_FILE"])
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "mpiws" / "key"


def _check_private(path):
    """Refuse a key file that others may read or that is a link (like ssh does)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise PermissionError(f"{path} is not a regular file: refusing to use it as a key file")
    if st.st_mode & 0o077:
        raise PermissionError(f"{path} is readable by others (mode {stat.S_IMODE(st.st_mode):o}): chmod 600 it")


def _read(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd) as f:
        return f.read()


def first_key(text):
    """The first key of a keys file's text."""
    for line in text.splitlines():
        words = line.split("#")[0].split()
        if words:
            return words[0]
    return None


def server_keys(path=None):
    """The text of the keys file a server uses: ``path`` (``--keys``), or
    the user's key file, created with a new key if missing. Returns
    (text, path, created)."""
    if path is not None:
        path = Path(path)
        _check_private(path)
        return _read(path), path, False
    path = key_file()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Written whole to a private temporary file, then linked into place:
    # a server starting at the same moment reads the whole key or makes none.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".key-")
    try:
        key = secrets.token_hex(32)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
        os.link(tmp, path)
        return key + "\n", path, True
    except FileExistsError:
        _check_private(path)
        return _read(path), path, False
    finally:
        os.unlink(tmp)


def relay_key(key=None):
    """The key an endpoint behind a relay registers there with:
    ``MPIWS_RELAY_KEY``, else the client's key (``client_key(key)``)."""
    return os.environ.get("MPIWS_RELAY_KEY") or client_key(key)


def client_key(key=None):
    """The key a client sends: ``key``, else ``MPIWS_KEY``, else the first
    key of the user's key file if there is one; else None."""
    if key:
        return key
    if os.environ.get("MPIWS_KEY"):
        return os.environ["MPIWS_KEY"]
    path = key_file()
    try:
        _check_private(path)
        return first_key(_read(path))
    except FileNotFoundError:
        return None
