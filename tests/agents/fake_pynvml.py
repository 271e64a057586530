"""A fake ``pynvml`` module: the real API's names, constants and errors, fake GPUs.

Why: CI has no GPU, and the NVML adapter's hard part is how it reacts to
errors (a counter not supported, a timeout, a GPU lost mid-run), which a real
GPU cannot be made to produce on demand. Everything public here mirrors
nvidia-ml-py's ``pynvml`` (same function and parameter names, same constant
values, the same ``NVMLError`` class hierarchy built the same way);
``test_agent_fake_pynvml.py`` checks that against the installed module.

Use: ``fake_pynvml.reset([FakeGpu(...), ...])`` then pass the module itself
where ``pynvml`` is expected. Inject faults through the ``FakeGpu`` fields.
"""

from __future__ import annotations

import string
import sys
from collections import deque
from dataclasses import dataclass, field

# --- constants (values as in the real module) -------------------------------

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_UNKNOWN = 999

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_NVLINK_MAX_LINKS = 36
NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02
NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_SYSTEM = 50

nvmlEventTypeSingleBitEccError = 0x0000000000000001
nvmlEventTypeDoubleBitEccError = 0x0000000000000002
nvmlEventTypeXidCriticalError = 0x0000000000000008

nvmlClocksThrottleReasonGpuIdle = 0x0000000000000001
nvmlClocksThrottleReasonApplicationsClocksSetting = 0x0000000000000002
nvmlClocksThrottleReasonSwPowerCap = 0x0000000000000004
nvmlClocksThrottleReasonHwSlowdown = 0x0000000000000008
nvmlClocksThrottleReasonSyncBoost = 0x0000000000000010
nvmlClocksThrottleReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksThrottleReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x0000000000000080
nvmlClocksThrottleReasonDisplayClockSetting = 0x0000000000000100
nvmlClocksThrottleReasonNone = 0x0000000000000000
nvmlClocksEventReasonGpuIdle = 0x0000000000000001
nvmlClocksEventReasonSwPowerCap = 0x0000000000000004
nvmlClocksEventReasonHwSlowdown = 0x0000000000000008
nvmlClocksEventReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksEventReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksEventReasonNone = 0x0000000000000000


# --- errors: same construction as pynvml's _extractNVMLErrorsAsClasses ------


class NVMLError(Exception):
    """Base NVML error; ``NVMLError(code)`` returns the code's subclass, like the real one."""

    _valClassMapping: dict[int, type[NVMLError]] = {}  # noqa: RUF012 - mirrors pynvml
    value: int

    def __new__(cls, value: int) -> NVMLError:  # type: ignore[misc]
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return _ERROR_TEXT.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NVMLError) and self.value == other.value

    __hash__ = Exception.__hash__


