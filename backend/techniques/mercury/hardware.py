"""The MCACHE a MERCURY training asks for, sized from its parameters for the area model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.sim.area import McacheSize
from backend.techniques.mercury.params import MercuryParams


def mcache_size(params: Mapping[str, Any]) -> McacheSize:
    """The MCACHE these parameters (as a run stores them) ask for; MercuryParams' defaults for
    what they do not say. Signatures grow up to `max_bits`, so the tags are that wide."""
    defaults = {name: info.default for name, info in MercuryParams.model_fields.items()}
    given = defaults | dict(params)
    return McacheSize(
        entries=int(given["cache_entries"]),
        ways=int(given["cache_ways"]),
        signature_bits=max(int(given["signature_bits"]), int(given["max_bits"])),
        direct=given["cache"] == "direct",
    )
