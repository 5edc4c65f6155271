"""``status --ray``'s judgement of each node, in this process: snapshots of
this environment (the real vLLM 0.27.1) as a node would send them, judged
under the settings that travel. The cluster itself: tests/test_ray_cluster.py."""

from __future__ import annotations

import pytest

from dspark_attn_plugin import __version__, cluster_status, status


@pytest.fixture
def snap():
    return status.snapshot({})


def test_a_node_is_judged_as_status_judges_this_machine(snap):
    node = cluster_status.judge_node(snap, {}, "n1", "10.0.0.1")
    assert node.status == status.collect({}).to_dict()
    assert node.exit_code == 0 and node.status["verdict"] == "affected"
    assert node.settings_from == {"VLLM_PLUGINS": "unset", "DSPARK_ATTN_PLUGIN": "unset"}
    assert node.node_plugin_version == __version__


def test_settings_set_here_replace_the_nodes_own(snap):
    off_there = dict(snap, settings={"DSPARK_ATTN_PLUGIN": "off"})
    assert cluster_status.judge_node(off_there, {}, "n", "ip").exit_code == 1
    node = cluster_status.judge_node(off_there, {"DSPARK_ATTN_PLUGIN": "auto"}, "n", "ip")
    assert node.exit_code == 0 and node.settings_from["DSPARK_ATTN_PLUGIN"] == "here"
    node = cluster_status.judge_node(snap, {"VLLM_PLUGINS": "other"}, "n", "ip")
    assert node.exit_code == 1 and node.settings_from["VLLM_PLUGINS"] == "here"
    node = cluster_status.judge_node(off_there, {}, "n", "ip")
    assert node.settings_from["DSPARK_ATTN_PLUGIN"] == "node"


def test_a_node_without_the_plugin_is_unprotected_with_its_remedy(snap):
    bare = dict(snap, entry_points=[e for e in snap["entry_points"]
                                    if e != status.ENTRY_POINT_NAME], plugin_version=None)
    node = cluster_status.judge_node(bare, {}, "n", "ip")
    assert node.exit_code == 1 and node.status["protected"] is False
    assert "not installed on this node" in node.status["advice"]


def test_another_plugin_version_cannot_be_promised_for(snap):
    older = dict(snap, plugin_version="0.1.0")
    node = cluster_status.judge_node(older, {}, "n", "ip")
    assert node.exit_code == 2 and node.status["protected"] is None
    assert f"dspark-attn-plugin 0.1.0, this check is {__version__}" in node.status["advice"]
    # A vLLM that needs no plugin is safe whatever plugin the node has.
    fixed = dict(older, flashmla_source="class Nothing:\n    pass\n")
    assert cluster_status.judge_node(fixed, {}, "n", "ip").exit_code == 0


def test_a_node_whose_vllm_cannot_be_read_cannot_be_judged(snap):
    broken = dict(snap, read_error="cannot read flashmla.py: permission denied")
    node = cluster_status.judge_node(broken, {}, "n", "ip")
    assert node.exit_code == 2 and node.status is None
    assert "permission denied" in node.error


@pytest.mark.parametrize("codes, worst", [
    ([0, 0], 0), ([0, 2], 2), ([2, 1], 1), ([1, 0, 2], 1), ([], 0),
])
def test_the_worst_node_decides_a_crash_before_a_doubt(codes, worst):
    assert cluster_status.worst(codes) == worst


