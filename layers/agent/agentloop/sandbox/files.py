"""Removing what model-written code left behind, even when it locked its own directories.

Code can ``chmod 0`` a directory it made; ``shutil.rmtree`` then cannot enter it. Both the
runner (its work dir) and the sandbox function (the whole temp dir) must still remove it, so
the one way of doing that lives here.
"""

from __future__ import annotations

import contextlib
import os
import shutil


def make_tree_writable(path: str) -> None:
    """Give the owner full access to every directory under ``path`` (symlinks not followed).

    Errors are ignored: what cannot be changed is left for ``rmtree`` to report or skip.
    """
    stack = [path]
    while stack:
        directory = stack.pop()
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)
        with contextlib.suppress(OSError), os.scandir(directory) as entries:
            stack.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))


def remove_tree(path: str) -> None:
    """Remove ``path`` even if the code took its own permissions away; gone already is fine."""
    with contextlib.suppress(FileNotFoundError):
        try:
            shutil.rmtree(path)
            return
        except OSError:
            pass
        make_tree_writable(path)
        shutil.rmtree(path, ignore_errors=True)


def empty_dir(path: str) -> None:
    """Remove everything inside ``path`` but keep ``path``; links go, what they name stays."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                make_tree_writable(entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
