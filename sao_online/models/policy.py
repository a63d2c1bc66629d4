"""Policies: the tiny embedded default and loading any local Hugging Face causal LM."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from sao_online.models.converted import converted_gguf
from sao_online.models.sources import (
    ModelNotFoundError,
    ModelSource,
    hub_offline,
    resolve_model_source,
)
from sao_online.models.tokenizer import BYTE_VOCAB_SIZE, build_byte_tokenizer

TINY_POLICY_NAME = "tiny"


def build_tiny_policy(
    num_layers: int = 4,
    hidden_size: int = 128,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 2048,
    tie_word_embeddings: bool = True,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> tuple[LlamaForCausalLM, PreTrainedTokenizerFast]:
    """Builds the embedded default policy: a small Llama over the byte-level tokenizer.

    At the defaults (4 layers, hidden 128, MLP 4x wide, tied embeddings) it has 1,083,264
    parameters. Weights are drawn from ``torch.Generator`` state seeded with ``seed`` so the
    same arguments always give the same model, without touching the global RNG.

    Args:
        num_layers: decoder layers.
        hidden_size: model width; must be divisible by ``num_heads``.
        num_heads: attention heads (no grouped-query sharing at this size).
        intermediate_size: MLP width; ``4 * hidden_size`` when None.
        max_position_embeddings: longest episode (tokens) the rotary embedding is meant for.
        tie_word_embeddings: share the input embedding and the output head.
        seed: seed of the weight initialisation.
        dtype: parameter dtype.

    Returns:
        ``(model, tokenizer)``; the model is in eval mode and uses SDPA attention.

    Raises:
        ValueError: a size is not positive or ``hidden_size`` is not divisible by ``num_heads``.
    """
    for name, value in (
        ("num_layers", num_layers),
        ("hidden_size", hidden_size),
        ("num_heads", num_heads),
        ("max_position_embeddings", max_position_embeddings),
    ):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"build_tiny_policy: {name} must be a positive int, got {value!r}")
    if hidden_size % num_heads:
        raise ValueError(
            f"build_tiny_policy: hidden_size {hidden_size} is not divisible by num_heads "
            f"{num_heads}"
        )
    if intermediate_size is None:
        intermediate_size = 4 * hidden_size
    if intermediate_size <= 0:
        raise ValueError(
            f"build_tiny_policy: intermediate_size must be positive, got {intermediate_size}"
        )
    tokenizer = build_byte_tokenizer()
    config = LlamaConfig(
        vocab_size=BYTE_VOCAB_SIZE,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation="sdpa",
    )
    # fork_rng keeps the caller's global RNG stream untouched by model construction.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.to(dtype)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.eval()
    return model, tokenizer


def load_policy(
    name_or_path: str | Path | Mapping[str, Any],
    gguf_file: str | None = None,
    dtype: torch.dtype | str = torch.float32,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Loads a policy and its tokenizer, from this machine only (never downloads).

    Args:
        name_or_path: ``"tiny"`` for the embedded default; a mapping of ``build_tiny_policy``
            keyword arguments for a resized embedded default; a packaged model's short name
            (``"smollm2-135m"``, see ``sao_online.models.sources``); otherwise a local
            directory (or a model already in the local Hugging Face cache) holding an
            ``AutoModelForCausalLM`` checkpoint and its tokenizer.
        gguf_file: file name of a GGUF checkpoint inside the directory ``name_or_path`` (needs
            the ``gguf`` package). The first load dequantizes it to float32 into the cache
            (``sao_online.models.converted``); every load, that one included, reads the cached
            folder and casts it to ``dtype``.
        dtype: parameter dtype of the loaded model.

    Returns:
        ``(model, tokenizer)`` with the model in eval mode, on the CPU. The tokenizer has a
        chat template and a pad token (its eos token when it had none).

    Raises:
        ModelNotFoundError: the model is not on this machine (the message says how to provide
            one).
        ValueError: unknown keyword in a config mapping, a checkpoint that cannot be loaded, or
            a tokenizer without a chat template.
    """
    if isinstance(name_or_path, Mapping):
        known = set(inspect.signature(build_tiny_policy).parameters)
        unknown = sorted(set(name_or_path) - known)
        if unknown:
            raise ValueError(
                f"load_policy: unknown tiny-policy option(s) {unknown}; known: {sorted(known)}"
            )
        return build_tiny_policy(**{"dtype": _as_dtype(dtype), **name_or_path})
    if str(name_or_path) == TINY_POLICY_NAME:
        return build_tiny_policy(dtype=_as_dtype(dtype))
    source = resolve_model_source(str(name_or_path), gguf_file)
    if source.gguf_file is not None:
        # Dequantized once into the cache, shared by every process and run that loads the file.
        gguf_path = Path(source.location) / source.gguf_file
        folder = converted_gguf(gguf_path, functools.partial(_dequantized_gguf, source))
        source = ModelSource(str(folder))
    tokenizer, model = _from_pretrained(source, _as_dtype(dtype))
    if not tokenizer.chat_template:
        raise ValueError(f"load_policy: the tokenizer of {name_or_path!r} has no chat template")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval()
    return model, tokenizer


