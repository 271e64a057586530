"""Type stubs of the compiled core (native/src); the docstrings there say why."""

import numpy as np
import numpy.typing as npt

__version__: str

_I64 = npt.NDArray[np.int64]
_F64 = npt.NDArray[np.float64]

def sigmoid_steps(form: str) -> list[float]:
    """Where the "fgd" or "hetsched" score formula reaches 1..100 (native/src/score.rs)."""

_Term = tuple[str, tuple[object, ...]]

def score_feasible(
    n: int, version: _I64, cpu_free: _I64, mem_free: _I64, healthy: npt.NDArray[np.bool_],
    model: _I64, gpu_free: _I64, idx: _I64,
    task: tuple[int, int, int, int, bool, list[int] | None],
    terms: list[tuple[float, _Term]], least_free: bool, width: int,
) -> tuple[_I64, _I64 | None, _F64, list[_F64]]:
    """The scheduler's scoring pass over ``idx`` for core policies (native/src/place.rs)."""

class FragTable:
    """FGD's F(v) per node slot and F(v') per placement option (native/src/fragmentation.rs)."""

    def __init__(self, cpu_milli: list[int], gpu_milli: list[int], num_gpu: list[int],
                 prob: list[float], model_ok: list[list[bool]]) -> None: ...
    def refresh(self, n: int, version: _I64, gpu_free: _I64, cpu_free: _I64, model: _I64,
                idx: _I64 | None = None) -> None: ...
    def frag(self, n: int) -> _F64: ...
    def row(self, v: int) -> tuple[list[int], list[int], list[int], float]: ...
    def delta(self, slots: _I64, cpu_free: _I64, idle: _I64, free: _I64 | None,
              task_cpu: int, num_gpu: int, share: int,
              fractional: bool) -> tuple[_F64, _F64]: ...
    def scores(self, slots: _I64, cpu_free: _I64, idle: _I64, free: _I64 | None,
               task_cpu: int, num_gpu: int, share: int, fractional: bool, sigmoid: str,
               scale: float, strand: tuple[float, float] | None = None,
               pressure: tuple[float, _F64] | None = None) -> _F64: ...
    def scores_rows(self, nodes: _I64, at: list[int], cpu_free: list[int], idle: list[int],
                    free: list[int] | None, task_cpu: int, num_gpu: int, share: int,
                    fractional: bool, sigmoid: str, scale: float,
                    strand: tuple[float, float] | None = None,
                    pressure: tuple[float, list[float]] | None = None) -> list[float]: ...
    def delta_rows(self, nodes: _I64, at: list[int], cpu_free: list[int], idle: list[int],
                   free: list[int] | None, task_cpu: int, num_gpu: int, share: int,
                   fractional: bool) -> tuple[list[float], list[float]]: ...

def top_k(total: _F64, rank: _I64, k: int) -> list[int]:
    """The ``k`` best node slots of a reason, best first (native/src/select.rs)."""

def node_classes(idx: _I64, model: _I64, cpu_free: _I64, mem_free: _I64,
                 healthy: npt.NDArray[np.bool_], gpu_count: _I64, gpu_free: _I64,
                 tag_count: _I64) -> tuple[_I64, _I64]:
    """(first node of each class, class of each node) of ``idx`` (native/src/classes.rs)."""
