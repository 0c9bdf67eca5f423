"""How the llama.cpp runtime loads a model: without llama.cpp's extra weight buffer
types on CPUs with AMX (their kernels crash the first forward pass there)."""

from __future__ import annotations

from types import SimpleNamespace

from tether.runtime.llama import _weights_unrepacked


def _fake_llama_cpp() -> SimpleNamespace:
    def defaults() -> SimpleNamespace:
        return SimpleNamespace(use_extra_bufts=True, n_gpu_layers=0)

    return SimpleNamespace(llama_cpp=SimpleNamespace(llama_model_default_params=defaults))


def test_extra_buffer_types_are_off_while_loading_and_restored_after() -> None:
    fake = _fake_llama_cpp()
    original = fake.llama_cpp.llama_model_default_params
    with _weights_unrepacked(fake, True):
        assert fake.llama_cpp.llama_model_default_params().use_extra_bufts is False
    assert fake.llama_cpp.llama_model_default_params is original
    assert original().use_extra_bufts is True


def test_left_alone_without_amx_or_without_the_switch() -> None:
    fake = _fake_llama_cpp()
    with _weights_unrepacked(fake, False):
        assert fake.llama_cpp.llama_model_default_params().use_extra_bufts is True
    older = SimpleNamespace(llama_cpp=SimpleNamespace(
        llama_model_default_params=lambda: SimpleNamespace(n_gpu_layers=0)))
    with _weights_unrepacked(older, True):  # a llama-cpp-python without the field
        assert not hasattr(older.llama_cpp.llama_model_default_params(), "use_extra_bufts")
