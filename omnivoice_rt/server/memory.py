"""Memory handed back to the system after large work.

glibc keeps what a thread freed in that thread's arena for reuse, so a server whose worker
threads once held a few gigabytes (a long request, a burst of them) keeps its resident size at
that peak: 321 MB -> 8 GB over three requests on different threads, never back.
``malloc_trim(0)`` returns every arena's free pages (the same process went back to 59 MB);
:func:`release_memory` is called after every turn in the line and by the text normalization
worker after every piece.
"""

from __future__ import annotations

import ctypes
import ctypes.util


def _trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS, Windows): nothing to do
        return None


_MALLOC_TRIM = _trim()


def release_memory() -> None:
    """Hand the memory freed since back to the system (glibc's ``malloc_trim``; elsewhere nothing)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
