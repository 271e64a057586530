"""The fake ``pynvml`` must be the real API, or the NVML tests prove nothing."""

from __future__ import annotations

import inspect
import warnings

import fake_pynvml
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    real = pytest.importorskip("pynvml")

_PUBLIC = [n for n in dir(fake_pynvml) if n.startswith(("nvml", "NVML"))]


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in _PUBLIC
        if n.isupper() or n.startswith("nvmlEventType") or n.startswith("nvmlClocks")
    ],
)
def test_every_constant_has_the_real_value(name: str) -> None:
    assert getattr(real, name) == getattr(fake_pynvml, name)


@pytest.mark.parametrize(
    "name",
    [n for n in _PUBLIC if inspect.isfunction(getattr(fake_pynvml, n))],
)
def test_every_function_exists_with_the_real_parameter_names(name: str) -> None:
    real_params = list(inspect.signature(getattr(real, name)).parameters)
    fake_params = list(inspect.signature(getattr(fake_pynvml, name)).parameters)
    assert fake_params == real_params


@pytest.mark.parametrize(
    "class_name",
    [
        "NVMLError_GpuIsLost",
        "NVMLError_LibraryNotFound",
        "NVMLError_Timeout",
        "NVMLError_NotSupported",
        "NVMLError_DriverNotLoaded",
        "NVMLError_Unknown",
    ],
)
def test_error_classes_are_built_like_the_real_ones(class_name: str) -> None:
    real_cls = getattr(real, class_name)
    fake_cls = getattr(fake_pynvml, class_name)
    code = real_cls(0).value
    assert fake_cls(0).value == code
    assert isinstance(fake_pynvml.NVMLError(code), fake_cls)
    assert issubclass(fake_cls, fake_pynvml.NVMLError)


@pytest.mark.parametrize(
    "struct",
    [
        "c_nvmlMemory_t",
        "c_nvmlUtilization_t",
        "nvmlPciInfo_t",
        "c_nvmlEventData_t",
        "c_nvmlProcessUtilizationSample_t",
        "c_nvmlProcessUtilizationInfo_v1_t",
    ],
)
def test_result_structures_have_the_real_field_names(struct: str) -> None:
    real_fields = {name for name, *_ in getattr(real, struct)._fields_}
    fake_fields = set(getattr(fake_pynvml, struct).__dataclass_fields__)
    assert fake_fields <= real_fields


def test_running_processes_carry_the_real_process_info_fields() -> None:
    """The real calls return friendly objects built from ``c_nvmlProcessInfo_v2_t``."""
    real_fields = {name for name, *_ in real.c_nvmlProcessInfo_v2_t._fields_}
    fake_pynvml.reset([fake_pynvml.FakeGpu(processes=[fake_pynvml.FakeProcess(7, 1024)])])
    fake_pynvml.nvmlInit()
    handle = fake_pynvml.nvmlDeviceGetHandleByIndex(0)
    (proc,) = fake_pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    assert set(vars(proc)) == real_fields
    assert isinstance(proc, fake_pynvml.nvmlFriendlyObject)
    assert real.nvmlFriendlyObject.__name__ == "nvmlFriendlyObject"


def test_idle_process_utilisation_is_not_found_like_the_driver() -> None:
    fake_pynvml.reset([fake_pynvml.FakeGpu(processes=[fake_pynvml.FakeProcess(7, 1024)])])
    fake_pynvml.nvmlInit()
    handle = fake_pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(fake_pynvml.NVMLError) as caught:
        fake_pynvml.nvmlDeviceGetProcessUtilization(handle, 0)
    assert caught.value.value == real.NVML_ERROR_NOT_FOUND
    assert type(caught.value).__name__ == "NVMLError_NotFound"
