"""Fixtures of the engine tests: the tiny Qwen2-VL model folder vLLM and SGLang load."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A tiny Qwen2-VL-7B-Instruct folder: config, the hub's preprocessor values, a tokenizer."""
    from smg_fast.testing.model_folders import make_qwen_folder

    return make_qwen_folder(tmp_path_factory.mktemp("engine") / "Qwen2-VL-7B-Instruct")


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    """vLLM's venv python (the test fails, naming the script that makes it, without it)."""
    from support.engine_common import engine_python_or_fail

    return engine_python_or_fail("vllm")


@pytest.fixture(scope="module")
def sglang_python() -> Path:
    """SGLang's venv python (the test fails, naming the script that makes it, without it)."""
    from support.engine_common import engine_python_or_fail

    return engine_python_or_fail("sglang")
