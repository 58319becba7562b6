"""A learnable, deterministic image-classification task for ``training.resnet``.

Each class is an orientation: an image of class ``c`` is a sinusoidal grating at angle
``pi * c / classes`` (plus a jitter of up to ``jitter`` of the gap between neighbouring
classes), with a random spatial frequency, phase, per-channel colour gain and contrast,
under additive Gaussian noise. The label is therefore in the pixels (not random), and
the difficulty is set by three knobs: the number of classes (finer angles), ``jitter``
(classes overlap as it nears 1) and ``noise``.

Train and evaluation splits come from two separate streams of one data seed, so the data
set is fixed for a given parameter set while the run's seed varies the model's
initialisation and the order of samples, as in MLPerf.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

TRAIN_STREAM = 0
EVAL_STREAM = 1
MIN_CYCLES, MAX_CYCLES = 1.5, 4.0  # spatial frequency, in cycles across the image


@dataclass(frozen=True)
class ImageTask:
    classes: int
    size: int
    noise: float
    jitter: float
    data_seed: int

    def split(self, n: int, stream: int) -> tuple[Any, Any]:
        """``n`` images (float32, N x 3 x size x size, roughly zero-mean unit-scale) and
        their labels (int64), identical for identical arguments on every machine."""
        import torch

        g = torch.Generator().manual_seed(self.data_seed * 1000 + stream)
        labels = torch.randint(0, self.classes, (n,), generator=g)
        gap = math.pi / self.classes
        theta = labels.float() * gap + (torch.rand(n, generator=g) - 0.5) * gap * self.jitter
        cycles = MIN_CYCLES + (MAX_CYCLES - MIN_CYCLES) * torch.rand(n, generator=g)
        phase = 2 * math.pi * torch.rand(n, generator=g)
        gains = 0.5 + 0.5 * torch.rand(n, 3, generator=g)
        contrast = 0.6 + 0.8 * torch.rand(n, generator=g)
        axis = torch.arange(self.size, dtype=torch.float32) / self.size
        y, x = torch.meshgrid(axis, axis, indexing="ij")
        # projection of each pixel on the grating's normal: N x size x size
        proj = torch.cos(theta)[:, None, None] * x + torch.sin(theta)[:, None, None] * y
        wave = torch.sin(2 * math.pi * cycles[:, None, None] * proj + phase[:, None, None])
        images = (contrast[:, None, None, None] * gains[:, :, None, None]) * wave[:, None]
        images += self.noise * torch.randn(images.shape, generator=g)
        return images.contiguous(), labels