def test_render_lists_each_node_and_the_cluster_verdict(snap):
    nodes = [cluster_status.judge_node(snap, {}, "a", "10.0.0.1"),
             cluster_status.judge_node(dict(snap, settings={"DSPARK_ATTN_PLUGIN": "off"}),
                                       {}, "b", "10.0.0.2")]
    code = cluster_status.worst([n.exit_code for n in nodes])
    result = cluster_status.ClusterStatus("10.0.0.1:6379", nodes, ["10.0.0.9"], code,
                                          cluster_status._summary(nodes, code))
    text = cluster_status.render(result)
    lines = text.splitlines()
    assert lines[0] == "Ray cluster at 10.0.0.1:6379"
    assert lines[1].startswith("  10.0.0.1        exit 0  vLLM 0.27.1  affected  protected: yes")
    assert lines[2].startswith("  10.0.0.2        exit 1") and "DSPARK_ATTN_PLUGIN=off" in lines[3]
    assert "10.0.0.9        dead, not checked" in text
    assert lines[-1] == ("cluster: a node runs an affected vLLM unprotected: 2 node(s), 1 safe, "
                         "1 unprotected, 0 cannot be judged (exit 1)")
    assert result.to_dict()["nodes"][1]["status"]["plugin_enabled"] is False


@pytest.mark.parametrize("settings, here", [
    ({"DSPARK_ATTN_PLUGIN": "off"}, {}),
    ({}, {"DSPARK_ATTN_PLUGIN": "off"}),
    ({}, {"VLLM_PLUGINS": "lora_filesystem_resolver"}),
])
def test_a_node_with_another_plugin_version_switched_off_is_unprotected(snap, settings, here):
    """Whatever plugin version the node has, with the plugin switched off (or
    left out of VLLM_PLUGINS) it crashes: unprotected (1), not "cannot be
    judged" (2)."""
    older = dict(snap, plugin_version="0.1.0", settings=settings)
    node = cluster_status.judge_node(older, here, "n", "ip")
    assert node.exit_code == status.EXIT_UNPROTECTED, node
    assert node.status["protected"] is False


# --- what each node's line and the cluster's summary say -------------------------


def _cluster(nodes, dead=()):
    code = cluster_status.worst([n.exit_code for n in nodes])
    return cluster_status.ClusterStatus("h:6379", nodes, list(dead), code,
                                        cluster_status._summary(nodes, code))


def test_the_summary_counts_every_kind_of_node_and_render_lists_nodes_after_a_failed_one(snap):
    failed = cluster_status.NodeStatus("c", "10.0.0.3", status.EXIT_ERROR,
                                       error="did not answer within 120 s")
    nodes = [cluster_status.judge_node(snap, {}, "a", "10.0.0.1"),
             cluster_status.judge_node(snap, {}, "a2", "10.0.0.2"),
             failed,
             cluster_status.judge_node(dict(snap, settings={"DSPARK_ATTN_PLUGIN": "off"}),
                                       {}, "d", "10.0.0.4"),
             cluster_status.judge_node(dict(snap, plugin_version="0.1.0"), {}, "e", "10.0.0.5"),
             cluster_status.judge_node(dict(snap, plugin_version="0.1.0"), {}, "f", "10.0.0.6")]
    result = _cluster(nodes)
    assert result.summary == ("a node runs an affected vLLM unprotected: 6 node(s), 2 safe, "
                              "1 unprotected, 3 cannot be judged")
    lines = cluster_status.render(result).splitlines()
    assert lines[3] == "  10.0.0.3        exit 2  error: did not answer within 120 s"
    # The nodes after the failed one are listed too, each once.
    for ip in ("10.0.0.4", "10.0.0.5", "10.0.0.6"):
        assert sum(line.startswith(f"  {ip} ") for line in lines) == 1, lines
    assert "plugin loads: yes (entry point registered, VLLM_PLUGINS unset)" in lines[1]
    bare = dict(snap, entry_points=[], plugin_version=None)
    text = cluster_status.render(_cluster([cluster_status.judge_node(bare, {}, "g", "10.0.0.7")]))
    assert "plugin loads: no (no 'dspark_attn_plugin' entry point in vllm.general_plugins)" in text


def test_a_safe_cluster_says_so_and_gives_no_advice(snap):
    nodes = [cluster_status.judge_node(snap, {}, "a", "10.0.0.1")]
    text = cluster_status.render(_cluster(nodes))
    assert text.splitlines()[-1] == ("cluster: every node is safe: 1 node(s), 1 safe, "
                                     "0 unprotected, 0 cannot be judged (exit 0)")
    assert nodes[0].status["advice"] not in text


