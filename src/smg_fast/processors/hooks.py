"""The parts of a ``Family`` read beyond its processor: call options, reference, drop-in.

How transformers' call-time options map onto its config (``CallRules``), transformers' own class as
its reference (``Reference``), and the class ``smg_fast.hf`` offers in that class's place
(``DropIn``).

Nothing here imports transformers: class names are strings, and the one hook that needs
transformers' types (``DropIn.call_kwargs``) imports them when smg_fast.hf calls it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .config import ProcessorConfig


def _no_size(size: dict[str, Any]) -> dict[str, Any]:
    """The default ``CallRules.size``: the family takes no ``size`` option."""
    raise ValueError(f"size is not an option of this processor, got {size}")


def _nothing_fixed(cfg: ProcessorConfig, fields: dict[str, Any]) -> None:
    """The default ``CallRules.check``: every field a call sets is honoured."""


def _no_options(opts: dict[str, Any]) -> dict[str, Any]:
    """The default ``CallRules.options``: the family has no other options of its own."""
    return opts


@dataclass(frozen=True, eq=False)
class CallRules:
    """How a family reads transformers' call-time options of its own.

    processors/call_options.py reads the options every family shares (``image_mean``,
    ``do_rescale``, ``resample``...)."""

    # an integer option -> the config field it sets (Kimi's max_patches -> in_patch_limit)
    fields: Mapping[str, str]
    # the ``size`` option's keys (None values dropped) -> config fields; ValueError when malformed
    size: Callable[[dict[str, Any]], dict[str, Any]] = _no_size
    # raises UnsupportedCallError when a call sets fields the family's reference fixes
    check: Callable[[ProcessorConfig, dict[str, Any]], None] = _nothing_fixed
    # removes a call's options of the family's own that change nothing here (Gemma 3's
    # pan-and-scan settings while it is off); UnsupportedCallError for one that would
    options: Callable[[dict[str, Any]], dict[str, Any]] = _no_options


@dataclass(frozen=True, eq=False)
class Reference:
    """transformers' own image processor for a family, per backend.

    It is what ``python -m smg_fast --check``, ``python -m smg_fast.client --verify`` and the
    drop-ins' fallback compute with (processors/reference.py builds it)."""

    classes: Mapping[str, str]  # backend -> "module:Class"
    kwargs: Callable[[ProcessorConfig], dict[str, Any]]  # its constructor arguments for a config
    missing: Mapping[str, str] = field(default_factory=dict)  # backend -> why it has no class


@dataclass(frozen=True, eq=False)
class DropIn:
    """The class ``smg_fast.hf`` offers in place of transformers' class of the same name.

    One may serve several families: every family whose ``dropin`` it is (Qwen2-VL's class serves
    Qwen2/2.5/3-VL); the first of them is what its constructor builds by default."""

    # class name -> the backend it reproduces by default; the first class is the others' base
    classes: Mapping[str, str]
    # the attributes transformers' class holds beyond the ones every family's has (size...)
    attributes: Callable[[ProcessorConfig], dict[str, Any]]
    # transformers' TypedDict of the class's call options (imports transformers when called)
    call_kwargs: Callable[[], type]
    # constructor keyword arguments (a preprocessor_config.json's keys) -> which family they build
    family_of: Callable[[dict[str, Any]], str]
    # constructor keyword arguments -> the keys the family's read_folder reads
    read_kwargs: Callable[[dict[str, Any]], dict[str, Any]] = dict
    # smg_fast.hf.register() maps the families' model types to it in AutoImageProcessor
    auto_register: bool = True
    # the engine plug-ins register it too: only once it is proven in the engines' own pipelines
    # (tests/engines/test_engine_*.py), since an engine may read the class beyond transformers' API
    in_engines: bool = False
    # get_number_of_image_patches(self, height, width, images_kwargs), where transformers' class
    # has it (vLLM counts placeholders with it); an int, or the (h, w) grid where transformers'
    # method returns that (HunYuanVL's)
    count_patches: Callable[[Any, int, int, dict[str, Any]], int | tuple[int, int]] | None = None
    # constructor arguments kept as given, as attributes the class applies to each call that does
    # not set them (Gemma 3's pan-and-scan settings); read_kwargs leaves them out of the config
    call_attributes: tuple[str, ...] = ()
    # its PIL class, too, returns the resized bytes (uint8) for do_rescale=False with
    # do_normalize=False, as every torchvision class does (Gemma 4's, SigLIP's; not Qwen's)
    pil_keeps_uint8: bool = False
    # outputs transformers' class leaves as Python lists when a call asks for no tensor type
    # (Gemma 4's num_soft_tokens_per_image)
    list_outputs: tuple[str, ...] = ()
    note: str = ""  # a sentence added to the classes' docstrings
    # the outputs a call returns (transformers' model_input_names for the class)
    outputs: tuple[str, ...] = ("pixel_values", "image_grid_thw")
    # outputs a call returns only when it asks for them, kept as transformers leaves them
    # (Idefics3's rows / cols: nested Python lists, for return_row_col_info=True)
    optional_outputs: tuple[str, ...] = ()
    # with no return_tensors, transformers' class returns lists (one array per image or crop,
    # counts as ints) rather than batched arrays
    lists_when_untyped: bool = False
    # the output dtype transformers' class returns for a call's options where it is not float32
    # (Llama 4's bfloat16); None: float32
    dtype: Callable[[dict[str, Any]], str] | None = None
    # with no return_tensors, the outputs as transformers' class lists them where that is not
    # lists_when_untyped's one entry per row (Llama 4's tiles grouped per image)
    untyped: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def transformers_classes(model: str, name: str) -> dict[str, str]:
    """``Reference.classes`` for transformers' pair of classes in ``models/<model>/``.

    Its PIL class ``<name>Pil`` in ``image_processing_pil_<model>`` and its torchvision class
    ``<name>`` in ``image_processing_<model>``, as transformers 5 names them."""
    base = f"transformers.models.{model}.image_processing"
    return {"pil": f"{base}_pil_{model}:{name}Pil", "torchvision": f"{base}_{model}:{name}"}


def names_class(name: str) -> Callable[[dict[str, Any]], bool]:
    """``Family.recognizes`` for a preprocessor_config.json naming one of ``name``'s classes."""
    return lambda pre: str(pre.get("image_processor_type", "")).startswith(name)


__all__ = ["CallRules", "DropIn", "Reference", "names_class", "transformers_classes"]
