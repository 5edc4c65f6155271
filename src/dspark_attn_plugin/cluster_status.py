"""``dspark-attn-plugin status --ray [ADDRESS]``: ``status`` on every node of
a running Ray cluster.

One task per alive node, pinned to it, no GPU asked: it reads that node's
environment as a Ray worker there sees it (``installation.read``, shipped by
value, so a node without the plugin answers too) and the verdict is judged
here by ``status.judge``, the same judgement ``status`` gives on the node.

Settings: an engine started from this shell passes on the plugin's switch and
``VLLM_PLUGINS`` to its workers (vLLM copies them; ``ray_settings``), so each
node is judged with this shell's values where they are set, and with the
node's own where this shell leaves them unset.

Exit status: the worst node's, where a node known to crash (1) is worse than
one that cannot be judged (2); 2 also when no cluster answers or Ray is not
installed.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import asdict, dataclass, field

from dspark_attn_plugin import __version__, installation, status

TIMEOUT_S = 120.0


class ClusterError(Exception):
    """No verdict at all: Ray missing, no cluster, no node answering."""


@dataclass
class NodeStatus:
    node_id: str
    ip: str
    exit_code: int
    status: dict | None = None  # status.Status.to_dict()
    error: str | None = None
    # Where each setting came from: "here" (this shell), "node", or "unset".
    settings_from: dict = field(default_factory=dict)
    host: str | None = None
    # The plugin installed on the node (status["plugin_version"] is this check's).
    node_plugin_version: str | None = None


@dataclass
class ClusterStatus:
    address: str
    nodes: list[NodeStatus]
    dead_nodes: list[str]
    exit_code: int
    summary: str

    def to_dict(self) -> dict:
        return asdict(self)


def worst(codes: list[int]) -> int:
    """1 (a node that crashes) before 2 (a node that cannot be judged) before 0."""
    for code in (status.EXIT_UNPROTECTED, status.EXIT_ERROR):
        if code in codes:
            return code
    return status.EXIT_SAFE


def judge_node(snap: dict, here: dict, node_id: str, ip: str) -> NodeStatus:
    """A node's verdict from its snapshot, under this shell's settings."""
    node_settings = dict(snap.get("settings") or {})
    settings_from = {}
    for name in status.SETTING_NAMES:
        if name in here:
            node_settings[name] = here[name]
            settings_from[name] = "here"
        else:
            settings_from[name] = "node" if name in node_settings else "unset"
    snap = dict(snap, settings=node_settings)
    node = NodeStatus(node_id=node_id, ip=ip, exit_code=status.EXIT_ERROR,
                      settings_from=settings_from, host=snap.get("host"),
                      node_plugin_version=snap.get("plugin_version"))
    try:
        result = status.judge(snap)
    except status.StatusError as exc:
        node.error = str(exc)
        return node
    theirs = snap.get("plugin_version")
    if (result.verdict == "affected" and result.protected and theirs
            and theirs != __version__):
        # Its runtime is its own plugin's: this check cannot promise for it.
        result.exit_code = status.EXIT_ERROR
        result.protected = None
        result.advice = (
            f"This node has dspark-attn-plugin {theirs}, this check is {__version__}: "
            f"run `dspark-attn-plugin status` on that node."
        )
    elif result.plugin_will_load is False and theirs is None and result.verdict == "affected":
        result.advice = (
            "This vLLM crashes DSpark drafters in profile_run and the plugin is not "
            "installed on this node: install its wheel into this node's image."
        )
    node.status = result.to_dict()
    node.exit_code = result.exit_code
    return node


# What an HTTP/2 client sends first: the connection preface and an empty
# SETTINGS frame. A gRPC server (Ray's GCS, the Ray Client server) answers
# with a SETTINGS frame of its own.
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4


def _host_port(address: str) -> tuple[str, int] | None:
    """The host and port of a plain ``host:port`` or a Ray Client
    ``ray://host:port``; None for anything else (``auto``)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or "/" in host or not port.isdigit():
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 address
    return host, int(port)


def _reachable(address: str) -> bool:
    """False only where nothing listens at the address's host and port."""
    where = _host_port(address)
    if where is None:
        return True  # not host:port: let Ray say
    try:
        with socket.create_connection(where, timeout=5):
            return True
    except OSError:
        return False


def _speaks_grpc(address: str) -> bool:
    """False where the port listens but does not answer as a gRPC server
    (a web server, the dashboard): Ray's own connect would wait there and
    then end the process. True where it answers, or cannot be asked this
    way (not host:port; Ray with TLS, which it reads from this process's
    environment)."""
    where = _host_port(address)
    if where is None or os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return True
    head = b""
    try:
        with socket.create_connection(where, timeout=5) as conn:
            conn.sendall(_HTTP2_HELLO)
            while len(head) < 9:
                chunk = conn.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
    except OSError:
        return False
    return len(head) == 9 and head[3] == _SETTINGS


