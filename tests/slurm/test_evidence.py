"""The Slurm evidence parsers on literals copied from Debian's Slurm 22.05 on this machine."""

from __future__ import annotations

import json

import pytest

from gpuwatch.slurm.evidence import (
    DEFAULT_SLURM_CONF,
    JobProcess,
    SlurmJob,
    SlurmParseError,
    expand_hostlist,
    parse_environ,
    parse_gres_conf,
    parse_gres_detail,
    parse_index_list,
    parse_job_cgroup,
    parse_squeue_json,
    slurm_conf_path,
)


def _env(**values: str) -> bytes:
    return b"\0".join(f"{k}={v}".encode() for k, v in values.items()) + b"\0"


def test_index_lists() -> None:
    assert parse_index_list("0-1,3") == (0, 1, 3)
    assert parse_index_list("2") == (2,)
    assert parse_index_list("") == ()
    with pytest.raises(ValueError, match="bad index range"):
        parse_index_list("3-1")


def test_a_step_names_its_own_gpus_not_the_jobs() -> None:
    # an srun step of a --gres=gpu:2 job (IDX:0-1) given one GPU: its sleep's environment
    raw = _env(
        SLURM_JOB_GPUS="0,1",
        CUDA_VISIBLE_DEVICES="0",
        SLURM_JOB_ID="1",
        SLURM_STEP_ID="0",
        SLURM_STEP_GPUS="0",
    )
    assert parse_environ(raw) == JobProcess("1", "0", (0,))


def test_the_batch_step_names_the_jobs_gpus_and_cuda_devices_are_ignored() -> None:
    # under device cgroups CUDA_VISIBLE_DEVICES is renumbered from 0: never read
    raw = _env(SLURM_JOB_ID="7", SLURM_JOB_GPUS="2,3", CUDA_VISIBLE_DEVICES="0,1")
    assert parse_environ(raw) == JobProcess("7", "batch", (2, 3))


def test_a_process_that_names_no_gpu_is_in_its_job_without_gpus() -> None:
    raw = _env(SLURM_JOB_ID="2", CUDA_VISIBLE_DEVICES="2", GPU_DEVICE_ORDINAL="2")
    assert parse_environ(raw) == JobProcess("2", "batch", None)
    assert parse_environ(_env(HOME="/root")) is None
    assert parse_environ(_env(SLURM_JOB_ID="x;rm")) is None


def test_job_cgroups() -> None:
    text = "0::/system.slice/slurmstepd.scope/job_42/step_batch/user/task_0\n"
    assert parse_job_cgroup(text) == JobProcess("42", "batch", None)
    v1 = "5:devices:/slurm/uid_0/job_9/step_0\n4:pids:/\n"
    assert parse_job_cgroup(v1) == JobProcess("9", "0", None)
    assert parse_job_cgroup("9:name=systemd:/\n8:pids:/\n") is None


def test_gres_detail() -> None:
    assert parse_gres_detail(["gpu:2(IDX:0-1)"]) == (0, 1)
    assert parse_gres_detail(["gpu:h100:2(IDX:0,2)"]) == (0, 2)
    assert parse_gres_detail(["gpu:h100:1(IDX:3),shard:0(0/8,0/8)"]) == (3,)
    assert parse_gres_detail([]) == ()
    assert parse_gres_detail(None) == ()


def test_squeue_json_keeps_running_jobs() -> None:
    doc = {
        "jobs": [
            {
                "job_id": 1,
                "user_name": "root",
                "account": "physics",
                "partition": "debug",
                "job_state": "RUNNING",
                "gres_detail": ["gpu:2(IDX:0-1)"],
                "end_time": 1795908153,  # 22.05: a number
            },
            {"job_id": 3, "job_state": "PENDING", "gres_detail": []},
            {
                "job_id": 4,
                "user_name": "ann",
                "account": "",
                "partition": "gpu",
                "job_state": ["RUNNING"],  # 23.02 and later: a list of flags
                "gres_detail": ["gpu:1(IDX:2)"],
                "end_time": {"set": True, "infinite": False, "number": 1795908200},  # 23.02+
            },
            {
                "job_id": 5,
                "job_state": "RUNNING",
                "gres_detail": [],
                "end_time": {"set": False, "infinite": False, "number": 0},
            },
        ]
    }
    assert parse_squeue_json(json.dumps(doc)) == (
        SlurmJob("1", "root", "physics", "debug", (0, 1), 1795908153.0),
        SlurmJob("4", "ann", "", "gpu", (2,), 1795908200.0),
        SlurmJob("5", "", "", "", (), None),
    )
    with pytest.raises(SlurmParseError):
        parse_squeue_json("squeue: error: Invalid user")


def test_slurm_conf_is_found_as_slurms_commands_find_it() -> None:
    assert str(slurm_conf_path("/etc/x.conf", {"SLURM_CONF": "/y"})) == "/etc/x.conf"
    assert str(slurm_conf_path("", {"SLURM_CONF": "/y"})) == "/y"
    assert slurm_conf_path("", {}) == DEFAULT_SLURM_CONF


def test_gres_conf_gives_minors_in_index_order() -> None:
    assert expand_hostlist("/dev/nvidia[0-1,3]") == ("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia3")
    assert expand_hostlist("gpu[01-02]") == ("gpu01", "gpu02")
    text = (
        "AutoDetect=off\n"
        "NodeName=other Name=gpu File=/dev/nvidia[0-7]\n"
        "NodeName=vm Name=gpu Type=h100 File=/dev/nvidia[2-3]  # the second pair\n"
        "NodeName=vm Name=gpu File=/dev/nvidia0\n"
    )
    assert parse_gres_conf(text, "vm") == (2, 3, 0)
    assert parse_gres_conf("AutoDetect=nvml\nName=gpu Type=h100 Count=4\n", "vm") is None