@pytest.mark.parametrize("theirs", ["0.1.0", "99.0.0", None], ids=["older", "newer", "no-plugin"])
def test_a_fixed_vllm_is_safe_whatever_plugin_the_node_has(snap, theirs):
    import flashmla_variants as fv

    fixed = dict(snap, flashmla_source=fv.upstream_fix(snap["flashmla_source"]),
                 plugin_version=theirs)
    node = cluster_status.judge_node(fixed, {}, "n", "ip")
    assert node.exit_code == status.EXIT_SAFE and node.status["verdict"] == "fixed"
    assert node.status["advice"] == status.judge(fixed).advice


def test_a_newer_plugin_on_the_node_cannot_be_promised_for(snap):
    node = cluster_status.judge_node(dict(snap, plugin_version="99.0.0"), {}, "n", "ip")
    assert node.exit_code == status.EXIT_ERROR and node.status["protected"] is None
    assert "dspark-attn-plugin 99.0.0" in node.status["advice"]


@pytest.mark.parametrize("change", ["switched-off", "no-vllm", "no-version-metadata", "fixed"])
def test_the_install_advice_is_only_for_an_affected_node_without_the_plugin(snap, change):
    import flashmla_variants as fv

    bare = dict(snap, entry_points=[], plugin_version=None)
    node_snap = {
        # Installed, but off: its remedy is to switch it on, not to install it.
        "switched-off": dict(snap, settings={"DSPARK_ATTN_PLUGIN": "off"}),
        "no-vllm": dict(bare, vllm_path=None, vllm_version=None, flashmla_source=None),
        # Registered, but without a version in its metadata.
        "no-version-metadata": dict(snap, plugin_version=None),
        "fixed": dict(bare, flashmla_source=fv.upstream_fix(snap["flashmla_source"])),
    }[change]
    node = cluster_status.judge_node(node_snap, {}, "n", "ip")
    assert "install its wheel" not in node.status["advice"]
    assert node.status["advice"] == status.judge(node_snap).advice


# --- reaching the cluster ----------------------------------------------------------


