"""Mutual TLS between services, over real gRPC servers with certificates of a real CA
(arroyo.tls.authority): a peer of the deployment is answered; a client that shows no
certificate, one from another CA, or speaks plaintext is refused during the handshake, and so is
a server the client's CA did not sign."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from arroyo.rpc import RpcError, WorkerClient
from arroyo.tls.authority import CertificateSet, ensure_certificates
from arroyo.worker import Phase, WorkerIdentity
from arroyo_rpc.v1 import worker_pb2
from tests.services import Hosted, ScriptedWorkerRuntime, serving, worker_service
from tests.tls import identity, tls_config

PHASE = worker_pb2.GetWorkerPhaseRequest()


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> CertificateSet:
    return ensure_certificates(tmp_path_factory.mktemp("ours"), ["controller", "node"])


@pytest.fixture(scope="module")
def theirs(tmp_path_factory: pytest.TempPathFactory) -> CertificateSet:
    """Another deployment: another CA, a certificate for the same service name."""
    return ensure_certificates(tmp_path_factory.mktemp("theirs"), ["controller", "node"])


def worker() -> Hosted:
    runtime = ScriptedWorkerRuntime(WorkerIdentity("job-1", 3, "w-1", "node-1", 1), Phase.RUNNING)
    return worker_service(runtime)


async def refused(client: WorkerClient) -> RpcError:
    with pytest.raises(RpcError) as caught:
        await client.get_worker_phase(PHASE, timeout_s=5)
    return caught.value


async def test_only_peers_with_the_deployments_certificates_are_answered(
    ours: CertificateSet, theirs: CertificateSet, tmp_path: Path
) -> None:
    # The worker serves with its node's certificate, as a node's workers do.
    config = tls_config(ours.services["node"])
    async with serving(worker(), config=config) as running:
        address = str(running.grpc_address)
        assert running.tls is not None
        controller = identity(ours.services["controller"])
        async with WorkerClient(address, tls=controller) as client:
            assert (await client.get_worker_phase(PHASE)).job.job_id == "job-1"
        # The server's name is checked against its certificate: localhost is in it too.
        port = address.rpartition(":")[2]
        async with WorkerClient(f"localhost:{port}", tls=controller) as client:
            assert (await client.get_worker_phase(PHASE)).job.job_id == "job-1"

        # A client with another CA's certificate (it trusts our CA, so only its own is wrong).
        stranger = identity(theirs.services["controller"])
        impostor = type(stranger)(
            stranger.cert_pem,
            stranger.key_pem,
            controller.ca_pem,
            stranger.cert_file,
            stranger.key_file,
            controller.ca_file,
        )
        async with WorkerClient(address, tls=impostor) as client:
            assert (await refused(client)).code == "unavailable"

        # A TLS client that shows no certificate.
        anonymous = grpc.aio.secure_channel(
            address, grpc.ssl_channel_credentials(root_certificates=controller.ca_pem)
        )
        try:
            assert (await refused(WorkerClient(anonymous))).code == "unavailable"
        finally:
            await anonymous.close()

        # Plaintext.
        async with WorkerClient(address) as client:
            assert (await refused(client)).code == "unavailable"

        # A client of the other deployment: it does not trust our server.
        async with WorkerClient(address, tls=stranger) as client:
            assert (await refused(client)).code == "unavailable"
