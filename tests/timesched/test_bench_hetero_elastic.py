"""bench/hetero_elastic.py's multi-GPU elastic variant of Gavel's workload: scale factors
drawn as Gavel's generator draws them, run times from Gavel's throughputs, and a node
list of 4-GPU servers (issue 35's elastic target)."""

from __future__ import annotations

import csv
import importlib.util
import random
from pathlib import Path

import pytest

from streams.sim.time.jobs import read_jobs
from streams.sim.traces import read_nodes

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("hetero_elastic",
                                              ROOT / "bench" / "hetero_elastic.py")
assert spec is not None and spec.loader is not None
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


class FixedDraw(random.Random):
    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def uniform(self, a: float, b: float) -> float:
        return self.value


@pytest.mark.parametrize(("r", "n"), [(0.0, 1), (0.69, 1), (0.7, 2), (0.8, 2), (0.81, 4),
                                      (0.95, 4), (0.96, 8), (1.0, 8)])
def test_scale_factors_follow_gavels_philly_distribution(r: float, n: int) -> None:
    assert bench.scale_factor(FixedDraw(r)) == n


def test_the_variant_scales_each_job_from_gavels_throughputs(tmp_path: Path) -> None:
    # random.Random(0) draws 0.844 (4 GPUs), 0.758 (2), 0.421 (1). Type 'T' runs 10 steps/s
    # on a V100 alone, 36 on 4 V100s, 18 on 2; on a P100 5, 16 and 9; a K80 runs it on one
    # GPU (2 steps/s) only. Job 'a' took 360 s on one V100 in Gavel's file: drawn at 4 GPUs,
    # its 360 s are on 4 V100s, so it has 360 x 36 steps: 810 s on 4 P100s, 1,296 s on
    # one V100, 2,592 on one P100; no K80 figure at 4 GPUs, so it cannot run there.
    # 'b' (2 GPUs): 100 x 18 steps. 'c' stays a one-GPU job as in the file. 'u' is of a
    # type Gavel measured on one GPU only: it keeps 1 whatever it drew.
    tput = tmp_path / "tp.csv"
    tput.write_text("job_type,scale_factor,throughput_v100,throughput_p100,throughput_k80\n"
                    "T,1,10,5,2\nT,2,18,9,\nT,4,36,16,\nU,1,4,4,4\n")
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "job_id,arrival_s,duration_s,num_gpus,gpu_milli,gpu_models,tenant,priority,qos,"
        "task_class,in_window,restart_s,duration_s@V100M16,duration_s@P100,duration_s@K80\n"
        "a,0,360,1,1000,,g,0,burstable,T,1,0,360,720,1800\n"
        "b,1,100,1,1000,,g,0,burstable,T,0,0,100,200,500\n"
        "c,2,50,1,1000,,g,0,burstable,T,1,0,50,100,250\n"
        "u,3,10,1,1000,,g,0,burstable,U,0,0,10,10,10\n")
    header, rows = bench.elastic_rows(jobs, bench.read_throughputs(tput), seed=0)
    a, b, c, u = rows
    assert (a["num_gpus"], a["min_gpus"], a["max_gpus"], a["restart_s"]) == ("4", "1", "4", "")
    assert (a["duration_s@V100M16"], a["duration_s@P100"], a["duration_s@K80"]) == (
        "360.00", "810.00", "")
    assert (a["duration1_s@V100M16"], a["duration1_s@P100"], a["duration1_s@K80"]) == (
        "1296.00", "2592.00", "")
    assert a["duration_s"] == "360.00" and a["in_window"] == "1"
    assert (b["num_gpus"], b["duration_s@P100"], b["duration1_s@V100M16"]) == (
        "2", "200.00", "180.00")
    assert (c["num_gpus"], c["min_gpus"], c["duration_s@K80"], c["duration1_s@K80"]) == (
        "1", "", "250.00", "")
    assert u["num_gpus"] == "1"
    out = tmp_path / "variant.csv"
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    read = {j.job_id: j for j in read_jobs(out)}  # the simulator reads it as written
    assert read["a"].meta.elastic == (1, 4) and read["a"].request.gpu_models == (
        "P100", "V100M16")
    assert read["a"].speeds.rate("V100M16", 1) == pytest.approx(1 / 1296)
    assert read["c"].meta.elastic == () and read["a"].restart_s is None


def test_the_servers_regroup_gavels_gpus_by_four(tmp_path: Path) -> None:
    one = tmp_path / "one.csv"
    one.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"{m.lower()}-{i},8000,65536,1,{m}\n" for m in ("V100M16", "K80") for i in range(6)))
    out = tmp_path / "four.csv"
    bench.write_servers(one, out)
    nodes = read_nodes(out)
    assert sorted((n.gpu_model, n.gpu_count, n.cpu_milli) for n in nodes) == [
        ("K80", 2, 16000), ("K80", 4, 32000), ("V100M16", 2, 16000), ("V100M16", 4, 32000)]
