"""Drop-in replacements for transformers' image processors, computed by smg-fast.

    import smg_fast.hf
    smg_fast.hf.register()  # AutoImageProcessor / AutoProcessor now return these classes
    processor = AutoProcessor.from_pretrained("/models/Qwen2.5-VL-7B-Instruct")

or directly: ``Qwen2VLImageProcessor.from_pretrained(folder_or_hub_id)``. Each class reproduces
the transformers class of the same name bit for bit: ``Qwen2VLImageProcessor`` and
``Kimi_K25ImageProcessor`` the torchvision backend (what ``AutoImageProcessor`` returns when
torchvision is installed: vLLM, SGLang), ``Qwen2VLImageProcessorPil`` the PIL backend;
``backend=`` picks another. They are ``BaseImageProcessor`` subclasses, built from the same
keyword arguments as transformers' classes, and serialize, copy and pickle as they do. Calls
take transformers' inputs and options and return a ``transformers.BatchFeature``; a call whose
options smg-fast does not reproduce (``device="cuda"``, an option it does not know) is computed
by transformers' own class instead (logged once per reason), never approximated. This module
needs transformers (not torch or torchvision, except for ``return_tensors="pt"`` and for those
fallbacks on the torchvision backend). The classes are made here from each registered
family's drop-in (``Family.dropin``, in its module under smg_fast/processors/families/).
"""

from __future__ import annotations

import copy
import importlib.util
import numbers
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from transformers.feature_extraction_utils import BatchFeature
from transformers.image_processing_base import ImageProcessingMixin
from transformers.image_processing_utils import BaseImageProcessor

from . import hf_compat as compat
from .errors import UnsupportedCallError
from .processors import Processor, make_processor
from .processors.call_inputs import flatten
from .processors.config import ProcessorConfig
from .processors.hooks import DropIn
from .processors.reference import reference_processor
from .processors.registry import registered

_first_load: list[Callable[[], None]] = []


def _differs(value: Any, built: Any) -> bool:
    """Whether an attribute no longer holds what the processor was built from.

    An array, or any value that does not compare plainly, counts as changed; so does a number
    of another type (resample=3.0 or numpy.int64(3) is not 3 to transformers' resize)."""
    if isinstance(value, (numbers.Number, np.generic)) and type(value) is not type(built):
        return True
    try:
        return bool(value != built)
    except (TypeError, ValueError):
        return True


def on_first_load(fn: Callable[[], None]) -> None:
    """Calls fn once, when this process next loads one of these classes with from_pretrained.

    For an engine plug-in's log line, where the engine configures logging after loading it."""
    _first_load.append(fn)