@pytest.fixture
def ray_tmp(monkeypatch):
    """A short folder of Ray's own: its socket paths must fit 107 bytes."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="dspark-ray-")
    monkeypatch.setenv("RAY_TMPDIR", folder)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_closed_port_is_no_cluster_named_by_its_address(ray_tmp):
    port = _closed_port()
    with pytest.raises(cluster_status.ClusterError) as err:
        cluster_status.collect(f"127.0.0.1:{port}", environ={})
    assert str(err.value) == f"no Ray cluster answers at 127.0.0.1:{port}"


def test_a_ray_client_address_is_checked_at_its_host_and_port(ray_tmp):
    """``ray://host:port`` (Ray Client): nothing listening there is said at
    once; a port that listens is left to Ray."""
    import socket

    port = _closed_port()
    with pytest.raises(cluster_status.ClusterError) as err:
        cluster_status.collect(f"ray://127.0.0.1:{port}", environ={})
    assert str(err.value) == f"no Ray cluster answers at ray://127.0.0.1:{port}"
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        open_port = listening.getsockname()[1]
        assert cluster_status._reachable(f"ray://127.0.0.1:{open_port}")
        assert cluster_status._reachable(f"127.0.0.1:{open_port}")
        assert not cluster_status._reachable(f"127.0.0.1:{port}")
    with socket.socket(socket.AF_INET6) as listening:
        listening.bind(("::1", 0))
        listening.listen()
        assert cluster_status._reachable(f"[::1]:{listening.getsockname()[1]}")


@pytest.mark.parametrize("server", ["http", "silent"])
def test_a_port_that_listens_but_is_not_ray_is_said_at_once(ray_tmp, server):
    """The dashboard's port (a web server), or a listener that never
    answers: Ray's own connect would wait there, then end the process
    (exit 1, as if a node crashed). It is said within seconds instead."""
    import http.server
    import socket
    import threading
    import time

    if server == "http":
        httpd = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        port, stop = httpd.server_address[1], httpd.shutdown
    else:
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port, stop = listening.getsockname()[1], listening.close
    began = time.monotonic()
    try:
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
            with pytest.raises(cluster_status.ClusterError) as err:
                cluster_status.collect(address, environ={})
            assert str(err.value).startswith(
                f"no Ray cluster answers at {address}: something listens there, but it does "
                "not answer as Ray does (gRPC)")
    finally:
        stop()
    assert time.monotonic() - began < 30


def test_a_grpc_greeting_that_comes_in_pieces_is_still_recognised():
    """A server whose SETTINGS frame arrives in pieces (a slow link, a
    proxy) answers as Ray does; one that answers HTTP/2 with another
    frame first (GOAWAY) does not."""
    import socket
    import threading
    import time

    def serve(frame: bytes, listening: socket.socket) -> None:
        conn, _ = listening.accept()
        with conn:
            conn.recv(64)
            for piece in (frame[:1], frame[1:2], frame[2:]):  # then all the rest at once
                conn.sendall(piece)
                time.sleep(0.1)
            time.sleep(0.5)

    settings = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100])
    goaway = bytes([0, 0, 8, 7, 0, 0, 0, 0, 0]) + bytes(8)
    for frame, answers in ((settings, True), (goaway, False)):
        with socket.socket() as listening:
            listening.bind(("127.0.0.1", 0))
            listening.listen()
            server = threading.Thread(target=serve, args=(frame, listening), daemon=True)
            server.start()
            address = f"127.0.0.1:{listening.getsockname()[1]}"
            assert cluster_status._speaks_grpc(address) is answers, frame
            server.join(timeout=10)


def _speaks_grpc_to(handle) -> bool:
    """What ``_speaks_grpc`` says of a local server that runs
    ``handle(conn)`` on the one connection it accepts."""
    import socket
    import threading

    def serve(listening: socket.socket) -> None:
        conn, _ = listening.accept()
        with conn:
            handle(conn)

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        listening.settimeout(10)
        server = threading.Thread(target=serve, args=(listening,), daemon=True)
        server.start()
        try:
            return cluster_status._speaks_grpc(f"127.0.0.1:{listening.getsockname()[1]}")
        finally:
            server.join(timeout=10)


@pytest.mark.parametrize("cut", range(1, 9))
def test_a_settings_frame_split_anywhere_in_its_header_is_recognised(cut):
    """The server's SETTINGS header cut at any byte, the rest of the frame
    (its payload) right behind the second piece: answers as Ray does. Only
    the 9 header bytes are read, never the payload with them."""
    import time

    settings = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100])

    def handle(conn) -> None:
        conn.recv(64)
        conn.sendall(settings[:cut])
        time.sleep(0.1)
        conn.sendall(settings[cut:])
        time.sleep(0.3)

    assert _speaks_grpc_to(handle)


def test_a_server_that_answers_only_a_well_formed_http2_greeting_is_recognised():
    """A strict HTTP/2 server reads the client's greeting before it answers:
    the connection preface, then a SETTINGS frame (RFC 9113 3.4, 6.5) with a
    whole number of 6-byte settings, no flags but ACK unset, on stream 0.
    It answers SETTINGS to that and GOAWAY (PROTOCOL_ERROR) to anything else;
    ``status --ray`` greets it well enough to be answered."""
    magic = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    seen = []

    def read(conn, n: int) -> bytes:
        got = b""
        while len(got) < n:
            chunk = conn.recv(n - len(got))
            if not chunk:
                break
            got += chunk
        return got

    def handle(conn) -> None:
        greeting = read(conn, len(magic) + 9)
        head = greeting[len(magic):]
        length = int.from_bytes(head[:3], "big") if len(head) == 9 else -1
        ok = (greeting[:len(magic)] == magic and len(head) == 9 and head[3] == 4
              and not head[4] & 1 and int.from_bytes(head[5:], "big") & 0x7FFFFFFF == 0
              and length % 6 == 0 and len(read(conn, length)) == length)
        seen.append(ok)
        if ok:
            conn.sendall(bytes([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100]))
        else:
            conn.sendall(bytes([0, 0, 8, 7, 0, 0, 0, 0, 0]) + bytes([0] * 7 + [1]))

    assert _speaks_grpc_to(handle)
    assert seen == [True]


def _first_answer_is(answer: bytes, close: bool) -> bool:
    """What ``_speaks_grpc`` says of a server that reads the greeting and
    sends ``answer`` (then closes, or waits)."""
    import time

    def handle(conn) -> None:
        conn.recv(64)
        conn.sendall(answer)
        if not close:
            time.sleep(0.5)

    return _speaks_grpc_to(handle)


@pytest.mark.parametrize("frame_type", [t for t in range(10) if t != 4])
def test_a_server_whose_first_frame_is_not_settings_is_not_ray(frame_type):
    """DATA, HEADERS, PRIORITY, RST_STREAM, PUSH_PROMISE, PING, GOAWAY, ...
    first: not a gRPC server's answer to a greeting."""
    frame = bytes([0, 0, 4, frame_type, 0, 0, 0, 0, 0]) + bytes(4)
    assert _first_answer_is(frame, close=False) is False


