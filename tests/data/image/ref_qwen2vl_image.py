#!/usr/bin/env python3
"""Reference test: data's Qwen2-VL image preprocessing against transformers'
PIL-based Qwen2VLImageProcessorPil.

- PNG inputs whose size needs no resize: pixel_values within 1e-5.
- Resized inputs: within one 8-bit level per pixel (|diff| <= 1/255/std).
- image_grid_thw equal; our decoded RGB equal to PIL's convert_to_rgb (PNG, incl. alpha).
- JPEG: stb and PIL decoders differ, so both pipelines get stb's pixels; the stb-vs-PIL decode
  difference is printed.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from transformers.image_transforms import convert_to_rgb
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

# Qwen2-VL-2B-Instruct's published preprocessor_config.json (flat min/max pixels) and the
# transformers-5 form (size dict) with a small max_pixels so large inputs are downscaled.
CONFIGS = {
    "published": {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14,
                  "temporal_patch_size": 2, "merge_size": 2,
                  "image_mean": [0.48145466, 0.4578275, 0.40821073],
                  "image_std": [0.26862954, 0.26130258, 0.27577711],
                  "image_processor_type": "Qwen2VLImageProcessor",
                  "processor_class": "Qwen2VLProcessor"},
    "small": {"size": {"shortest_edge": 3136, "longest_edge": 100352}, "patch_size": 14,
              "temporal_patch_size": 2, "merge_size": 2, "resample": 3,
              "rescale_factor": 0.00392156862745098, "image_mean": [0.5, 0.5, 0.5],
              "image_std": [0.5, 0.5, 0.5], "do_resize": True, "do_rescale": True,
              "do_normalize": True, "do_convert_rgb": True},
}


def smooth_noise(rng, h, w):
    """A picture-like image: smooth gradients plus noise, so resampling is exercised."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    base = np.stack([127 + 120 * np.sin(x / 7.0 + c) * np.cos(y / 5.0 - c) for c in range(3)], -1)
    return np.clip(base + rng.normal(0, 25, (h, w, 3)), 0, 255).astype(np.uint8)


def make_inputs(rng, folder):
    """(file, config, needs_resize) per case."""
    cases = []

    def save(name, image, config, resize, **kw):
        path = folder / name
        image.save(path, **kw)
        cases.append((path, config, resize))

    rgb = lambda h, w: Image.fromarray(smooth_noise(rng, h, w))
    save("rgb_56x84.png", rgb(56, 84), "published", False)
    save("rgb_224x140.png", rgb(224, 140), "published", False)
    save("rgb_100x37.png", rgb(100, 37), "published", True)
    save("rgb_333x517.png", rgb(333, 517), "published", True)
    save("rgb_tie_42x70.png", rgb(42, 70), "published", True)  # 1.5 and 2.5 patches: ties
    save("rgb_tiny_10x20.png", rgb(10, 20), "published", True)  # upscaled to min_pixels
    save("rgb_wide_30x1000.png", rgb(30, 1000), "published", True)
    save("rgb_big_700x900.png", rgb(700, 900), "small", True)  # antialiased downscale
    # Height shrinks by more than twice the width's pixels: Pillow 13 runs the vertical pass first.
    save("rgb_tall_600x50.png", rgb(600, 50), "published", True)
    save("rgb_tall_1000x300.png", rgb(1000, 300), "small", True)
    save("grey_70x70.png", Image.fromarray(smooth_noise(rng, 70, 70)[:, :, 0]), "small", True)
    alpha = rng.integers(0, 256, (56, 56), dtype=np.uint8)
    rgba = np.dstack([smooth_noise(rng, 56, 56), alpha])
    save("rgba_56x56.png", Image.fromarray(rgba, "RGBA"), "published", False)
    la = np.dstack([smooth_noise(rng, 84, 56)[:, :, 1], rng.integers(0, 256, (84, 56), dtype=np.uint8)])
    save("la_84x56.png", Image.fromarray(la, "LA"), "small", False)
    pal = Image.fromarray(smooth_noise(rng, 60, 90)).quantize(16)
    pal.info["transparency"] = 3
    save("palette_60x90.png", pal, "small", True, transparency=3)
    save("photo_150x200.jpg", rgb(150, 200), "published", True, quality=90)
    save("photo_112x112.jpg", rgb(112, 112), "small", False, quality=75)
    save("grey_90x60.jpg", Image.fromarray(smooth_noise(rng, 90, 60)[:, :, 2]), "small", True,
         quality=85)
    return cases


