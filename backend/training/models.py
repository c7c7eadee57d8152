"""The model zoo: small networks made only of layers the simulator can lower to GEMMs.

Convolutions and linear layers become `GemmLayer`s (see layers.py); attention's two activation
products are `MatMulSite`s. Everything else (ReLU, pooling, BatchNorm, LayerNorm, softmax) is
elementwise or a reduction, outside the GEMM engine. The registry's names are exactly the API's
`ModelName` literals.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from backend.training.layers import MatMulSite

InputShape = tuple[int, int, int]


class MLP(nn.Sequential):
    """Two hidden ReLU layers of 16*width and 8*width units."""

    def __init__(self, input_shape: InputShape, classes: int, width: int) -> None:
        inputs = math.prod(input_shape)
        super().__init__(
            nn.Flatten(),
            nn.Linear(inputs, 16 * width),
            nn.ReLU(),
            nn.Linear(16 * width, 8 * width),
            nn.ReLU(),
            nn.Linear(8 * width, classes),
        )


class LeNet5(nn.Module):
    """LeCun's LeNet-5 with ReLU and max-pooling (6 and 16 filters of 5x5, then 120-84-classes).

    The first conv is padded so a 28x28 image sees the 32x32 geometry of the original; on
    images smaller than 28 pixels the second conv is padded too, so 8x8 digits fit.
    """

    def __init__(self, input_shape: InputShape, classes: int, width: int) -> None:
        super().__init__()
        channels, height, _ = input_shape
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5, padding=0 if height >= 28 else 2)
        self.pool = nn.MaxPool2d(2)
        self.relu = nn.ReLU()
        features = self._features(torch.zeros(1, *input_shape)).shape[1]
        self.fc1 = nn.Linear(features, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def _features(self, x: Tensor) -> Tensor:
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        return x.flatten(1)

    def forward(self, x: Tensor) -> Tensor:
        x = self.relu(self.fc1(self._features(x)))
        return self.fc3(self.relu(self.fc2(x)))


def conv_bn_relu(inputs: int, outputs: int) -> list[nn.Module]:
    return [
        nn.Conv2d(inputs, outputs, 3, padding=1, bias=False),
        nn.BatchNorm2d(outputs),
        nn.ReLU(),
    ]


class SmallVGG(nn.Module):
    """VGG-style: three stages of two 3x3 conv-BN-ReLU (width, 2*width, 4*width), each followed
    by 2x2 max-pooling, then global average pooling and one linear classifier."""

    def __init__(self, input_shape: InputShape, classes: int, width: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        inputs = input_shape[0]
        for outputs in (width, 2 * width, 4 * width):
            layers += conv_bn_relu(inputs, outputs) + conv_bn_relu(outputs, outputs)
            layers.append(nn.MaxPool2d(2))
            inputs = outputs
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(inputs, classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).mean((2, 3)))


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 conv-BN with an identity or 1x1-conv shortcut."""

    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(
                nn.Conv2d(inputs, outputs, 1, stride, bias=False), nn.BatchNorm2d(outputs)
            )
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet(nn.Module):
    """CIFAR-style ResNet (He et al. 2016): a 3x3 stem, three stages of `blocks` basic blocks
    with width, 2*width, 4*width channels (stride 2 between stages), global pooling, linear.
    Depth 6*blocks+2: ResNet-8 has one block per stage, ResNet-20 three."""

    def __init__(self, input_shape: InputShape, classes: int, width: int, blocks: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(input_shape[0], width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        stages: list[nn.Module] = []
        inputs = width
        for stage, outputs in enumerate((width, 2 * width, 4 * width)):
            for block in range(blocks):
                stride = 2 if stage > 0 and block == 0 else 1
                stages.append(BasicBlock(inputs, outputs, stride))
                inputs = outputs
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(inputs, classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stages(self.relu(self.bn1(self.conv1(x))))
        return self.fc(x.mean((2, 3)))


class SelfAttention(nn.Module):
    """Multi-head self-attention with its two activation products as MatMulSites."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.scores = MatMulSite()
        self.context = MatMulSite()

    def _split(self, x: Tensor) -> Tensor:
        batch, tokens, dim = x.shape
        return x.reshape(batch, tokens, self.heads, dim // self.heads).transpose(1, 2)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        weights = torch.softmax(self.scores(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1]), -1)
        context = self.context(weights, v).transpose(1, 2).reshape(x.shape)
        return self.out(context)


class EncoderBlock(nn.Module):
    """Pre-norm Transformer encoder block: attention and a 2x-wide GELU MLP, both residual."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attention = SelfAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.gelu = nn.GELU()

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(self.gelu(self.fc1(self.norm2(x))))


class TinyTransformer(nn.Module):
    """ViT-style classifier: non-overlapping patches embedded by a strided conv, learned
    position embeddings, two encoder blocks of dimension 2*width with 2 heads, mean pooling."""

    def __init__(self, input_shape: InputShape, classes: int, width: int) -> None:
        super().__init__()
        channels, height, width_px = input_shape
        patch = 4 if min(height, width_px) >= 16 else 2
        dim = 2 * width
        self.embed = nn.Conv2d(channels, dim, patch, stride=patch)
        tokens = (height // patch) * (width_px // patch)
        self.position = nn.Parameter(torch.zeros(1, tokens, dim))
        self.blocks = nn.Sequential(EncoderBlock(dim, 2), EncoderBlock(dim, 2))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: Tensor) -> Tensor:
        tokens = self.embed(x).flatten(2).transpose(1, 2) + self.position
        return self.head(self.norm(self.blocks(tokens)).mean(1))


ModelBuilder = Callable[[InputShape, int, int], nn.Module]
MODEL_REGISTRY: dict[str, ModelBuilder] = {
    "mlp": MLP,
    "lenet5": LeNet5,
    "vgg-small": SmallVGG,
    "resnet8": lambda shape, classes, width: ResNet(shape, classes, width, blocks=1),
    "resnet20": lambda shape, classes, width: ResNet(shape, classes, width, blocks=3),
    "transformer-tiny": TinyTransformer,
}


def build_model(name: str, input_shape: InputShape, classes: int, width: int) -> nn.Module:
    """A freshly initialised zoo model (seed torch's RNG first for reproducible weights)."""
    if name not in MODEL_REGISTRY:
        raise ValueError(f"unknown model '{name}'; known: {', '.join(MODEL_REGISTRY)}")
    return MODEL_REGISTRY[name](input_shape, classes, width)