@pytest.mark.parametrize("sent", range(0, 9))
def test_a_server_that_closes_within_the_frame_header_is_not_ray(sent):
    """A SETTINGS header cut short by the server closing (nothing at all, or
    the type byte and no more): no answer, not a crash."""
    settings = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0])
    assert _first_answer_is(settings[:sent], close=True) is False


def test_a_bracketed_ipv6_address_is_read_whole():
    """``[::ffff:127.0.0.1]:PORT`` reaches a server on 127.0.0.1:PORT: the
    brackets go, every character inside stays."""
    import socket

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert cluster_status._host_port(f"[::ffff:127.0.0.1]:{port}") == ("::ffff:127.0.0.1", port)
        assert cluster_status._reachable(f"[::ffff:127.0.0.1]:{port}")
        assert cluster_status._reachable(f"ray://[::ffff:127.0.0.1]:{port}")


def test_an_address_whose_port_is_no_number_or_whose_host_has_a_path_is_left_to_ray():
    """Not host:port: neither checked here (Ray says what is wrong with it)
    nor raised on."""
    for address in ("127.0.0.1:abc", "ray://head:port", "head/x:6379", "ray://head/x:10001"):
        assert cluster_status._reachable(address), address
        assert cluster_status._speaks_grpc(address), address


