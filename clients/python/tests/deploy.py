"""Deployments for the tests: redis-server nodes that can be killed and restarted on their port,
replicas, Sentinels (``redis-server <conf> --sentinel``) and a Redis Cluster, all on 127.0.0.1
free ports, each a child process killed by its pid (``close()``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any, Optional

import redis
from conftest import MODULE, REDIS_SERVER, free_port

REDIS_CLI = os.environ.get("REDIS_CLI", "redis-cli")


def wait_until(what: str, cond: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cond():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Node:
    """One redis-server with the module (or a Sentinel), restartable on the same port and
    directory (so an AOF written before a kill is loaded again)."""

    def __init__(self, *args: str, sentinel_conf: Optional[str] = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="orca-py-node-")
        self.port = free_port()
        self.args = list(args)
        self.sentinel_conf = sentinel_conf
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.start()

    def _argv(self) -> list[str]:
        log = os.path.join(self.dir, "server.log")
        if self.sentinel_conf is not None:
            conf = os.path.join(self.dir, "sentinel.conf")
            if not os.path.exists(conf):
                with open(conf, "w") as f:
                    f.write(self.sentinel_conf)
            return [REDIS_SERVER, conf, "--sentinel", "--port", str(self.port), "--bind",
                    "127.0.0.1", "--dir", self.dir, "--logfile", log, *self.args]
        return [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                self.dir, "--save", "", "--logfile", log, "--enable-debug-command", "yes",
                "--loadmodule", str(MODULE),
                *self.args]

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self._argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        pid = self.proc.pid

        def up() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"server on {self.port} exited: {self.tail()}")
            return bool(self.client(socket_timeout=1).info("server")["process_id"] == pid)

        wait_until(f"server on port {self.port}", up, 20)

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def kill(self) -> None:
        """SIGKILL: no shutdown, nothing saved beyond what is already on disk."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def restart(self) -> None:
        self.kill()
        self.start()

    def tail(self) -> str:
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def replica_of(master: Node, *args: str) -> Node:
    """A replica of ``master``, returned once its link is up (a diskless first sync waits
    ``repl-diskless-sync-delay``: never a fixed sleep)."""
    node = Node("--replicaof", "127.0.0.1", str(master.port), *args)
    wait_link_up(node)
    return node


def wait_link_up(node: Node, timeout: float = 30.0) -> None:
    c = node.client(socket_timeout=2)
    wait_until(
        f"replica {node.port} master_link_status:up",
        lambda: c.info("replication").get("master_link_status") == "up",
        timeout,
    )


class SentinelSet:
    """One master, ``replicas`` replicas and three Sentinels watching it as ``name``."""

    def __init__(self, name: str = "orca", replicas: int = 2, down_after_ms: int = 1000) -> None:
        self.name = name
        fast = ("--repl-diskless-sync-delay", "0")
        self.master = Node(*fast)
        self.replicas = [replica_of(self.master, *fast) for _ in range(replicas)]
        conf = (
            f"sentinel monitor {name} 127.0.0.1 {self.master.port} 2\n"
            f"sentinel down-after-milliseconds {name} {down_after_ms}\n"
            f"sentinel failover-timeout {name} 10000\n"
            f"sentinel parallel-syncs {name} 1\n"
        )
        self.sentinels = [Node(sentinel_conf=conf) for _ in range(3)]
        wait_until(
            "the sentinels to know each other and the replicas",
            lambda: all(_sentinel_sees(s, name, replicas) for s in self.sentinels),
            30,
        )

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", s.port) for s in self.sentinels]

    def nodes(self) -> list[Node]:
        return [self.master, *self.replicas]

    def current_master(self) -> Node:
        sentinel = redis.Sentinel(self.addresses, socket_timeout=1)  # type: ignore[no-untyped-call]
        _, port = sentinel.discover_master(self.name)  # type: ignore[no-untyped-call]
        return next(n for n in self.nodes() if n.port == int(port))

    def close(self) -> None:
        for n in [*self.sentinels, *self.nodes()]:
            n.close()



def _sentinel_sees(s: Node, name: str, replicas: int) -> bool:
    state: Any = s.client().sentinel_master(name)
    return bool(state.get("num-other-sentinels") == 2 and state.get("num-slaves") == replicas)


class ClusterSet:
    """A Redis Cluster of ``masters`` masters with the module (no replicas), joined by
    ``redis-cli --cluster create``; ``migrate(key, to)`` moves a key's slot to another node
    (``CLUSTER SETSLOT ... IMPORTING/MIGRATING``, ``MIGRATE``, ``SETSLOT ... NODE``)."""

    def __init__(self, masters: int = 3) -> None:
        self.nodes = [
            Node(
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-port", str(free_port()), "--cluster-node-timeout", "5000",
                "--appendonly", "no",
            )
            for _ in range(masters)
        ]
        out = subprocess.run(
            [REDIS_CLI, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
        )
        if out.returncode != 0 or "All 16384 slots covered" not in out.stdout:
            self.close()
            raise AssertionError(f"redis-cli --cluster create failed:\n{out.stdout}{out.stderr}")
        self.wait_ok()

    def wait_ok(self) -> None:
        for n in self.nodes:
            wait_until(f"cluster_state:ok on {n.port}", lambda n=n: self._ok(n))  # type: ignore[misc]

    def _ok(self, n: Node) -> bool:
        i: Any = n.client(decode_responses=True).cluster("INFO")
        return bool(
            i["cluster_state"] == "ok"
            and int(i["cluster_known_nodes"]) == len(self.nodes)
            and int(i["cluster_slots_ok"]) == 16384
        )

    @property
    def startup(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", n.port) for n in self.nodes]

    def owner(self, key: str) -> Node:
        slot = int(self.nodes[0].client().cluster("KEYSLOT", key))
        for n in self.nodes:
            for start, end, *_ in _slot_ranges(n):
                if start <= slot <= end:
                    return n
        raise AssertionError(f"no node serves slot {slot}")

    def node_id(self, n: Node) -> str:
        return str(n.client(decode_responses=True).cluster("MYID"))

    def migrate(self, key: str, to: Node, pause_s: float = 0.0) -> None:
        """Moves ``key``'s slot (and every key in it) from its owner to ``to``; ``pause_s``
        between the MIGRATE and the final SETSLOT (the window in which clients get ASK)."""
        src = self.owner(key)
        s, d = src.client(decode_responses=True), to.client(decode_responses=True)
        slot = int(s.cluster("KEYSLOT", key))
        d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", self.node_id(src))  # type: ignore[no-untyped-call]
        s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", self.node_id(to))  # type: ignore[no-untyped-call]
        while True:
            keys = s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)  # type: ignore[no-untyped-call]
            if not keys:
                break
            s.execute_command("MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", *keys)  # type: ignore[no-untyped-call]
        time.sleep(pause_s)
        for n in [to, src, *(x for x in self.nodes if x not in (to, src))]:
            n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", self.node_id(to))  # type: ignore[no-untyped-call]
        self.wait_ok()

    def close(self) -> None:
        for n in self.nodes:
            n.close()


def _slot_ranges(n: Node) -> list[list[Any]]:
    ranges: list[list[Any]] = []
    for entry in n.client().execute_command("CLUSTER", "SLOTS"):  # type: ignore[no-untyped-call]
        start, end, primary = int(entry[0]), int(entry[1]), entry[2]
        if int(primary[1]) == n.port:
            ranges.append([start, end])
    return ranges