_ERROR_TEXT = {
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


def _extract_errors_as_classes() -> None:
    module = sys.modules[__name__]
    for err_name in [n for n in dir(module) if n.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(
            err_name.replace("NVML_ERROR_", ""), "_"
        ).replace("_", "")
        err_val = getattr(module, err_name)

        def gen_new(val: int):  # type: ignore[no-untyped-def]
            def new(typ, *args):  # type: ignore[no-untyped-def]
                return NVMLError.__new__(typ, val)

            return new

        cls = type(class_name, (NVMLError,), {"__new__": gen_new(err_val)})
        cls.__module__ = __name__
        setattr(module, class_name, cls)
        NVMLError._valClassMapping[err_val] = cls


_extract_errors_as_classes()


# --- result structures (attribute names as the real ctypes structures) ------


@dataclass
class c_nvmlMemory_t:
    total: int
    free: int
    used: int


@dataclass
class c_nvmlUtilization_t:
    gpu: int
    memory: int


@dataclass
class nvmlPciInfo_t:
    busId: bytes


@dataclass
class c_nvmlEventData_t:
    device: object
    eventType: int
    eventData: int
    gpuInstanceId: int = 0
    computeInstanceId: int = 0


@dataclass
class c_nvmlProcessUtilizationSample_t:
    pid: int
    timeStamp: int
    smUtil: int
    memUtil: int
    encUtil: int = 0
    decUtil: int = 0


@dataclass
class c_nvmlProcessUtilizationInfo_v1_t:
    timeStamp: int
    pid: int
    smUtil: int
    memUtil: int
    encUtil: int = 0
    decUtil: int = 0
    jpgUtil: int = 0
    ofaUtil: int = 0


class nvmlFriendlyObject:
    """What the real running-process calls return: a plain object whose attributes are
    the ``c_nvmlProcessInfo_v2_t`` fields (``usedGpuMemory`` None where unavailable)."""

    def __init__(self, dictionary: dict[str, object]) -> None:
        for key, value in dictionary.items():
            setattr(self, key, value)


# --- the fake machine --------------------------------------------------------


@dataclass
class FakeProcess:
    """A process holding a context on a fake GPU."""

    pid: int
    used_memory: int | None
    """Bytes, or None (the driver cannot say, as under WDDM)."""
    sm_util: int = 0
    mem_util: int = 0
    mps_client: bool = False
    """Listed by nvmlDeviceGetMPSComputeRunningProcesses instead of the compute list."""


@dataclass
class FakeGpu:
    """One fake GPU. Mutate fields between samples to script a scenario."""

    name: str = "NVIDIA A100-SXM4-80GB"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    bus_id: str = "00000000:07:00.0"
    memory_total: int = 80 * 1024**3
    memory_used: int = 0
    util_gpu: int = 0
    util_memory: int = 0
    temperature: int = 40
    power_mw: int = 90_000
    power_limit_mw: int = 400_000
    sm_clock: int = 1410
    throttle: int = 0
    ecc_sbe: int = 0
    ecc_dbe: int = 0
    numa_node: int = 0
    pcie_gen: int = 4
    pcie_width: int = 16
    nvlink_version: int = 3
    nvlinks: list[str] = field(default_factory=list)
    """Remote PCI bus ids of active NVLinks (``"switch"`` for an NVSwitch port)."""
    lost: bool = False
    """Every call on this GPU raises NVMLError_GpuIsLost."""
    unsupported: set[str] = field(default_factory=set)
    """Function names that raise NVMLError_NotSupported on this GPU."""
    fail_next: dict[str, int] = field(default_factory=dict)
    """Function name -> error code raised once on the next call."""
    xid_queue: deque[int] = field(default_factory=deque)
    processes: list[FakeProcess] = field(default_factory=list)


@dataclass
class _Handle:
    index: int


_gpus: list[FakeGpu] = []
_initialised = False
_init_error: int | None = None
_topology: dict[tuple[int, int], int] = {}
_clock_us = 1_700_000_000_000_000
"""NVML's CPU timestamps (microseconds); each utilisation read is a new sample period."""
calls: list[str] = []
"""Names of every API function called, in order (for assertions)."""


def reset(
    gpus: list[FakeGpu],
    *,
    init_error: int | None = None,
    topology: dict[tuple[int, int], int] | None = None,
) -> None:
    """Install a fresh fake machine. ``init_error`` makes ``nvmlInit`` fail with that code."""
    global _initialised, _init_error
    _gpus[:] = gpus
    _initialised = False
    _init_error = init_error
    _topology.clear()
    _topology.update(topology or {})
    calls.clear()


def _gpu(handle: _Handle, fn: str) -> FakeGpu:
    calls.append(fn)
    if not _initialised:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    gpu = _gpus[handle.index]
    if gpu.lost:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    code = gpu.fail_next.pop(fn, None)
    if code is not None:
        raise NVMLError(code)
    if fn in gpu.unsupported:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu


# --- API ----------------------------------------------------------------------


def nvmlInit() -> None:
    global _initialised
    calls.append("nvmlInit")
    if _init_error is not None:
        raise NVMLError(_init_error)
    _initialised = True


def nvmlShutdown() -> None:
    global _initialised
    calls.append("nvmlShutdown")
    _initialised = False


def nvmlSystemGetDriverVersion() -> str:
    calls.append("nvmlSystemGetDriverVersion")
    return "550.54.15"


def nvmlDeviceGetCount() -> int:
    calls.append("nvmlDeviceGetCount")
    if not _initialised:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    return len(_gpus)


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    calls.append("nvmlDeviceGetHandleByIndex")
    if not 0 <= index < len(_gpus):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(index)


def nvmlDeviceGetIndex(handle: _Handle) -> int:
    _gpu(handle, "nvmlDeviceGetIndex")
    return handle.index


def nvmlDeviceGetName(handle: _Handle) -> str:
    return _gpu(handle, "nvmlDeviceGetName").name


def nvmlDeviceGetUUID(handle: _Handle) -> str:
    return _gpu(handle, "nvmlDeviceGetUUID").uuid


def nvmlDeviceGetMemoryInfo(handle: _Handle, version: int | None = None) -> c_nvmlMemory_t:
    g = _gpu(handle, "nvmlDeviceGetMemoryInfo")
    return c_nvmlMemory_t(g.memory_total, g.memory_total - g.memory_used, g.memory_used)


def nvmlDeviceGetUtilizationRates(handle: _Handle) -> c_nvmlUtilization_t:
    g = _gpu(handle, "nvmlDeviceGetUtilizationRates")
    return c_nvmlUtilization_t(g.util_gpu, g.util_memory)


def nvmlDeviceGetTemperature(handle: _Handle, sensor: int) -> int:
    g = _gpu(handle, "nvmlDeviceGetTemperature")
    if sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return g.temperature


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    return _gpu(handle, "nvmlDeviceGetPowerUsage").power_mw


def nvmlDeviceGetEnforcedPowerLimit(handle: _Handle) -> int:
    return _gpu(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw


def nvmlDeviceGetClockInfo(handle: _Handle, type: int) -> int:
    g = _gpu(handle, "nvmlDeviceGetClockInfo")
    if type != NVML_CLOCK_SM:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return g.sm_clock


def nvmlDeviceGetCurrentClocksThrottleReasons(handle: _Handle) -> int:
    return _gpu(handle, "nvmlDeviceGetCurrentClocksThrottleReasons").throttle


def nvmlDeviceGetCurrentClocksEventReasons(handle: _Handle) -> int:
    return _gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons").throttle


def nvmlDeviceGetTotalEccErrors(handle: _Handle, errorType: int, counterType: int) -> int:
    g = _gpu(handle, "nvmlDeviceGetTotalEccErrors")
    if counterType not in (NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return g.ecc_dbe if errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED else g.ecc_sbe


def nvmlDeviceGetPciInfo(handle: _Handle) -> nvmlPciInfo_t:
    return nvmlPciInfo_t(_gpu(handle, "nvmlDeviceGetPciInfo").bus_id.encode())


def nvmlDeviceGetNumaNodeId(handle: _Handle) -> int:
    return _gpu(handle, "nvmlDeviceGetNumaNodeId").numa_node


def nvmlDeviceGetTopologyCommonAncestor(device1: _Handle, device2: _Handle) -> int:
    _gpu(device1, "nvmlDeviceGetTopologyCommonAncestor")
    _gpu(device2, "nvmlDeviceGetTopologyCommonAncestor")
    key = (min(device1.index, device2.index), max(device1.index, device2.index))
    return _topology.get(key, NVML_TOPOLOGY_SYSTEM)


def nvmlDeviceGetNvLinkState(device: _Handle, link: int) -> int:
    g = _gpu(device, "nvmlDeviceGetNvLinkState")
    if link >= len(g.nvlinks):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return 1


def nvmlDeviceGetNvLinkVersion(device: _Handle, link: int) -> int:
    return _gpu(device, "nvmlDeviceGetNvLinkVersion").nvlink_version


def nvmlDeviceGetMaxPcieLinkGeneration(handle: _Handle) -> int:
    return _gpu(handle, "nvmlDeviceGetMaxPcieLinkGeneration").pcie_gen


def nvmlDeviceGetMaxPcieLinkWidth(handle: _Handle) -> int:
    return _gpu(handle, "nvmlDeviceGetMaxPcieLinkWidth").pcie_width


def nvmlDeviceGetNvLinkRemoteDeviceType(handle: _Handle, link: int) -> int:
    g = _gpu(handle, "nvmlDeviceGetNvLinkRemoteDeviceType")
    if g.nvlinks[link] == "switch":
        return NVML_NVLINK_DEVICE_TYPE_SWITCH
    return NVML_NVLINK_DEVICE_TYPE_GPU


def nvmlDeviceGetNvLinkRemotePciInfo(device: _Handle, link: int) -> nvmlPciInfo_t:
    g = _gpu(device, "nvmlDeviceGetNvLinkRemotePciInfo")
    return nvmlPciInfo_t(g.nvlinks[link].encode())


@dataclass
class _EventSet:
    devices: list[int] = field(default_factory=list)


def nvmlEventSetCreate() -> _EventSet:
    calls.append("nvmlEventSetCreate")
    return _EventSet()


def nvmlDeviceRegisterEvents(handle: _Handle, eventTypes: int, eventSet: _EventSet) -> None:
    _gpu(handle, "nvmlDeviceRegisterEvents")
    eventSet.devices.append(handle.index)


def nvmlEventSetWait(eventSet: _EventSet, timeoutms: int) -> c_nvmlEventData_t:
    calls.append("nvmlEventSetWait")
    for index in eventSet.devices:
        queue = _gpus[index].xid_queue
        if queue:
            return c_nvmlEventData_t(_Handle(index), nvmlEventTypeXidCriticalError, queue.popleft())
    raise NVMLError(NVML_ERROR_TIMEOUT)


def nvmlEventSetFree(eventSet: _EventSet) -> None:
    calls.append("nvmlEventSetFree")
    eventSet.devices.clear()


# --- per-process accounting ---------------------------------------------------


def _process_infos(g: FakeGpu, mps: bool) -> list[nvmlFriendlyObject]:
    return [
        nvmlFriendlyObject(
            {
                "pid": p.pid,
                "usedGpuMemory": p.used_memory,
                "gpuInstanceId": 0xFFFFFFFF,
                "computeInstanceId": 0xFFFFFFFF,
            }
        )
        for p in g.processes
        if p.mps_client == mps
    ]


def nvmlDeviceGetComputeRunningProcesses(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _process_infos(_gpu(handle, "nvmlDeviceGetComputeRunningProcesses"), False)


def nvmlDeviceGetMPSComputeRunningProcesses(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _process_infos(_gpu(handle, "nvmlDeviceGetMPSComputeRunningProcesses"), True)


def _busy_since(g: FakeGpu, timeStamp: int) -> list[FakeProcess]:
    """Like the driver: only processes busy in the period, only samples newer than asked;
    none at all is NVML_ERROR_NOT_FOUND (raised by the real wrapper as an NVMLError)."""
    global _clock_us
    _clock_us += 1_000_000
    busy = [p for p in g.processes if (p.sm_util or p.mem_util) and _clock_us > timeStamp]
    if not busy:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return busy


def nvmlDeviceGetProcessUtilization(
    handle: _Handle, timeStamp: int
) -> list[c_nvmlProcessUtilizationSample_t]:
    g = _gpu(handle, "nvmlDeviceGetProcessUtilization")
    return [
        c_nvmlProcessUtilizationSample_t(p.pid, _clock_us, p.sm_util, p.mem_util)
        for p in _busy_since(g, timeStamp)
    ]


def nvmlDeviceGetProcessesUtilizationInfo(
    handle: _Handle, timeStamp: int
) -> list[c_nvmlProcessUtilizationInfo_v1_t]:
    g = _gpu(handle, "nvmlDeviceGetProcessesUtilizationInfo")
    return [
        c_nvmlProcessUtilizationInfo_v1_t(_clock_us, p.pid, p.sm_util, p.mem_util)
        for p in _busy_since(g, timeStamp)
    ]
