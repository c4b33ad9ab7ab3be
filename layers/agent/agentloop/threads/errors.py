"""What the thread store refuses, apart from the store's own errors (``StoreUnavailable``
and the rest pass through unchanged, so the server answers them as it answers every store
error)."""

from __future__ import annotations


class ThreadError(Exception):
    """Anything the thread layer refuses."""


class ThreadNotFound(ThreadError, LookupError):
    """No such thread for this owner: absent, expired, deleted, or another principal's (the
    message is the same for all of them, so an answer never confirms that a thread exists)."""

    def __init__(self) -> None:
        super().__init__("no such thread")


class ThreadExists(ThreadError):
    """``create`` with a chosen id that this owner already has."""


class ThreadBusy(ThreadError):
    """Another run holds the thread's claim (the server answers 409); ``until`` is when its
    lease ends, epoch seconds, unless that run renews it."""

    def __init__(self, until: int) -> None:
        super().__init__("another run is in progress on this thread")
        self.until = until


class ThreadMovedOn(ThreadError):
    """The client's view of the thread is behind the server's: it holds fewer of the user's
    turns than the thread (a turn sent again after its answer was lost): 409, so nothing is
    kept twice; the client reloads the thread."""

    def __init__(self) -> None:
        super().__init__(
            "this thread has moved on since the messages you sent: an earlier turn of yours "
            "was answered already; load the thread again"
        )


class InvalidThreadInput(ThreadError, ValueError):
    """A title, an append key or messages this layer will never store (a 400 at the edge)."""
