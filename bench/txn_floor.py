"""The latency floor of the service's path: bare transactional hops, no scheduling.

    .venv/bin/python bench/txn_floor.py --bootstrap 127.0.0.1:9092 [--rate 200]
        [--seconds 30] [--hops 2] [--payload 400] [--shared] [--client confluent]
        [--out FILE]

Why: the service's submit -> decision path is two exactly-once hops (router, then
scheduler), each a read_committed fetch, a transaction (AddPartitionsToTxn, Produce,
EndTxn) and the broker's commit markers. This bench runs the same shape with nothing
else: this process sends ``--rate`` records/s (``--payload`` bytes, the size of a
submission) to an 8-partition topic; a child process (one event loop, like the worker)
runs ``--hops`` textbook consume-transform-produce loops in a chain, each
copying every fetched record to the next topic in one transaction per fetch, with the
next offsets written in the same transaction as a record of a compacted state topic
(the service's way: the same three requests per transaction); a read_committed
consumer in this process takes the arrival time. Latency = arrival - send
(``time.time()``). The aiokafka clients take the project's security settings from the
environment (``schemas.kafka.aiokafka_kwargs``), so the floor can be measured on any
cluster the worker runs against; ``--client confluent`` is plaintext only.

What the service adds to this floor is its own work (routing, the scheduling step,
state, pipelining); what this floor costs is the client, the broker and the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Literal

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schemas.admin import delete_topics_with_prefix, ensure_topics
from schemas.event_loop import use_event_loop
from schemas.kafka import aiokafka_kwargs
from schemas.topics import TopicSpec

PARTITIONS = 8


def topic(prefix: str, i: int) -> str:
    return f"{prefix}.t{i}"


def topic_specs(prefix: str, hops: int) -> list[TopicSpec]:
    """The chain's topics and each hop's compacted state topic (deleted after the run)."""
    def spec(name: str, policy: Literal["delete", "compact"]) -> TopicSpec:
        return TopicSpec(name=name, key="", partitions=PARTITIONS, cleanup_policy=policy,
                         retention_ms=-1, description="bench/txn_floor.py")
    return ([spec(topic(prefix, i), "delete") for i in range(hops + 1)]
            + [spec(f"{prefix}.state{i}", "compact") for i in range(hops)])


async def hop(bootstrap: str, prefix: str, hops: list[int], stats: dict[str, int]) -> None:
    """Topic i -> topic i+1 for every i in ``hops``, one transaction per fetch, offsets
    as state records; several hops share one consumer, producer and transaction."""
    sources = {topic(prefix, i): i for i in hops}
    name = f"{prefix}-hop{'-'.join(map(str, hops))}"
    consumer = AIOKafkaConsumer(*sources, bootstrap_servers=bootstrap, group_id=name,
                                isolation_level="read_committed", enable_auto_commit=False,
                                auto_offset_reset="earliest", **aiokafka_kwargs())
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                transactional_id=name, retry_backoff_ms=20,
                                **aiokafka_kwargs())
    await consumer.start()
    await producer.start()
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=200, max_records=1600)
            if not batches:
                continue
            await producer.begin_transaction()
            futures = []
            for tp, records in batches.items():
                i = sources[tp.topic]
                for r in records:
                    futures.append(await producer.send(topic(prefix, i + 1), r.value,
                                                       key=r.key, partition=tp.partition))
                futures.append(await producer.send(
                    f"{prefix}.state{i}", str(records[-1].offset + 1).encode(),
                    key=f"offset/{tp.topic}/{tp.partition}".encode(), partition=tp.partition))
            await asyncio.gather(*futures)
            await producer.commit_transaction()
            stats["rounds"] += 1
            stats["records"] += sum(len(v) for v in batches.values())
    finally:
        await producer.stop()
        await consumer.stop()


def confluent_hop(bootstrap: str, prefix: str, i: int, stats: dict[str, int],
                  stop: threading.Event) -> None:
    """:func:`hop` with confluent-kafka (librdkafka: the protocol in C threads)."""
    from confluent_kafka import Consumer, Producer

    src, dst, state = topic(prefix, i), topic(prefix, i + 1), f"{prefix}.state{i}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{prefix}-hop{i}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "socket.nagle.disable": True})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}-hop{i}",
                         "linger.ms": 0, "socket.nagle.disable": True,
                         # CONCURRENT_TRANSACTIONS right after a commit is retried after
                         # this (100 ms by default); aiokafka's hops use 20 ms
                         "retry.backoff.ms": 20})
    producer.init_transactions()
    consumer.subscribe([src])
    try:
        while not stop.is_set():
            first = consumer.poll(0.2)  # consume() would wait for all 1,600 or the timeout
            if first is None:
                continue
            messages = [m for m in [first, *consumer.consume(num_messages=1599, timeout=0)]
                        if m.error() is None]
            if not messages:
                continue
            producer.begin_transaction()
            last: dict[int, int] = {}
            for m in messages:
                producer.produce(dst, m.value(), m.key(), partition=m.partition())
                last[m.partition()] = m.offset()
            for partition, offset in last.items():
                producer.produce(state, str(offset + 1).encode(),
                                 f"offset/{src}/{partition}".encode(), partition=partition)
            producer.commit_transaction()
            stats["rounds"] += 1
            stats["records"] += len(messages)
    finally:
        consumer.close()


def run_hops(bootstrap: str, prefix: str, hops: int, seconds: float, client: str,
             shared: bool) -> None:
    """Child process: the hops on one event loop; prints its CPU and rounds as JSON."""
    stats = {"rounds": 0, "records": 0}
    if client == "confluent":
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        threads = [threading.Thread(target=confluent_hop, args=(bootstrap, prefix, i, stats, stop))
                   for i in range(hops)]
        for t in threads:
            t.start()
        stop.wait(seconds)
        stop.set()
        for t in threads:
            t.join()
        print(json.dumps({"cpu_s": time.process_time(), **stats}))
        return
    use_event_loop()

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        chains = [list(range(hops))] if shared else [[i] for i in range(hops)]
        tasks = [asyncio.ensure_future(hop(bootstrap, prefix, c, stats)) for c in chains]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
    print(json.dumps({"cpu_s": time.process_time(), **stats}))


async def generate(bootstrap: str, prefix: str, hops: int, rate: float, seconds: float,
                   payload: int) -> dict[str, Any]:
    """Send ``rate`` records/s for ``seconds`` and time each one's arrival at the end."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                enable_idempotence=True, **aiokafka_kwargs())
    consumer = AIOKafkaConsumer(topic(prefix, hops), bootstrap_servers=bootstrap,
                                group_id=None, isolation_level="read_committed",
                                auto_offset_reset="earliest", **aiokafka_kwargs())
    await producer.start()
    await consumer.start()
    sent: dict[int, float] = {}
    latency: list[float] = []
    pad = b"x" * max(0, payload - 40)

    async def receive() -> None:
        while True:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                now = time.time()
                for r in records:
                    n = orjson.loads(r.value)["n"]
                    if n in sent:
                        latency.append(now - sent.pop(n))

    receiver = asyncio.ensure_future(receive())
    try:
        began = time.monotonic()
        n = 0
        while (elapsed := time.monotonic() - began) < seconds:
            due = int(elapsed * rate)
            while n < due:
                sent[n] = time.time()
                value = orjson.dumps({"n": n, "pad": pad.decode()})
                await producer.send(topic(prefix, 0), value, key=str(n).encode())
                n += 1
            await asyncio.sleep(0.001)
        deadline = time.monotonic() + 10
        while sent and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    finally:
        receiver.cancel()
        await producer.stop()
        await consumer.stop()
    latency.sort()

    def pct(q: float) -> float:
        return round(1000 * latency[min(len(latency) - 1, int(q * len(latency)))], 1)

    return {"sent": n, "arrived": len(latency), "p50_ms": pct(0.5), "p90_ms": pct(0.9),
            "p99_ms": pct(0.99), "max_ms": round(1000 * latency[-1], 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default="127.0.0.1:9092")
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--hops", type=int, default=2)
    p.add_argument("--payload", type=int, default=400)
    p.add_argument("--client", choices=("aiokafka", "confluent"), default="aiokafka",
                   help="the hops' Kafka client (confluent: confluent-kafka, not a project "
                        "dependency; pip install it to compare)")
    p.add_argument("--shared", action="store_true",
                   help="aiokafka: all hops in one loop, one consumer and one transaction per "
                        "fetch (a record still crosses one committed hop at a time)")
    p.add_argument("--out", help="also write the result (JSON) here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        run_hops(args.bootstrap, args.child, args.hops, args.seconds, args.client, args.shared)
        return
    prefix = f"txnfloor-{uuid.uuid4().hex[:8]}"
    asyncio.run(ensure_topics(args.bootstrap, topic_specs(prefix, args.hops)))
    warmup_s = 5.0
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", prefix, "--bootstrap", args.bootstrap,
         "--hops", str(args.hops), "--client", args.client, *(["--shared"] if args.shared else []),
         "--seconds", str(args.seconds + warmup_s + 60)],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        time.sleep(warmup_s)  # the hops join their groups
        use_event_loop()
        result = asyncio.run(generate(args.bootstrap, prefix, args.hops, args.rate,
                                      args.seconds, args.payload))
    finally:
        child.terminate()
        out, _ = child.communicate(timeout=60)
        asyncio.run(delete_topics_with_prefix(args.bootstrap, prefix))
    hops = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    result = {"hops": args.hops, "client": args.client, "shared": args.shared,
              "rate": args.rate, "seconds": args.seconds,
              "load": "loadavg " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
              **result, "hop_process": hops}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
