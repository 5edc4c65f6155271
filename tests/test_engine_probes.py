"""What the evidence run reads off the machine around each timed batch
(benchmarks/engine/probes.py): nvidia-smi's samples, a server's CPU time,
and what moves with a batch's time per output token."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from engine import probes  # noqa: E402


def test_an_nvidia_smi_line_is_read_by_field_and_na_is_none():
    assert probes.parse_gpu_line("1980, 3201, 431.27, 87, 41\n") == {
        "clocks.sm": 1980.0, "clocks.mem": 3201.0, "power.draw": 431.27,
        "utilization.gpu": 87.0, "temperature.gpu": 41.0}
    assert probes.parse_gpu_line("345, 3201, [N/A], 0, 30")["power.draw"] is None
    # No SM clock, or a line that is not a sample (an error message): no sample.
    assert probes.parse_gpu_line("[N/A], 3201, 100, 0, 30") is None
    assert probes.parse_gpu_line("Failed to initialize NVML: Driver/library version mismatch") is None


def _fake_smi(tmp_path: Path, lines: list[str], pause: float) -> Path:
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""\
        import sys, time
        open({str(tmp_path / 'argv')!r}, "w").write(" ".join(sys.argv[1:]))
        for line in {lines!r}:
            print(line, flush=True)
            time.sleep({pause})
        time.sleep(30)
        """))
    script.chmod(0o755)
    return script


def test_the_sampler_stamps_samples_and_summarises_a_batch(tmp_path, monkeypatch):
    _fake_smi(tmp_path, ["1980, 3201, 400, 90, 40", "1500, 3201, 300, 80, 41",
                         "1755, 3201, [N/A], 85, 41"], 0.2)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    began = time.time()
    sampler = probes.GpuSampler()
    try:
        deadline = time.time() + 20
        while len(sampler.samples) < 3 and time.time() < deadline:
            time.sleep(0.05)
        ended = time.time()
        got = sampler.during(began, ended)
    finally:
        problem = sampler.stop()
    assert problem is None and sampler.problem is None
    args = (tmp_path / "argv").read_text()
    assert "--query-gpu=clocks.sm,clocks.mem,power.draw,utilization.gpu,temperature.gpu" in args
    assert "--format=csv,noheader,nounits" in args and f"--loop-ms={probes.SAMPLE_MS}" in args
    assert got == {"samples": 3, "sm_mhz_mean": 1745.0, "sm_mhz_min": 1500.0,
                   "mem_mhz_mean": 3201.0, "power_w_mean": 350.0, "util_pct_mean": 85.0,
                   "temp_c_mean": 40.7}
    # A window the samples do not fall in has no reading.
    assert sampler.during(began - 10, began - 5) is None
    assert sampler._proc.poll() is not None  # stopped


def test_an_nvidia_smi_that_runs_but_gives_no_sample_is_reported_when_stopped(tmp_path, monkeypatch):
    _fake_smi(tmp_path, ["Failed to initialize NVML: Driver/library version mismatch"], 0.0)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    sampler = probes.GpuSampler()
    assert sampler.problem is None  # it started
    time.sleep(0.5)
    problem = sampler.stop()
    assert problem.startswith("nvidia-smi gave no readable sample (exit code ")
    assert problem.endswith("): GPU clocks not sampled") and sampler.problem == problem


def test_without_nvidia_smi_nothing_is_sampled_and_the_report_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    sampler = probes.GpuSampler()
    assert sampler.problem == "no nvidia-smi on PATH: GPU clocks not sampled"
    assert sampler.during(0, time.time()) is None
    assert sampler.stop() == "no nvidia-smi on PATH: GPU clocks not sampled"


def test_a_server_s_cpu_time_counts_every_process_of_its_group_and_nothing_else(tmp_path):
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
    done = tmp_path / "done"
    # The server's group: a parent that starts a child (both burn CPU) and waits for it,
    # in a process group of its own; then it says so and idles.
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, pathlib\n"
         f"c = subprocess.Popen([sys.executable, '-c', {burn!r}])\n"
         f"exec({burn!r})\n"
         f"c.wait()\npathlib.Path({str(done)!r}).write_text('1')\n"
         "import time; time.sleep(30)"],
        start_new_session=True)
    try:
        deadline = time.time() + 60
        while not done.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert done.exists()
        # Both processes' time, the child's though it has ended and been reaped:
        # more than either burnt alone (plus two interpreter starts).
        got = probes.group_cpu_seconds(parent.pid)
        assert 1.2 <= got < 5
        # Idling adds nothing: the sum holds.
        time.sleep(0.3)
        assert probes.group_cpu_seconds(parent.pid) == pytest.approx(got, abs=0.05)
        # This test's own process (another group) is not in it, and its group reads.
        assert probes.group_cpu_seconds(os.getpgid(0)) is not None
    finally:
        os.killpg(parent.pid, 9)
        parent.wait()


def test_a_probe_reads_the_client_and_the_server_around_a_batch():
    probe = probes.Probe(gpu=None)
    start = probe.before(os.getpgid(0))
    t = time.process_time()
    while time.process_time() - t < 0.2:
        pass
    got = probe.after(start, os.getpgid(0))
    assert got["client_cpu_s"] >= 0.19 and got["server_cpu_s"] >= 0.19
    assert got["gpu"] is None and got["seconds"] >= 0.19
    assert probe.after(probe.before(None), None)["server_cpu_s"] is None


def _batch(tpot, sm, cpu, ttft):
    return {"mean_tpot_ms": tpot, "mean_ttft_ms": ttft,
            "machine": {"gpu": {"sm_mhz_mean": sm, "power_w_mean": 300.0, "util_pct_mean": 80.0},
                        "server_cpu_s": cpu, "client_cpu_s": 1.0}}


def test_what_moves_with_tpot_is_said_with_its_correlation():
    batches = [_batch(5.0, 1980, 2.0, 30.0), _batch(8.0, 1200, 2.1, 90.0),
               _batch(6.0, 1700, 1.9, 50.0), _batch(7.0, 1400, 2.0, 70.0)]
    got = probes.against_tpot(batches)
    assert got["gpu_sm_mhz"]["r_with_tpot"] == pytest.approx(-0.996, abs=0.01)
    assert got["gpu_sm_mhz"]["batches"] == 4 and got["gpu_sm_mhz"]["min"] == 1200
    assert got["ttft_ms"]["r_with_tpot"] == pytest.approx(1.0) and got["ttft_ms"]["mean"] == 60.0
    assert got["server_cpu_s"]["mean"] == pytest.approx(2.0)
    # A factor that never changed has no correlation; one never read is left out.
    assert got["client_cpu_s"]["r_with_tpot"] is None
    assert "gpu_sm_mhz" not in probes.against_tpot([{"mean_tpot_ms": 5.0, "machine": {"gpu": None}}])


def test_pearson_needs_three_pairs():
    assert probes.pearson([1, 2], [2, 4]) is None
    assert probes.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
