"""A minimal Faust app used by the foundation test as a real worker process.

An agent reads words from ``$COUNTER_IN``, counts them in a changelog-backed
table and writes ``word:count`` to ``$COUNTER_OUT``. Run it as a Faust worker:

    APP_ID=x COUNTER_IN=in COUNTER_OUT=out DATA_DIR=dir python faust_counter_app.py worker

``DATA_DIR`` is where Faust keeps its per-app folder; the test gives it a
temporary one, since Faust's default is a folder in the working directory.
"""

from __future__ import annotations

import os

import faust

from schemas.kafka import faust_broker_url

app = faust.App(
    os.environ["APP_ID"],
    broker=faust_broker_url(),
    datadir=os.environ["DATA_DIR"],
    store="memory://",
    web_enabled=False,
    topic_partitions=1,
    topic_replication_factor=1,
)
words_topic = app.topic(
    os.environ["COUNTER_IN"], key_type=str, value_type=str,
    key_serializer="raw", value_serializer="raw",
)
counts_topic = app.topic(
    os.environ["COUNTER_OUT"], key_type=str, value_type=str,
    key_serializer="raw", value_serializer="raw",
)
word_to_count = app.Table("word_to_count", default=int, partitions=1)


@app.agent(words_topic)
async def count_words(stream: faust.StreamT[str]) -> None:
    async for word in stream:
        word_to_count[word] += 1
        await counts_topic.send(key=word, value=f"{word}:{word_to_count[word]}")


if __name__ == "__main__":
    app.main()
