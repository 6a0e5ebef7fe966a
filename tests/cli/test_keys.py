"""``arroyo keys`` and the api's refusal to listen beyond loopback without one: real
processes over a real SQLite database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ARROYO = [sys.executable, "-m", "arroyo_cli.main"]


def _arroyo(db: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ARROYO, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "ARROYO__DATABASE__URL": f"sqlite:///{db}", **env},
    )


def test_keys_are_made_once_listed_without_secrets_and_revoked(tmp_path: Path) -> None:
    db = tmp_path / "arroyo.db"
    made = _arroyo(db, "keys", "create", "--name", "deploy")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    key_id, _, secret = token.partition(".")
    assert key_id.startswith("key_") and len(secret) >= 40
    assert "shown only this once" in made.stderr
    again = _arroyo(db, "keys", "create", "--name", "deploy")
    assert again.returncode == 1
    assert "an API key named 'deploy' exists" in again.stderr

    listed = _arroyo(db, "keys", "list")
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(key_id)]
    assert row.split()[-1] == "deploy" and " - " in row
    assert secret not in listed.stdout
    assert secret.encode() not in db.read_bytes()

    revoked = _arroyo(db, "keys", "revoke", key_id)
    assert revoked.returncode == 0 and revoked.stdout.strip() == f"revoked {key_id} (deploy)"
    assert " - " not in _arroyo(db, "keys", "list").stdout.splitlines()[1]
    unknown = _arroyo(db, "keys", "revoke", "key_nope")
    assert unknown.returncode == 1
    assert "API key key_nope does not exist" in unknown.stderr


def test_the_api_refuses_to_listen_beyond_loopback_without_a_key(tmp_path: Path) -> None:
    refused = _arroyo(tmp_path / "arroyo.db", "api", ARROYO__API__BIND_HOST="0.0.0.0")
    assert refused.returncode == 2
    assert "error[no_api_key]: the api listens on '0.0.0.0'" in refused.stderr
    assert "arroyo keys create --name NAME" in refused.stderr
