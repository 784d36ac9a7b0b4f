"""The lab's engines, loaded: the one module above the base (`lab`) and both engines.

`hangwatch_lab.lab.Lab(..., engine=NAME)` builds the class registered under NAME; each
engine's class registers itself when its module is imported, and this module imports
them all (the package imports it, so `from hangwatch_lab import Lab` can build either).
"""

from __future__ import annotations

from hangwatch_lab.kafka import KafkaLab
from hangwatch_lab.lab import ENGINES, Lab
from hangwatch_lab.mocklab import MockLab

ENGINE_CLASSES: dict[str, type[Lab]] = {MockLab.engine: MockLab, KafkaLab.engine: KafkaLab}
"""Every engine of `ENGINES` and its class."""

if tuple(ENGINE_CLASSES) != ENGINES:  # pragma: no cover - a new engine not listed here
    raise ImportError(f"lab engines {tuple(ENGINE_CLASSES)} differ from ENGINES {ENGINES}")