def _from_pretrained(
    source: ModelSource, dtype: torch.dtype
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` of a folder, a cached model id or a GGUF file, read offline."""
    location = source.location
    # local_files_only everywhere: a name that is neither a folder nor cached fails at once
    # instead of reaching for the hub.
    options = {"gguf_file": source.gguf_file, "local_files_only": True}
    try:
        with hub_offline(), _gguf_parsed_once():
            tokenizer = AutoTokenizer.from_pretrained(location, **options)
            model = AutoModelForCausalLM.from_pretrained(location, dtype=dtype, **options)
    except OSError as error:
        if not Path(location).exists():
            raise ModelNotFoundError(
                f"model.name {location!r}: not a packaged model name, not a folder, and not in "
                f"the local Hugging Face cache ({error}). Nothing is downloaded: save a model "
                "with save_pretrained and point model.name at that folder."
            ) from error
        raise ValueError(f"load_policy: cannot load {location!r}: {error}") from error
    except ValueError as error:
        raise ValueError(f"load_policy: cannot load {location!r}: {error}") from error
    return tokenizer, model


def _dequantized_gguf(source: ModelSource) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A GGUF checkpoint as a plain float32 model (savable with ``save_pretrained``)."""
    tokenizer, model = _from_pretrained(source, torch.float32)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        # Transformers dequantized every tensor at load, but keeps its GGUF quantizer attached,
        # which refuses to save; the model itself is a plain one.
        if not all(parameter.is_floating_point() for parameter in model.parameters()):
            raise ValueError(
                f"load_policy: {source.gguf_file!r} was loaded with its weights still in GGUF "
                "blocks (the `kernels` package is installed); uninstall it to load this model"
            )
        quantizer.remove_quantization_config(model)
    return model, tokenizer


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """Transformers' GGUF loading, with each costly step done once instead of hundreds of times.

    Loading a GGUF checkpoint, transformers opens the file with ``gguf.GGUFReader`` three times
    (for the tokenizer's config, the model's config and the weights) and builds
    ``gguf.get_tensor_name_map`` anew for each of the model's modules (about 400 for
    SmolLM2-135M). Both are pure functions of their arguments, and each costs seconds here: the
    reader parses the 49k-token vocabulary and merges string by string, the name map is rebuilt
    from every architecture's table. Inside this context both are memoized, so a load parses
    the file once and builds one name map; the model and tokenizer are the same as without it.
    Transformers imports both names from ``gguf`` at call time, which is where they are swapped.
    Without the ``gguf`` package nothing changes (and a GGUF load fails as it would anyway).
    """
    if importlib.util.find_spec("gguf") is None:
        yield
        return
    import gguf

    open_reader = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def shared_reader(path: str | os.PathLike[str], mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = open_reader(path, mode)
        return readers[key]

    name_map = functools.cache(gguf.get_tensor_name_map)
    with (
        mock.patch.object(gguf, "GGUFReader", shared_reader),
        mock.patch.object(gguf, "get_tensor_name_map", name_map),
    ):
        yield


def _as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"load_policy: unknown dtype {dtype!r}")
    return resolved
