"""Prometheus metrics of a node process (agent, executor, sim-cluster).

Served over HTTP with ``--metrics-port PORT`` (0 = off, the default) at
``/metrics``. The gauges are read from the live node objects at scrape time
(a custom collector), so the agent's and executor's hot paths do nothing
extra; the only counter kept on the side is the executor's decision outcomes.

Names follow Prometheus conventions: ``hetsched_`` prefix, ``_total`` for
counters, base units (``_bytes``, ``_celsius``, ``_watts``), ratios 0..1.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

MIB = 1024 * 1024

DECISIONS_HANDLED = Counter(
    "hetsched_executor_decisions_total",
    "Decision events the executor looked at, by outcome (started, duplicate, other-node, ...)",
    ["node", "outcome"],
)


class NodeCollector(Collector):
    """Reads agents and executors of this process when Prometheus scrapes."""

    def __init__(self, nodes: Callable[[], Iterable[Any]]) -> None:
        self._nodes = nodes

    def collect(self) -> Iterator[Metric]:
        labels = ["node", "gpu", "model"]
        util = GaugeMetricFamily("hetsched_gpu_utilization_ratio",
                                 "Latest sampled GPU utilisation (0..1)", labels=labels)
        mem = GaugeMetricFamily("hetsched_gpu_memory_used_bytes",
                                "Latest sampled GPU memory in use", labels=labels)
        temp = GaugeMetricFamily("hetsched_gpu_temperature_celsius",
                                 "Latest sampled GPU temperature", labels=labels)
        power = GaugeMetricFamily("hetsched_gpu_power_watts",
                                  "Latest sampled GPU power draw", labels=labels)
        foreign = GaugeMetricFamily("hetsched_gpu_foreign_memory_used_bytes",
                                    "GPU memory held by processes of no task of this node "
                                    "(per-process accounting; absent where unavailable)",
                                    labels=labels)
        published = CounterMetricFamily("hetsched_agent_events_published",
                                        "Events the agent published, by type",
                                        labels=["node", "type"])
        running = GaugeMetricFamily("hetsched_executor_running_tasks",
                                    "Tasks the executor runs now", labels=["node"])
        for node in self._nodes():
            agent = node.agent
            node_id = agent.node.node_id
            models = {g.index: g.model for g in (agent.inventory.gpus if agent.inventory
                                                   else [])}
            for index, s in sorted(agent.last_samples.items()):
                lv = [node_id, str(index), str(models.get(index, ""))]
                util.add_metric(lv, s.util_pct / 100.0)
                mem.add_metric(lv, s.mem_used_mib * MIB)
                if s.temperature_c is not None:
                    temp.add_metric(lv, s.temperature_c)
                if s.power_w is not None:
                    power.add_metric(lv, s.power_w)
                if s.foreign_mem_mib is not None:
                    foreign.add_metric(lv, s.foreign_mem_mib * MIB)
            for kind, count in sorted(agent.published.items()):
                published.add_metric([node_id, kind], count)
            if node.executor is not None:
                running.add_metric([node_id], len(node.executor.running_task_ids()))
        yield from (util, mem, temp, power, foreign, published, running)


def serve_metrics(port: int, nodes: Callable[[], Iterable[Any]],
                  health: Callable[[], tuple[int, bytes]] | None = None) -> None:
    """Register the collector and start the HTTP endpoint (a daemon thread).

    It binds ``HETSCHED_METRICS_HOST`` (127.0.0.1 by default: a laptop's demo
    should not expose its metrics; containers set 0.0.0.0). With ``health``
    (HTTP status, JSON body) the same port answers ``/health`` too: 503 while
    Kafka is unreachable (``agents.runtime``), which a load balancer or
    systemd watchdog can read without parsing metrics.
    """
    REGISTRY.register(NodeCollector(nodes))
    addr = os.environ.get("HETSCHED_METRICS_HOST", "127.0.0.1")
    if health is None:
        start_http_server(port, addr=addr)
        return
    import socket
    import threading
    from http.server import ThreadingHTTPServer

    from prometheus_client.exposition import MetricsHandler

    page = health

    class Handler(MetricsHandler):  # type: ignore[misc]
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/health":
                super().do_GET()
                return
            status, body = page()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET

    server = Server((addr, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