def test_a_host_missing_its_closing_bracket_is_not_read_as_another_host():
    """``[::1:PORT`` (the ``]`` forgotten) names no host: nothing answers
    there, even with a server listening on ``[::1]:PORT``."""
    import socket

    with socket.socket(socket.AF_INET6) as listening:
        listening.bind(("::1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert cluster_status._reachable(f"[::1]:{port}")
        assert not cluster_status._reachable(f"[::1:{port}")
        assert not cluster_status._reachable(f"ray://[::1:{port}")


def test_without_an_address_ray_address_is_used(ray_tmp):
    port = _closed_port()
    with pytest.raises(cluster_status.ClusterError) as err:
        cluster_status.collect(None, environ={"RAY_ADDRESS": f"127.0.0.1:{port}"})
    assert str(err.value) == f"no Ray cluster answers at 127.0.0.1:{port}"


def test_an_address_that_is_not_host_and_port_is_left_to_ray(ray_tmp):
    with pytest.raises(cluster_status.ClusterError) as err:
        cluster_status.collect("nohost", environ={})
    assert str(err.value).startswith("no Ray cluster answers at nohost: ")
    assert "Port is not specified" in str(err.value)


def test_auto_without_a_cluster_says_ray_found_none(ray_tmp):
    import psutil

    # Ray's "auto" also finds a GCS of any cluster running on this machine
    # (another test run's): then there is no "none" to see.
    if any("gcs_server" in (p.info["name"] or "") for p in psutil.process_iter(["name"])):
        pytest.skip("a Ray cluster runs on this machine: auto would find it")
    with pytest.raises(cluster_status.ClusterError) as err:
        cluster_status.collect(None, environ={})
    assert str(err.value).startswith("no Ray cluster answers at auto: ")
    assert "Could not find any running Ray instance" in str(err.value)


def test_without_ray_it_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(cluster_status.ClusterError) as err:
        cluster_status.collect("127.0.0.1:1", environ={})
    assert str(err.value).startswith("status --ray needs Ray in this Python")


def test_one_real_node_is_asked_and_judged_as_this_machine(ray_tmp):
    """A real one-node Ray with no CPU to give: the task asks for none, so
    it runs; the node is alive, judged as ``status`` judges this machine."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    context = ray.init(num_cpus=0, _temp_dir=ray_tmp, include_dashboard=False)
    try:
        # Its GCS answers as Ray does: collect would go on to ray.init there.
        gcs = context.address_info["gcs_address"]
        assert cluster_status._reachable(gcs) and cluster_status._speaks_grpc(gcs)
        result = cluster_status._ask_nodes(ray, NodeAffinitySchedulingStrategy, "local", {},
                                           timeout=30)
    finally:
        ray.shutdown()
    assert len(result.nodes) == 1 and result.dead_nodes == []
    node = result.nodes[0]
    assert node.error is None and node.exit_code == status.EXIT_SAFE
    assert node.status == status.collect({}).to_dict()
    assert result.exit_code == status.EXIT_SAFE


class _TwoNodeRay:
    """The few calls of Ray's API that ``_ask_nodes`` makes, over three alive
    nodes and a dead one: the first does not answer in time, the second's
    task fails, the third answers with this machine's snapshot. (The real
    clusters: the test above and tests/test_ray_cluster.py; Ray cannot make
    a node hang or fail on cue.)"""

    class cloudpickle:
        @staticmethod
        def register_pickle_by_value(module):
            pass

    def __init__(self, snap):
        self.snap, self.cancelled = snap, []

    def nodes(self):
        return [{"NodeID": "slow", "NodeManagerAddress": "10.0.0.1", "Alive": True},
                {"NodeID": "fails", "NodeManagerAddress": "10.0.0.2", "Alive": True},
                {"NodeID": "dead", "NodeManagerAddress": "10.0.0.9", "Alive": False},
                {"NodeID": "fine", "NodeManagerAddress": "10.0.0.3", "Alive": True}]

    def remote(self, **options):
        fake = self

        class Task:
            def options(self, scheduling_strategy):
                node = scheduling_strategy.node_id

                class Bound:
                    def remote(self, *args):
                        return node
                return Bound()

        assert options == {"num_cpus": 0, "max_retries": 0}
        return lambda function: Task()

    def wait(self, refs, num_returns, timeout):
        assert num_returns == len(refs) == 3
        return [r for r in refs if r != "slow"], [r for r in refs if r == "slow"]

    def get(self, ref):
        if ref == "fails":
            raise RuntimeError("worker died")
        return self.snap

    def cancel(self, ref, force):
        self.cancelled.append((ref, force))


class _Affinity:
    def __init__(self, node_id, soft):
        assert soft is False
        self.node_id = node_id


def test_every_alive_node_is_reported_whatever_happened_on_the_one_before(snap):
    ray = _TwoNodeRay(snap)
    result = cluster_status._ask_nodes(ray, _Affinity, "h:6379", {}, timeout=7)
    by_ip = {n.ip: n for n in result.nodes}
    assert sorted(by_ip) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    assert by_ip["10.0.0.1"].error == "did not answer within 7 s"
    assert by_ip["10.0.0.2"].error == "the check failed there: worker died"
    assert by_ip["10.0.0.3"].exit_code == status.EXIT_SAFE and by_ip["10.0.0.3"].error is None
    assert ray.cancelled == [("slow", True)]
    assert result.dead_nodes == ["10.0.0.9"] and result.exit_code == status.EXIT_ERROR
