"""Encryption at rest of what the store keeps that holds secrets: connection profiles' and
connection tables' settings (passwords, tokens, keys) and pipelines' compiled programs (which
carry the settings of the profiles their tables name).

AES-256-GCM (the ``cryptography`` package), a fresh 96-bit nonce per value; a sealed value is
``enc:v1:<base64 of nonce + ciphertext + tag>``, and a value written before encryption was on
(plain JSON) is read as it is and sealed when next written. The key is
``database.secrets_key`` (32 bytes, base64; the same on every service that reads the database:
the api and the controller), else a key made at first start in ``data_dir/secrets.key`` (mode
0600), which serves every service sharing that directory (``arroyo cluster``, the compose
file's volume). A value sealed under another key is refused with a message that says so,
never read as garbage.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from arroyo.config import Config
from arroyo.store.errors import StoreError

PREFIX = "enc:v1:"
KEY_FILE = "secrets.key"
_NONCE = 12


class SecretsKeyError(StoreError):
    code = "bad_secrets_key"


class SecretBox:
    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise SecretsKeyError(f"the secrets key must be 32 bytes, not {len(key)}")
        self._aead = AESGCM(key)

    def seal(self, text: str) -> str:
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._aead.encrypt(nonce, text.encode(), None)
        return PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, stored: str, what: str) -> str:
        """``stored`` as written; ``what`` names it in an error (never its content)."""
        if not stored.startswith(PREFIX):
            return stored  # written before encryption was on
        try:
            raw = base64.b64decode(stored.removeprefix(PREFIX), validate=True)
            return self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], None).decode()
        except (InvalidTag, binascii.Error, ValueError) as err:
            raise SecretsKeyError(
                f"cannot decrypt {what}: it was sealed with another secrets key (set "
                "database.secrets_key to the same key on every service that reads this "
                "database)"
            ) from err


def secret_box(config: Config) -> SecretBox:
    """What the api and the controller encrypt the database's secrets with."""
    key = config.database.secrets_key
    return SecretBox(key_from(key.get_secret_value() if key else None, config.data_dir))


def key_from(configured: str | None, data_dir: Path) -> bytes:
    """The configured key (base64), else ``data_dir``'s key file, made now if there is none."""
    if configured:
        try:
            return base64.b64decode(configured, validate=True)
        except binascii.Error as err:
            raise SecretsKeyError("database.secrets_key is not base64") from err
    path = data_dir / KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        # Written whole under another name, then linked in: a service starting beside this one
        # finds either no key or all of it, and the first link wins.
        fd, staged = tempfile.mkstemp(dir=path.parent, prefix=".secrets-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(base64.b64encode(secrets.token_bytes(32)))
            os.chmod(staged, 0o600)
            with contextlib.suppress(FileExistsError):
                os.link(staged, path)
        finally:
            os.unlink(staged)
    try:
        return base64.b64decode(path.read_bytes().strip(), validate=True)
    except binascii.Error as err:
        raise SecretsKeyError(f"{path} does not hold a base64 key") from err


class SealedColumns:
    """What a store's queries use to seal a column's value on write and open it on read."""

    _box: SecretBox | None = None

    def _seal(self, text: str) -> str:
        return self._box.seal(text) if self._box is not None else text

    def _opened(self, row: dict[str, Any], column: str, what: str) -> dict[str, Any]:
        value = row[column]
        if not isinstance(value, str) or not value.startswith(PREFIX):
            return row
        if self._box is None:
            raise SecretsKeyError(
                f"{what} is encrypted, and this process has no secrets key "
                "(database.secrets_key, or data_dir's secrets.key)"
            )
        return {**row, column: self._box.open(value, what)}
