"""``device``/``dtype`` of the local transformers backend: refused with the supported values
before any model loads, and refused for backends that are not placed locally."""

from __future__ import annotations

import pytest
import torch
from _cli import cli

from traceless.errors import ConfigError
from traceless.models import load_backend
from traceless.models._transformers import DTYPES, placement


def test_supported_values_are_accepted() -> None:
    assert placement("cpu", "bfloat16") == (torch.device("cpu"), torch.bfloat16)
    assert set(DTYPES) == {"float32", "bfloat16", "float16"}


@pytest.mark.parametrize(("device", "dtype", "says"), [
    ("cpu", "int8", "use one of float32, bfloat16, float16"),
    ("tpu", "float32", "use cpu, cuda or cuda:N"),
    ("meta", "float32", "use cpu, cuda or cuda:N"),
])
def test_unsupported_values_name_the_supported_ones(device: str, dtype: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        placement(device, dtype)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_without_a_gpu_is_refused_before_loading() -> None:
    with pytest.raises(ConfigError, match=r"torch sees 0 CUDA device\(s\).*--device cpu"):
        placement("cuda", "bfloat16")
    # the catalog loader refuses before it reads a byte of the weights
    with pytest.raises(ConfigError, match="CUDA"):
        load_backend("smollm2-135m-instruct", device="cuda")


@pytest.mark.parametrize("spec", ["scripted", "openai:m@http://127.0.0.1:9/v1", "llamacpp:smollm2-135m-instruct"])
def test_placement_of_a_served_model_is_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match="applies to local transformers models"):
        load_backend(spec, dtype="bfloat16")


def test_study_run_refuses_a_bad_dtype_and_writes_nothing(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run"
    code = cli("study", "run", "replay", "--out", str(out), "--model", "smollm2-135m-instruct", "--dtype", "fp8",
               "--no-progress")
    assert code == 2
    assert "use one of float32, bfloat16, float16" in capsys.readouterr().err
    assert not out.exists()


def test_a_bad_llamacpp_timeout_is_refused_before_a_server_starts(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    # read at the edge (the CLI's --timeout binding, the API's engine_options), never below it
    from traceless._api import engine_options

    monkeypatch.setenv("TRACELESS_LLAMACPP_TIMEOUT", "ten minutes")
    with pytest.raises(ConfigError, match="TRACELESS_LLAMACPP_TIMEOUT='ten minutes': use seconds"):
        engine_options()
    out = tmp_path / "run"
    assert cli("study", "run", "replay", "--out", str(out), "--model", "llamacpp:smollm2-135m-instruct",
               "--no-progress") == 2
    assert "TRACELESS_LLAMACPP_TIMEOUT" in capsys.readouterr().err and not out.exists()
