"""Where the web UI's files are: a page of ES modules (``index.html``, ``app.js`` and the
modules it imports, ``style.css``, in ``arroyo/api/web``, packaged with the library) over the
REST API, served from ``/`` with ``create_app(..., web_root=web_root())``. The libraries it uses
are bundled into ``web/vendor`` by ``scripts/vendor-web`` and committed: no Node at install."""

from __future__ import annotations

from pathlib import Path

_WEB = Path(__file__).resolve().parent / "web"


def web_root() -> Path:
    """The directory holding the UI's ``index.html`` and the files it loads."""
    return _WEB
