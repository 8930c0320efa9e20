"""sha256 without `hashlib`: its OpenSSL binding costs a dry run about 2 ms to import, for
the few short names fm digests (a slot lock's file name, firstmate's home tag)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["sha256_hex"]


def _sha256() -> Callable[[bytes], Any]:
    # CPython's own sha256 module: `_sha256` (3.11), `_sha2` (3.12 and later); else hashlib.
    for name in ("_sha256", "_sha2"):
        try:
            found: Callable[[bytes], Any] = importlib.import_module(name).sha256
        except (ImportError, AttributeError):
            continue
        return found
    from hashlib import sha256

    return sha256


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data`, as hexadecimal digits."""
    return str(_sha256()(data).hexdigest())
