"""MERCURY's knobs: signature length and its adaptation, the MCACHE model, what is reused."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from backend.specs.training import Spec


class MercuryParams(Spec):
    """MERCURY: reuse results of input vectors with equal RPQ signatures (MCACHE)."""

    name: Literal["mercury"] = "mercury"
    signature_bits: int = Field(
        32,
        ge=1,
        le=64,
        description="initial signature length k0 (default from benchmarks/mercury_defaults.py: "
        "LeNet-5/MNIST, 3 seeds, centred: 32 bits -0.2 points, 16 bits -1.7 points)",
    )
    bits_step: int = Field(4, ge=0, le=32, description="bits added when loss stalls (k_step)")
    max_bits: int = Field(32, ge=1, le=64, description="upper bound on signature length (k_max)")
    min_improvement: float = Field(
        0.01, ge=0, le=1, description="relative validation-loss gain below which bits are added"
    )
    min_hit_rate: float = Field(
        0.05, ge=0, le=1, description="a layer whose hit rate falls below this turns reuse off"
    )
    cache: Literal["unbounded", "direct", "set-associative"] = Field(
        "set-associative", description="MCACHE model"
    )
    cache_entries: int = Field(1024, ge=1, le=1 << 20, description="MCACHE entries per layer")
    cache_ways: int = Field(4, ge=1, le=64, description="ways of the set-associative MCACHE")
    backward_reuse: bool = Field(True, description="reuse the hit map in BWD-WEIGHT")
    adaptive: bool = Field(True, description="grow signatures and switch layers off adaptively")
    excluded_layers: list[str] = Field(default_factory=list, description="layers never reused")
    reuse_classifier: bool = Field(
        False,
        description="also reuse in the classifier (the layer producing the logits, found by its "
        "role): off by default, as a hit there copies another image's prediction",
    )
    centre_inputs: bool = Field(
        True,
        description="sign x - mu instead of x, mu a running mean of the layer's input vectors, so "
        "the random hyperplanes cut through the data cloud: post-ReLU inputs all lie in the "
        "positive orthant, where plain signs of x collide heavily (LeNet-5/MNIST at 16 bits: "
        "plain signatures collapse to chance accuracy, centred ones stay within a few points); "
        "turn off for the paper's plain RPQ, which needs long signatures",
    )
    centre_momentum: float = Field(
        0.1, gt=0, le=1, description="weight of each mini-batch's mean in the running mean mu"
    )

    @model_validator(mode="after")
    def _bits_bounds(self) -> MercuryParams:
        if self.max_bits < self.signature_bits:
            raise ValueError("max_bits must be at least signature_bits")
        if self.cache == "set-associative" and self.cache_entries % self.cache_ways:
            raise ValueError("cache_entries must be a multiple of cache_ways")
        return self
