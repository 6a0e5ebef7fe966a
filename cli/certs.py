"""``arroyo certs``: a local CA and a certificate per service, for mutual TLS between them.

Makes (or keeps, when they still serve: ``arroyo.tls.authority``) ``ca.pem``, ``ca-key.pem`` and
``<service>.pem``/``<service>-key.pem`` in ``--dir`` (default ``data_dir/tls``), and prints the
files and the ``tls`` settings that give a service its own. ``arroyo cluster`` does the same by
itself at start; docker-compose.yml runs this as its one-shot ``certs`` service. Exit codes: 0
done, 1 the files could not be written, 2 a bad config.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SERVICES = ("api", "controller", "compiler", "node")


def add_certs_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], config_option: argparse.ArgumentParser
) -> None:
    certs = sub.add_parser(
        "certs",
        parents=[config_option],
        help="make a local CA and each service's certificate (mutual TLS), or keep them",
    )
    certs.add_argument(
        "services", nargs="*", default=list(SERVICES), help=f"default: {' '.join(SERVICES)}"
    )
    certs.add_argument("--dir", type=Path, help="where the files go (default: data_dir/tls)")
    certs.add_argument(
        "--host",
        action="append",
        default=[],
        help="a host name or address peers dial, named in every certificate besides the "
        "service's own name, localhost, 127.0.0.1 and ::1 (repeatable)",
    )
    certs.add_argument(
        "--ca-key", type=Path, help="where the CA's key goes (default: ca-key.pem in --dir)"
    )


def run_certs(args: argparse.Namespace) -> int:
    from arroyo.config import ConfigError, load_config
    from arroyo.tls.authority import ensure_certificates

    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"error[{err.code}]: {err.message}", file=sys.stderr)
        return 2
    directory = args.dir or config.data_dir / "tls"
    try:
        made = ensure_certificates(
            directory, args.services, hosts=args.host, ca_key_file=args.ca_key
        )
    except OSError as err:
        print(f"error[certs]: cannot write certificates in {directory}: {err}", file=sys.stderr)
        return 1
    written = set(made.written)
    print(f"CA: {made.ca_file} ({'made' if made.ca_file in written else 'kept'})")
    for name, files in made.services.items():
        state = "made" if files.cert_file in written else "kept"
        print(f"{name}: {files.cert_file}, {files.key_file} ({state})")
    print(
        "each service's config: [tls] cert_file, key_file = its own files, ca_file = the CA "
        "(or ARROYO__TLS__CERT_FILE, ARROYO__TLS__KEY_FILE, ARROYO__TLS__CA_FILE)"
    )
    return 0
