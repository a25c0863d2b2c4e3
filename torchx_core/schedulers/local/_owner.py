"""The owner of a local app: one small file in its app directory (``<app_dir>/owner``).

Written atomically (temporary file + rename), so a reader in any process sees the old owner or
the new one, never a torn write. Stdlib only, like the rest of this package.
"""

from __future__ import annotations

import os
import threading

OWNER_FILE = "owner"


def write_owner(app_dir: str, owner: str) -> bool:
    """Records ``owner`` for the app in ``app_dir``; False if the app directory does not exist."""
    if not os.path.isdir(app_dir):
        return False
    path = os.path.join(app_dir, OWNER_FILE)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, owner.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return True


def read_owner(app_dir: str) -> str | None:
    """The owner recorded for the app in ``app_dir``, or None if none was recorded."""
    try:
        with open(os.path.join(app_dir, OWNER_FILE), encoding="utf-8") as f:
            return f.read() or None
    except (FileNotFoundError, NotADirectoryError):
        return None