def check_case(path, config, resize, out_dir, processors, failures):
    ours_rgb = np.load(out_dir / f"{path.name}.rgb.npy")
    ours_pv = np.load(out_dir / f"{path.name}.pixel_values.npy")
    ours_grid = np.load(out_dir / f"{path.name}.grid.npy")
    is_jpeg = path.suffix == ".jpg"
    pil_rgb = convert_to_rgb(Image.open(path), return_numpy=True)
    decode_diff = np.abs(ours_rgb.astype(int) - pil_rgb.astype(int))
    # Both pipelines start from the same pixels: ours for JPEG (decoders differ), PIL's for PNG.
    ref_in = Image.fromarray(ours_rgb) if is_jpeg else Image.open(path)
    ref = processors[config](images=[ref_in], return_tensors="np")
    ref_pv, ref_grid = ref["pixel_values"], ref["image_grid_thw"][0]
    std = np.array(CONFIGS[config]["image_std"], dtype=np.float64)
    tol = 1e-5 if not resize else 1.0 / 255.0 / std.min() + 1e-5
    line = f"{path.name:24s} {config:9s} grid={tuple(int(v) for v in ref_grid)}"
    if not is_jpeg and decode_diff.max() != 0:
        failures.append(f"{path.name}: decoded RGB differs from PIL by up to {decode_diff.max()}")
    if is_jpeg:
        line += (f" stb-vs-PIL decode: max {decode_diff.max()} levels, mean "
                 f"{decode_diff.mean():.3f}, {100 * (decode_diff > 0).mean():.1f}% of values differ")
    if tuple(ours_grid[:3]) != tuple(ref_grid) or ours_pv.shape != ref_pv.shape:
        failures.append(f"{path.name}: grid {ours_grid[:3]} shape {ours_pv.shape} vs "
                        f"transformers {ref_grid} {ref_pv.shape}")
        print(line + " SHAPE MISMATCH")
        return
    if ours_grid[3] != ref_grid.prod() // 4:
        failures.append(f"{path.name}: {ours_grid[3]} image tokens, expected {ref_grid.prod() // 4}")
    diff = np.abs(ours_pv.astype(np.float64) - ref_pv.astype(np.float64))
    levels = diff.max() * std.min() * 255.0
    line += f" max|diff|={diff.max():.3g} ({levels:.3f} levels), {int((diff > 1e-5).sum())} values off"
    print(line)
    if diff.max() > tol:
        failures.append(f"{path.name}: pixel_values differ by {diff.max():.3g} > {tol:.3g}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    work = Path(args.work)
    processors = {}
    for name, config in CONFIGS.items():
        (work / name).mkdir(parents=True, exist_ok=True)
        (work / name / "preprocessor_config.json").write_text(json.dumps(config))
        kwargs = {k: v for k, v in config.items() if k not in ("image_processor_type", "processor_class")}
        processors[name] = Qwen2VLImageProcessorPil(**kwargs)
    images = work / "images"
    images.mkdir(exist_ok=True)
    cases = make_inputs(np.random.default_rng(4), images)
    out_dir = work / "out"
    out_dir.mkdir(exist_ok=True)
    for config in CONFIGS:
        files = [str(p) for p, c, _ in cases if c == config]
        subprocess.run([args.tool, str(work / config), str(out_dir), *files], check=True)
    failures = []
    for path, config, resize in cases:
        check_case(path, config, resize, out_dir, processors, failures)
    for f in failures:
        print("FAIL:", f)
    print(f"{len(cases) - len(failures)}/{len(cases)} cases passed" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
