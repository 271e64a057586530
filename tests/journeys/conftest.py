"""The operator journeys run on the default cluster of live_cluster.py."""

from live_cluster import _clean_default_topics_after, cluster, operator  # noqa: F401 (fixtures)
