"""The ids and times the api gives the rows it creates."""

from __future__ import annotations

import secrets
import string
import time

_ID_ALPHABET = string.ascii_lowercase + string.digits
_ID_LENGTH = 12


def new_id(prefix: str) -> str:
    """``<prefix>_`` and 12 random lowercase letters and digits (~62 bits)."""
    return f"{prefix}_{''.join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))}"


def now_micros() -> int:
    return time.time_ns() // 1000