class _SmgImageProcessor(BaseImageProcessor):
    """A transformers image processor whose computation is an smg_fast Processor.

    The classes this module offers are made from the registered families' drop-ins
    (``Family.dropin``)."""

    dropin: ClassVar[DropIn]
    family: ClassVar[str]  # the family its constructor builds unless the arguments say another
    _families: ClassVar[tuple[str, ...]]
    default_backend: ClassVar[str] = "torchvision"
    model_input_names: ClassVar[list[str]] = ["pixel_values", "image_grid_thw"]

    def __init__(self, processor: Processor | None = None, *, backend: str | None = None,
                 **kwargs: Any) -> None:
        """Built as transformers' class is, or from a ready smg_fast ``processor``.

        Takes a preprocessor_config.json's keys (``size``, ``min_pixels``, ``image_mean``,
        ``do_normalize``...; other keys are kept as plain attributes, as transformers keeps them)
        and smg-fast's ``max_image_pixels`` / ``pass_order`` / ``image_formats``."""
        if processor is None:
            processor = compat.build_processor(self.dropin, kwargs,
                                               backend or self.default_backend)
        elif backend is not None or kwargs:
            raise TypeError("give a processor or a backend / keyword arguments, not both")
        # transformers applies a flag only when it is truthy: an explicit None skips the step
        flags = {k: bool(kwargs[k]) for k in compat.FLAGS if k in kwargs}
        defaults = {k: kwargs[k] for k in compat.CALL_DEFAULTS if kwargs.get(k) is not None}
        # keys neither transformers' class nor smg-fast reads stay plain attributes, as there;
        # not this class's own properties (smg_processor), which such a key would shadow or break
        extra = {k: v for k, v in kwargs.items()
                 if (k not in self.valid_kwargs.__annotations__ or k in compat.KEPT_OPTIONS)
                 and k not in compat.SMG_OPTIONS and k not in compat.NOT_KEPT
                 and not isinstance(getattr(type(self), k, None), property)}
        kept = {k: kwargs[k] for k in self.dropin.call_attributes if kwargs.get(k) is not None}
        ImageProcessingMixin.__init__(self, **{**extra, **self._attributes(processor.config),
                                               **kept, **flags, **defaults})
        # set after the file's keys, so that a key named like them ("_proc") cannot replace them
        self._proc = processor
        self._reference: Any = None
        self._ref_lock = threading.Lock()
        self._built_from = copy.deepcopy(self._attributes(processor.config))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike[str],
                        *args: Any, **kwargs: Any) -> Any:
        """transformers' loader: a model folder, a hub id or a json file.

        Hub ids go through huggingface_hub's cache and download rules; ``subfolder``,
        ``revision``, ``cache_dir``, ``token``, ``local_files_only`` as there, loader-only
        arguments (``_from_auto``, ``trust_remote_code``, ``use_fast``...) accepted; keyword
        overrides win over the file's values; ``backend=`` picks smg-fast's other backend. A
        config smg-fast does not reproduce (``do_resize: false``, ...) gets transformers' own
        class (logged once)."""
        while _first_load:
            _first_load.pop()()
        backend = kwargs.pop("backend", None)
        return_unused = kwargs.pop("return_unused_kwargs", False)
        smg = {k: kwargs.pop(k) for k in list(kwargs) if k in compat.SMG_OPTIONS}
        passed = dict(kwargs, return_unused_kwargs=return_unused)
        for key in compat.LOADER_NOISE:
            kwargs.pop(key, None)
        pre, rest = cls.get_image_processor_dict(pretrained_model_name_or_path, **kwargs)
        known = set(cls.valid_kwargs.__annotations__)
        pre.update({k: rest.pop(k) for k in list(rest) if k in known})
        try:
            proc = cls(backend=backend, **pre, **smg)
        except (TypeError, ValueError) as exc:
            theirs = compat.transformers_class(cls.family, backend or cls.default_backend)
            if theirs is None:
                raise
            compat.log_once(f"smg-fast: {pretrained_model_name_or_path}: {exc}; transformers' "
                            f"{theirs.__name__} computes it")
            return theirs.from_pretrained(pretrained_model_name_or_path, *args, **passed)
        compat.logger.debug("%s", proc)
        return (proc, rest) if return_unused else proc

    @classmethod
    def families(cls) -> tuple[str, ...]:
        """The families this class serves."""
        return cls._families

    @property
    def backend(self) -> str:
        """Whose numbers this processor reproduces: "torchvision", "pil" or "upstream"."""
        return self._proc.config.backend

    @property
    def smg_processor(self) -> Processor:
        """The smg_fast Processor this class calls."""
        return self._proc

    @classmethod
    def _attributes(cls, cfg: ProcessorConfig) -> dict[str, Any]:
        """The attributes transformers' class holds for cfg: every family's, then its own.

        A family's own may replace a shared one (Pixtral's patch_size is a dict)."""
        return {**dict(patch_size=cfg.patch_size, merge_size=cfg.merge_size,
                       image_mean=tuple(cfg.image_mean), image_std=tuple(cfg.image_std),
                       rescale_factor=cfg.rescale_factor, resample=cfg.resample, do_resize=True,
                       do_rescale=True, do_normalize=cfg.do_normalize, do_convert_rgb=True),
                **cls.dropin.attributes(cfg)}

    # ---- serialization and copies: the Processor is rebuilt from its config ----

    def to_dict(self) -> dict[str, Any]:
        """The attributes transformers would save (no smg-fast internals)."""
        out = {k: compat.plain(copy.deepcopy(v)) for k, v in self.__dict__.items()
               if not k.startswith("_")}
        out["image_processor_type"] = type(self).__name__
        return out

    def __repr__(self) -> str:
        return (f"{type(self).__name__} (smg-fast, backend={self.backend!r}) "
                f"{self.to_json_string()}")

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        return {"attributes": state, "config": self._proc.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state["attributes"])
        self._proc = make_processor(state["config"])
        self._built_from = copy.deepcopy(self._attributes(state["config"]))
        self._reference = None
        self._ref_lock = threading.Lock()

    # ---- calls ----

    def fetch_images(self, image_url_or_urls: Any) -> Any:
        """http(s) URLs are fetched as transformers does; other strings stay strings.

        Paths, data: URLs and base64 are decoded by the call with load_image's semantics."""
        if isinstance(image_url_or_urls, (list, tuple)):
            return [self.fetch_images(x) for x in image_url_or_urls]
        if isinstance(image_url_or_urls, str) and \
                image_url_or_urls.startswith(("http://", "https://")):
            return super().fetch_images(image_url_or_urls)
        return image_url_or_urls

    def __call__(self, images: Any = None, *args: Any, **kwargs: Any) -> BatchFeature:
        return self.preprocess(images, *args, **kwargs)

    def preprocess(self, images: Any = None, return_tensors: Any = None,
                   **kwargs: Any) -> BatchFeature:
        """transformers' call: images (nested lists flattened) and its options.

        The output is float32 (uint8 where transformers' torchvision class returns uint8:
        do_rescale=False and do_normalize=False), or ``dtype="bfloat16"`` / ``"float16"``
        (smg-fast's own option)."""
        if images is None:
            images = kwargs.pop("images", None)
        if images is None:
            raise TypeError("preprocess() needs images")
        if any(getattr(item, "ndim", None) == 2 for item in flatten(images)):
            raise ValueError("2-D arrays are not images to transformers' processors (which refuse "
                             "them): pass (H, W, 1) or (1, H, W) for one channel")
        flags = {k: False for k in compat.FLAGS if not getattr(self, k, True)}
        defaults = {k: getattr(self, k) for k in compat.CALL_DEFAULTS
                    if getattr(self, k, None) is not None}
        # attributes apply unchecked in transformers (its type rules are for call options): a
        # falsy flag (None, 0) skips its step, NumPy values are read as numbers
        attrs = {**flags, **defaults, **self._changed_attributes(kwargs)}
        attrs.update({k: bool(attrs[k]) for k in compat.FLAGS if k in attrs})
        call = kwargs
        # resample as set: transformers' resize reads a NumPy int as BILINEAR, not as its value
        kwargs = {**{k: v if k == "resample" else compat.call_value(v)
                     for k, v in attrs.items()}, **call}
        # a call's None flag skips its step too (where None elsewhere means the default)
        kwargs.update({k: False for k in compat.FLAGS if k in call and call[k] is None})
        dtype, why = compat.call_plan(self._proc.config, images, kwargs)
        if why:
            return self._fallback(why, images, return_tensors, call, attrs)
        kwargs.pop("dtype", None)
        images = compat.as_installed_transformers(images, kwargs.get("do_convert_rgb") is not False)
        rt = getattr(return_tensors, "value", return_tensors)
        # transformers' torchvision classes return torch tensors when no type is asked for
        torch_out = rt == "pt" or (rt is None and self.backend == "torchvision" and
                                   importlib.util.find_spec("torch") is not None)
        try:
            out = self._proc(self.fetch_images(images), return_tensors="pt" if torch_out else "np",
                             dtype=dtype, channels_first_wins=True, **kwargs)
        except UnsupportedCallError as exc:
            return self._fallback(str(exc), images, return_tensors, call, attrs)
        data = {k: out[k] for k in self.model_input_names}
        if rt is None:  # transformers leaves the arrays as its backend made them
            if self.dropin.untyped is not None:
                data = self.dropin.untyped(data)
            elif self.dropin.lists_when_untyped:
                data = {k: list(v) if v.ndim > 1 else v.tolist() for k, v in data.items()}
            data.update({k: data[k].tolist() for k in self.dropin.list_outputs
                         if not isinstance(data[k], list)})
            batch = BatchFeature(data=data)
        else:
            batch = BatchFeature(data=data, tensor_type=None if rt == "pt" else rt)
        for key in self.dropin.optional_outputs:  # set afterwards: no tensor conversion
            if key in out:
                batch[key] = out[key]
        return batch

    def _changed_attributes(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Attributes set since construction (``proc.size = ...``), as call options.

        The reference reads its attributes at each call, so they must win over the config."""
        return {k: getattr(self, k) for k, v in self._built_from.items()
                if k not in kwargs and _differs(getattr(self, k, v), v)}

    def _fallback(self, why: str, images: Any, return_tensors: Any, kwargs: dict[str, Any],
                  attrs: dict[str, Any]) -> BatchFeature:
        """The call computed by transformers' own class for this backend and config.

        attrs (attributes set since construction) are that class's attributes for the call, so
        that it reads them as it reads its own; kwargs are the call's options."""
        with self._ref_lock:
            if self._reference is None:
                self._reference, cannot = reference_processor(self._proc.config)
                if self._reference is None:
                    raise ValueError(f"{why} (and transformers' own class cannot run here: "
                                     f"{cannot})")
        compat.log_once(f"smg-fast: {type(self).__name__} hands calls to transformers' "
                        f"{type(self._reference).__name__} when: {why}")
        kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
        reference = copy.copy(self._reference)
        for key, value in attrs.items():
            setattr(reference, key, value)
        return reference(images, return_tensors=return_tensors, **kwargs)


def _count_patches(self: _SmgImageProcessor, height: int, width: int,
                   images_kwargs: dict[str, Any] | None = None) -> int | tuple[int, int]:
    """Patches (grid cells) for an image of this size, as transformers' method counts them.

    An int, or the (h, w) grid where transformers' method returns that (HunYuanVL's).

    vLLM uses it to count placeholders without pixels."""
    count = self.dropin.count_patches
    assert count is not None  # only classes whose drop-in counts have this method
    return count(self, height, width, images_kwargs or {})


def _make_classes(made: dict[str, type[_SmgImageProcessor]]) -> None:
    """Adds to made one class per drop-in class name of the registered families.

    Each is placed to pickle by name; names already made are kept (a class object never changes).
    The first of a drop-in's names is the base of the others, as transformers' PIL class
    subclasses its torchvision one; each is named and placed as transformers' classes are. Two
    drop-ins offering one class name are a ValueError: the later would replace the first."""
    for dropin in dict.fromkeys(f.dropin for f in registered() if f.dropin is not None):
        fams = tuple(f.name for f in registered() if f.dropin is dropin)
        for name in dropin.classes:
            other = made.get(name)
            if other is not None and other.dropin is not dropin:
                raise ValueError(f"the drop-in class name {name!r} of {', '.join(fams)} is "
                                 f"already {', '.join(other._families)}'s: give it its own name")
        if all(name in made for name in dropin.classes):
            continue
        base: type[_SmgImageProcessor] = _SmgImageProcessor
        valid_kwargs = dropin.call_kwargs()
        for name, backend in dropin.classes.items():
            doc = (f"transformers' ``{name}`` ({backend} backend) for {', '.join(fams)}, "
                   f"computed by smg-fast. {dropin.note}").rstrip()
            ns: dict[str, Any] = {"__module__": __name__, "__qualname__": name, "__doc__": doc,
                                  "default_backend": backend}
            if base is _SmgImageProcessor:
                ns.update(dropin=dropin, family=fams[0], _families=fams,
                          valid_kwargs=valid_kwargs, model_input_names=list(dropin.outputs))
                if dropin.count_patches is not None:
                    ns["get_number_of_image_patches"] = _count_patches
            made[name] = type(name, (base,), ns)
            if base is _SmgImageProcessor:
                base = made[name]


_CLASSES: dict[str, type[_SmgImageProcessor]] = {}


def _refresh() -> None:
    """Makes the classes of families registered since (this module's names and ``__all__``)."""
    _make_classes(_CLASSES)
    globals().update(_CLASSES)
    globals()["__all__"] = [*_CLASSES, "register"]


def __getattr__(name: str) -> Any:
    """A drop-in class of a family registered after this module was imported."""
    _refresh()
    if name in _CLASSES:
        return _CLASSES[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:  # the built-in families' classes, for type checkers (made below at import)
    Qwen2VLImageProcessor: type[_SmgImageProcessor]
    Qwen2VLImageProcessorPil: type[_SmgImageProcessor]
    Kimi_K25ImageProcessor: type[_SmgImageProcessor]
    Glm4vImageProcessor: type[_SmgImageProcessor]
    Glm4vImageProcessorPil: type[_SmgImageProcessor]
    Glm46VImageProcessor: type[_SmgImageProcessor]
    Glm46VImageProcessorPil: type[_SmgImageProcessor]
    PaddleOCRVLImageProcessor: type[_SmgImageProcessor]
    PaddleOCRVLImageProcessorPil: type[_SmgImageProcessor]
    Ernie4_5_VLMoeImageProcessor: type[_SmgImageProcessor]
    Ernie4_5_VLMoeImageProcessorPil: type[_SmgImageProcessor]
    HunYuanVLImageProcessor: type[_SmgImageProcessor]
    HunYuanVLImageProcessorPil: type[_SmgImageProcessor]
    Gemma3ImageProcessor: type[_SmgImageProcessor]
    Gemma3ImageProcessorPil: type[_SmgImageProcessor]
    GotOcr2ImageProcessor: type[_SmgImageProcessor]
    GotOcr2ImageProcessorPil: type[_SmgImageProcessor]
    PixtralImageProcessor: type[_SmgImageProcessor]
    PixtralImageProcessorPil: type[_SmgImageProcessor]
    LlavaNextImageProcessor: type[_SmgImageProcessor]
    LlavaNextImageProcessorPil: type[_SmgImageProcessor]
    LlavaOnevisionImageProcessor: type[_SmgImageProcessor]
    LlavaOnevisionImageProcessorPil: type[_SmgImageProcessor]
    Idefics3ImageProcessor: type[_SmgImageProcessor]
    Idefics3ImageProcessorPil: type[_SmgImageProcessor]
    SmolVLMImageProcessor: type[_SmgImageProcessor]
    SmolVLMImageProcessorPil: type[_SmgImageProcessor]
    Phi4MultimodalImageProcessor: type[_SmgImageProcessor]

_refresh()


def register(*, engines: bool = False) -> list[str]:
    """Makes transformers' Auto classes return these classes for the families that register.

    ``AutoImageProcessor`` (and so ``AutoProcessor``) then returns them for the model folders of
    every family whose drop-in registers (not Kimi-K2.5, whose folders run its remote code), for
    the backend transformers resolves (torchvision when installed, else PIL; ``backend=`` /
    ``use_fast`` honoured). ``engines``: only the families proven inside vLLM's and SGLang's own
    pipelines (what the engine plug-ins call). Idempotent; returns the model types registered."""
    from transformers import AutoImageProcessor
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.utils import logging as hf_logging

    _refresh()
    done: list[str] = []
    verbosity = hf_logging.get_verbosity()
    # register() resolves transformers' own mapping first, which warns that its torchvision
    # class needs torchvision: true, and not about what is being registered
    hf_logging.set_verbosity_error()
    try:
        for fam in registered():
            if fam.dropin is None or not fam.dropin.auto_register or \
                    (engines and not fam.dropin.in_engines):
                continue
            classes = {backend: _CLASSES[name] for name, backend in fam.dropin.classes.items()}
            for model_type in fam.model_types:
                if model_type not in CONFIG_MAPPING or model_type in done:
                    continue
                AutoImageProcessor.register(CONFIG_MAPPING[model_type], exist_ok=True,
                                            image_processor_classes=classes)
                done.append(model_type)
    finally:
        hf_logging.set_verbosity(verbosity)
    return done

