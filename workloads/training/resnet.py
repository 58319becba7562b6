"""``training.resnet``: time to a target top-1 accuracy for a torchvision ResNet.

The model is torchvision's ``ResNet`` with its ``BasicBlock`` (depth 10, 18, 34) or
``Bottleneck`` (50, 101) blocks, at a chosen ``width`` (channels of the first stage;
torchvision's own is 64) and, for images of 64 pixels or less, a CIFAR-style stem (one
3x3 convolution, no max-pool). The task is the synthetic orientation-classification
data set of ``_images``: learnable, deterministic, with a held-out evaluation split.
The work per sample is counted, not assumed: one forward and backward under
FlopCounterMode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfsuite import Requirements, param
from perfsuite.workloads.training._base import TimeToTarget, TrainingParams
from perfsuite.workloads.training._images import EVAL_STREAM, TRAIN_STREAM, ImageTask

DEPTHS = {
    10: ("basic", (1, 1, 1, 1)),
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
}
SMALL_STEM_MAX_SIZE = 64


@dataclass(frozen=True)
class ResNetParams(TrainingParams):
    depth: int = param(18, "ResNet depth", choices=tuple(DEPTHS))
    width: int = param(64, "channels of the first stage (doubling at each of the four stages)")
    image_size: int = param(64, "image side in pixels")
    classes: int = param(32, "orientation classes")
    noise: float = param(1.0, "standard deviation of the pixel noise")
    jitter: float = param(0.5, "orientation jitter, as a share of the gap between classes")
    global_batch: int = param(512, "images per optimizer step, over all ranks")
    optimizer: str = param("sgd", "optimizer", choices=("sgd", "adamw"))
    lr: float = param(0.4, "base learning rate (after warm-up)")
    weight_decay: float = param(5e-5, "weight decay")
    warmup_steps: int = param(50, "steps of linear learning-rate warm-up")
    schedule: str = param(
        "cosine", "learning-rate decay after warm-up, to 0 at max_steps", choices=("constant", "linear", "cosine")
    )
    eval_every: int = param(100, "steps between evaluations")
    max_steps: int = param(
        3000, "step budget: a run still below the target then stops as aborted (goal=throughput: as success)"
    )
    target_accuracy: float = param(0.9, "top-1 evaluation accuracy that ends the run")
    train_samples: int = param(32768, "images in the training split")
    eval_samples: int = param(4096, "images in the held-out evaluation split")


class ResNetTraining(TimeToTarget):
    name = "training.resnet"
    # 2: the model and the loss each compiled (compile=true) and the fused optimizer on the GPU: what a
    # bare loop of the same model does (perfsuite/crosscheck/training_reference.py)
    # 3: MLPerf's clock rules (untimed_init: compilation and warm-up before run_start), the loss inside
    # DDP's compiled graph
    version = 3
    description = "torchvision ResNet to a target top-1 accuracy on synthetic oriented gratings (time to target)"
    Params = ResNetParams
    quick = {
        "depth": 10,
        "width": 8,
        "image_size": 16,
        "classes": 4,
        "noise": 0.5,
        "jitter": 0.5,
        "global_batch": 64,
        "lr": 0.1,
        "warmup_steps": 0,
        "schedule": "constant",
        "weight_decay": 0.0,
        "eval_every": 10,
        "max_steps": 400,
        "target_accuracy": 0.9,
        "train_samples": 4096,
        "eval_samples": 256,
    }
    sample_unit = "images"
    requirements = Requirements(packages=("torch", "torchvision"))
    channels_last = True

    def _task(self) -> ImageTask:
        p = self.params
        return ImageTask(p.classes, p.image_size, p.noise, p.jitter, p.data_seed)

    def make_data(self):
        task, p = self._task(), self.params
        return (*task.split(p.train_samples, TRAIN_STREAM), *task.split(p.eval_samples, EVAL_STREAM))

    def build_model(self) -> Any:
        from torch import nn
        from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

        p = self.params
        kind, layers = DEPTHS[p.depth]
        block = BasicBlock if kind == "basic" else Bottleneck
        model = ResNet(block, list(layers), num_classes=p.classes)
        # torchvision fixes the first stage at 64 channels and a 7x7 stride-2 stem for
        # 224-pixel images: rebuild the stem and the stages at this width.
        w = p.width
        small = p.image_size <= SMALL_STEM_MAX_SIZE
        model.inplanes = w
        model.conv1 = nn.Conv2d(3, w, 3, 1, 1, bias=False) if small else nn.Conv2d(3, w, 7, 2, 3, bias=False)
        model.bn1 = nn.BatchNorm2d(w)
        if small:
            model.maxpool = nn.Identity()
        model.layer1 = model._make_layer(block, w, layers[0])
        model.layer2 = model._make_layer(block, 2 * w, layers[1], stride=2)
        model.layer3 = model._make_layer(block, 4 * w, layers[2], stride=2)
        model.layer4 = model._make_layer(block, 8 * w, layers[3], stride=2)
        model.fc = nn.Linear(8 * w * block.expansion, p.classes)
        for m in model.modules():  # torchvision's own initialisation, for the rebuilt layers
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        return model

    def random_batch(self, n: int, device: Any):
        import torch

        p = self.params
        return (
            torch.randn(n, 3, p.image_size, p.image_size, device=device),
            torch.randint(0, p.classes, (n,), device=device),
        )

    @staticmethod
    def _layout(x: Any) -> Any:
        import torch

        return x.contiguous(memory_format=torch.channels_last) if x.is_cuda else x

    def outputs(self, model: Any, x: Any) -> Any:
        return model(self._layout(x))

    def criterion(self, logits: Any, y: Any) -> Any:
        import torch.nn.functional as F

        return F.cross_entropy(logits.float(), y)

    def reference_args(self) -> list[str]:
        p = self.params
        return [
            "resnet",
            *("--depth", str(p.depth), "--width", str(p.width), "--image-size", str(p.image_size)),
            *("--classes", str(p.classes)),
        ]

    def eval_sums(self, model: Any, x: Any, y: Any):
        import torch.nn.functional as F

        logits = model(self._layout(x)).float()
        return (logits.argmax(1) == y).sum(), y.new_tensor(len(y)), F.cross_entropy(logits, y, reduction="sum")