def collect(address: str | None = None, environ=os.environ,
            timeout: float = TIMEOUT_S) -> ClusterStatus:
    """``status`` of every alive node of the cluster at ``address`` (``auto``:
    the one this machine belongs to). Raises ClusterError when there is none."""
    try:
        import ray
        import ray.cloudpickle
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError as exc:
        raise ClusterError(
            f"status --ray needs Ray in this Python ({exc}): install the Ray your "
            f"vLLM runs with, or run `dspark-attn-plugin status` on each node"
        ) from exc
    address = address or environ.get("RAY_ADDRESS") or "auto"
    if not _reachable(address):
        raise ClusterError(f"no Ray cluster answers at {address}")
    if not _speaks_grpc(address):
        raise ClusterError(
            f"no Ray cluster answers at {address}: something listens there, but it does not "
            f"answer as Ray does (gRPC); give the head's GCS address (port 6379 by default) "
            f"or ray://HOST:10001, not the dashboard's"
        )
    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"no Ray cluster answers at {address}: {exc}") from exc
    try:
        return _ask_nodes(ray, NodeAffinitySchedulingStrategy, address, environ, timeout)
    finally:
        ray.shutdown()


def _ask_nodes(ray, affinity, address: str, environ, timeout: float) -> ClusterStatus:
    ray.cloudpickle.register_pickle_by_value(installation)
    nodes = ray.nodes()
    alive = [n for n in nodes if n.get("Alive")]
    dead = [n.get("NodeManagerAddress", n.get("NodeID", "?")) for n in nodes if not n.get("Alive")]
    if not alive:
        raise ClusterError(f"the Ray cluster at {address} has no alive node")
    read = ray.remote(num_cpus=0, max_retries=0)(installation.read)
    refs = {}
    for n in alive:
        ref = read.options(
            scheduling_strategy=affinity(node_id=n["NodeID"], soft=False)
        ).remote(status.FLASHMLA_PATH, status.DIST_NAME, status.SETTING_NAMES)
        refs[ref] = n
    done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
    here = {k: environ[k] for k in status.SETTING_NAMES if k in environ}
    results = []
    for ref, n in refs.items():
        node_id, ip = n["NodeID"], n.get("NodeManagerAddress", "?")
        if ref not in done:
            ray.cancel(ref, force=True)
            results.append(NodeStatus(node_id, ip, status.EXIT_ERROR,
                                      error=f"did not answer within {timeout:.0f} s"))
            continue
        try:
            snap = ray.get(ref)
        except Exception as exc:  # the task failed on that node
            results.append(NodeStatus(node_id, ip, status.EXIT_ERROR,
                                      error=f"the check failed there: {exc}"))
            continue
        results.append(judge_node(snap, here, node_id, ip))
    results.sort(key=lambda r: (r.ip, r.node_id))
    code = worst([r.exit_code for r in results])
    return ClusterStatus(address=address, nodes=results, dead_nodes=sorted(dead),
                         exit_code=code, summary=_summary(results, code))


def _summary(nodes: list[NodeStatus], code: int) -> str:
    counts = {status.EXIT_SAFE: 0, status.EXIT_UNPROTECTED: 0, status.EXIT_ERROR: 0}
    for n in nodes:
        counts[n.exit_code] += 1
    head = {
        status.EXIT_SAFE: "every node is safe",
        status.EXIT_UNPROTECTED: "a node runs an affected vLLM unprotected",
        status.EXIT_ERROR: "a node cannot be judged",
    }[code]
    return (f"{head}: {len(nodes)} node(s), {counts[0]} safe, {counts[1]} unprotected, "
            f"{counts[2]} cannot be judged")


def render(cluster: ClusterStatus) -> str:
    lines = [f"Ray cluster at {cluster.address}"]
    for n in cluster.nodes:
        if n.status is None:
            lines.append(f"  {n.ip:<15} exit {n.exit_code}  error: {n.error}")
            continue
        s = n.status
        protected = {True: "yes", False: "no", None: "n/a"}[s["protected"]]
        plugin = (f"plugin loads: {'yes' if s['plugin_will_load'] else 'no'}"
                  f" ({s['load_reason']})")
        lines.append(
            f"  {n.ip:<15} exit {n.exit_code}  vLLM {s['vllm_version'] or 'not installed'}"
            f"  {s['verdict']}  protected: {protected}  {plugin}"
        )
        if n.exit_code != status.EXIT_SAFE:
            lines.append(f"  {'':<15}         {s['advice']}")
    for d in cluster.dead_nodes:
        lines.append(f"  {d:<15} dead, not checked")
    lines.append(f"cluster: {cluster.summary} (exit {cluster.exit_code})")
    return "\n".join(lines)
