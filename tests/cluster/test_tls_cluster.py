"""The session's cluster (conftest.py) talks mutual TLS: its controller and node answer a
client with a certificate of the cluster's CA, and refuse one with none (plaintext, or TLS
without a certificate) or with another CA's. That its pipelines run at all (the other tests of
the cluster) shows that the api, the compiler, the node and each worker are accepted."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from arroyo.rpc import ControllerClient, NodeClient, RpcError
from arroyo.tls import TlsIdentity
from arroyo.tls.authority import ServiceCertificate, ensure_certificates
from arroyo_rpc.v1 import controller_pb2, node_pb2
from tests import aio
from tests.cluster.harness import Cluster

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.xdist_group("cluster")]


def showing(files: ServiceCertificate, trusting: Path) -> TlsIdentity:
    """A client that shows ``files``' certificate and trusts the CA in ``trusting``."""
    return TlsIdentity(
        files.cert_file.read_bytes(),
        files.key_file.read_bytes(),
        trusting.read_bytes(),
        files.cert_file,
        files.key_file,
        trusting,
    )


def test_the_services_answer_only_the_clusters_certificates(
    cluster: Cluster, tmp_path: Path
) -> None:
    assert cluster.service_env, "the session's cluster runs with TLS"
    ca = Path(cluster.service_env["api"]["ARROYO__TLS__CA_FILE"])
    ours = ServiceCertificate("api", ca.parent / "api.pem", ca.parent / "api-key.pem", ca)
    theirs = ensure_certificates(tmp_path, ["api"]).services["api"]
    controller = f"127.0.0.1:{cluster.env['ARROYO__CONTROLLER__PORT']}"
    node = f"127.0.0.1:{cluster.env['ARROYO__NODE__PORT']}"

    async def probe() -> None:
        async with ControllerClient(controller, tls=showing(ours, ca)) as client:
            listed = await client.list_nodes(controller_pb2.ListNodesRequest())
            assert len(listed.nodes) >= 1
        async with NodeClient(node, tls=showing(ours, ca)) as client:
            await client.get_workers(node_pb2.GetWorkersRequest())
        anonymous = grpc.aio.secure_channel(
            node, grpc.ssl_channel_credentials(root_certificates=ca.read_bytes())
        )
        strangers = [
            ControllerClient(controller),
            ControllerClient(controller, tls=showing(theirs, ca)),
            NodeClient(node),
            NodeClient(node, tls=showing(theirs, ca)),
            NodeClient(anonymous),
        ]
        try:
            for stranger in strangers:
                with pytest.raises(RpcError) as refused:
                    if isinstance(stranger, ControllerClient):
                        await stranger.list_nodes(controller_pb2.ListNodesRequest(), timeout_s=5)
                    else:
                        await stranger.get_workers(node_pb2.GetWorkersRequest(), timeout_s=5)
                assert refused.value.code == "unavailable"
        finally:
            for stranger in strangers:
                await stranger.close()
            await anonymous.close()

    aio.run(probe())
