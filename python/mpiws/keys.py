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

import errno
import os
import re
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


# The rules for a key file, as ssh has them for its own: a regular file
# (not a link), owned by this user (or root), that no one else may read or
# write; and in directories no one else may write to, up to the root: who
# can write a directory can swap the file in it for one of their own. A
# directory with the sticky bit (/tmp) is the exception: there others may
# add files but not replace ours, and a file they put in our key file's
# place first is refused as theirs.


def _trusted_owner(uid):
    return uid in (os.geteuid(), 0)


def _check_directories(path):
    """Refuse a key file in a directory someone else controls."""
    d = Path(os.path.realpath(Path(path).parent))
    for folder in (d, *d.parents):
        st = os.stat(folder)
        if not _trusted_owner(st.st_uid):
            raise PermissionError(
                f"{path}: its directory {folder} belongs to another user (uid {st.st_uid}): refusing it"
            )
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise PermissionError(
                f"{path}: its directory {folder} may be written by others (mode {stat.S_IMODE(st.st_mode):o}), "
                "who could swap the key file: refusing it (chmod go-w it)"
            )


def _check_file(path, st):
    if not stat.S_ISREG(st.st_mode):
        raise PermissionError(f"{path} is not a regular file: refusing to use it as a key file")
    if not _trusted_owner(st.st_uid):
        raise PermissionError(f"{path} belongs to another user (uid {st.st_uid}): refusing to use it as a key file")
    if st.st_mode & 0o077:
        raise PermissionError(f"{path} is readable by others (mode {stat.S_IMODE(st.st_mode):o}): chmod 600 it")


def _read_private(path):
    """The text of a key file that passes the rules (a link is not followed)."""
    _check_directories(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO in its place does not block
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise PermissionError(f"{path} is a symbolic link: refusing to use it as a key file") from None
        raise
    with os.fdopen(fd) as f:
        _check_file(path, os.fstat(f.fileno()))
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
        return _read_private(path), path, False
    path = key_file()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_directories(path)
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
        return _read_private(path), path, False
    finally:
        os.unlink(tmp)


def tunnel_key_file(via_relay, path=None):
    """Where an endpoint behind the relay URL ``via_relay`` keeps the key of
    its tunnel identity (``mpiws_core``'s ``service::tunnel`` reads it, or
    makes it there, mode 0600): ``path`` (``--tunnel-key``), else
    ``tunnel-NAME.key`` next to the user's key file, whose folder is made
    private if missing. Its directories are checked as a key file's."""
    if path is None:
        name = via_relay.split("#", 1)[0].rstrip("/").rpartition("/relay/")[2]
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name) or name in (".", ".."):
            raise ValueError(f"--via-relay {via_relay!r} is not http(s)://HOST:PORT/relay/NAME")
        folder = key_file().parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / f"tunnel-{name}.key"
    path = Path(path)
    _check_directories(path)
    return path


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
        return first_key(_read_private(path))
    except FileNotFoundError:
        return None
