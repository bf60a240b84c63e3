"""transformers' torchvision image processors on pickled inputs, in the oracle venv.

Runs under the venv's python (see tests/support/tv_oracle.py), never under pytest; outputs as
.npy files.
"""

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import torch
import torchvision
from kimi_vl_upstream import KimiVLUpstream
from transformers.models.ernie4_5_vl_moe.image_processing_ernie4_5_vl_moe import (
    Ernie4_5_VLMoeImageProcessor,
)
from transformers.models.gemma3.image_processing_gemma3 import Gemma3ImageProcessor
from transformers.models.gemma4.image_processing_gemma4 import Gemma4ImageProcessor
from transformers.models.glm4v.image_processing_glm4v import Glm4vImageProcessor
from transformers.models.glm46v.image_processing_glm46v import Glm46VImageProcessor
from transformers.models.got_ocr2.image_processing_got_ocr2 import GotOcr2ImageProcessor
from transformers.models.hunyuan_vl.image_processing_hunyuan_vl import HunYuanVLImageProcessor
from transformers.models.idefics3.image_processing_idefics3 import Idefics3ImageProcessor
from transformers.models.kimi_k25.image_processing_kimi_k25 import Kimi_K25ImageProcessor
from transformers.models.llama4.image_processing_llama4 import Llama4ImageProcessor
from transformers.models.llava_next.image_processing_llava_next import LlavaNextImageProcessor
from transformers.models.llava_onevision.image_processing_llava_onevision import (
    LlavaOnevisionImageProcessor,
)
from transformers.models.paddleocr_vl.image_processing_paddleocr_vl import (
    PaddleOCRVLImageProcessor,
)
from transformers.models.phi4_multimodal.image_processing_phi4_multimodal import (
    Phi4MultimodalImageProcessor,
)
from transformers.models.pixtral.image_processing_pixtral import PixtralImageProcessor
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
from transformers.models.siglip.image_processing_siglip import SiglipImageProcessor
from transformers.models.smolvlm.image_processing_smolvlm import SmolVLMImageProcessor

CLASSES = {"qwen": Qwen2VLImageProcessor, "kimi": Kimi_K25ImageProcessor,
           "glm4v": Glm4vImageProcessor, "glm46v": Glm46VImageProcessor}
CLASSES["paddleocr_vl"] = PaddleOCRVLImageProcessor
CLASSES["ernie4_5_vl_moe"] = Ernie4_5_VLMoeImageProcessor
CLASSES["hunyuan_vl"] = HunYuanVLImageProcessor
CLASSES["gemma3"] = Gemma3ImageProcessor
CLASSES["kimi_vl"] = KimiVLUpstream  # its remote code's steps (kimi_vl_upstream.py)
CLASSES["gemma4"] = Gemma4ImageProcessor
CLASSES["siglip"] = SiglipImageProcessor  # Gemma 3n's image processor
CLASSES["internvl"] = GotOcr2ImageProcessor
CLASSES["pixtral"] = PixtralImageProcessor
CLASSES["llava_next"] = LlavaNextImageProcessor
CLASSES["llava_onevision"] = LlavaOnevisionImageProcessor
CLASSES["idefics3"] = Idefics3ImageProcessor
CLASSES["smolvlm"] = SmolVLMImageProcessor
CLASSES["llama4"] = Llama4ImageProcessor
CLASSES["phi4_multimodal"] = Phi4MultimodalImageProcessor


def main(workdir: Path) -> None:
    assert torchvision.__version__.startswith("0.29.1"), torchvision.__version__
    torch.set_num_threads(1)
    jobs = pickle.loads((workdir / "jobs.pkl").read_bytes())
    procs = {}
    for i, job in enumerate(jobs):
        key = (job["cls"], repr(sorted(job["kwargs"].items())))
        if key not in procs:
            procs[key] = CLASSES[job["cls"]](**job["kwargs"])
        proc = procs[key]
        assert proc.backend == "torchvision"
        if job.get("convert"):  # the backend's convert_to_rgb alone, on one HWC uint8 array
            chw = torch.from_numpy(job["images"][0]).permute(2, 0, 1)
            rgb = proc.convert_to_rgb(chw, input_data_format="channels_first")
            np.save(workdir / f"{i}_rgb.npy", rgb.permute(1, 2, 0).contiguous().numpy())
            continue
        rowcol = {"return_row_col_info": True} if job["cls"] in ("idefics3", "smolvlm") else {}
        out = proc(job["images"], return_tensors="pt", **rowcol)
        if "image_pixel_values" in out:  # Phi-4's names; its masks and token counts kept too
            out["pixel_values"] = out["image_pixel_values"]
            out["image_grid_thw"] = out["image_sizes"]
            assert out["image_attention_mask"].dtype == torch.float32
            np.save(workdir / f"{i}_mask.npy", out["image_attention_mask"].numpy())
            np.save(workdir / f"{i}_tokens.npy", np.asarray(out["num_img_tokens"]))
        pv = out["pixel_values"]
        # float32, or Llama 4's bfloat16 (saved widened to float32, exactly, and as its bits)
        assert pv.dtype in (torch.float32, torch.bfloat16), pv.dtype
        np.save(workdir / f"{i}_pixel_values.npy", pv.float().numpy())
        np.save(workdir / f"{i}_bf16.npy", pv.to(torch.bfloat16).view(torch.uint16).numpy())
        if "num_patches" in out:  # InternVL's tiles per image, kept where the grid is
            out["image_grid_thw"] = out["num_patches"]
        if "aspect_ratios" in out:  # Llama 4's [rows, columns] per image, kept as the grid
            out["image_grid_thw"] = out["aspect_ratios"]
        if "image_sizes" in out:  # Pixtral's and LLaVA's (h, w) per image, kept as the grid
            out["image_grid_thw"] = out["image_sizes"]
        if rowcol:  # Idefics3's mask where the grid is; rows / cols (nested lists) as JSON
            out["image_grid_thw"] = out["pixel_attention_mask"]
            (workdir / f"{i}_rowcol.json").write_text(json.dumps([out["rows"], out["cols"]]))
        # Gemma 3 returns num_crops where the patch families return their grid, Kimi-VL its
        # image_grid_hws, Gemma 4 position ids (its soft tokens follow from them), SigLIP nothing
        grid = out.get("image_grid_thw", out.get("num_crops", out.get(
            "image_grid_hws", out.get("image_position_ids"))))
        np.save(workdir / f"{i}_grid.npy", np.zeros(0) if grid is None else grid.numpy())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
