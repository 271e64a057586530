"""A pytest plugin that lets mutmut 3.7 collect its per-test stats under pytest 9.

Why: mutmut 3.7 reads ``item._nodeid``, which pytest 9 no longer has (it keeps the
id as ``item.nodeid``). mutmut 3.8 reads ``nodeid``, but it needs click>=8.4.2 and
faust-streaming pins click<8.4, so 3.7 is the newest that installs beside the
project. ``./dev mutate`` loads this plugin (``[tool.mutmut]`` in pyproject.toml);
drop it once a mutmut release without the click floor reads ``nodeid``.
"""

from __future__ import annotations

import pytest

if not hasattr(pytest.Item, "_nodeid"):
    pytest.Item._nodeid = property(lambda item: item.nodeid)  # type: ignore[attr-defined]
