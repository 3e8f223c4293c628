"""dualkv for veRL: importing this module makes veRL's FSDP language-model engine (strategy fsdp or
fsdp2) score every micro-batch on packed prompt groups (`DualKVFSDPEngineWithLMHead`).

Load it with veRL's own extension point, in every worker:

    actor_rollout_ref.model.external_lib=dualkv.integrations.verl

Registration goes through veRL's EngineRegistry under this platform's (device, vendor) key,
which `EngineRegistry.get_engine_cls` prefers over the device-only default; the actor, the
old-log-prob pass and the reference model all use it. Nothing of veRL is patched.
"""

from verl.utils.device import get_device_name, get_vendor
from verl.workers.engine.base import EngineRegistry

from .engine import DualKVFSDPEngineWithLMHead  # importing veRL's engine registers its defaults first

__all__ = ["DualKVFSDPEngineWithLMHead", "register"]

MODEL_TYPE = "language_model"
BACKENDS = ("fsdp", "fsdp2")


def register() -> None:
    """Registers the engine for this platform (idempotent); raises if another engine already
    holds the platform's vendor-specific key."""
    key = (get_device_name(), get_vendor())
    registry = EngineRegistry._engines.get(MODEL_TYPE, {})
    holders = {registry.get(backend, {}).get(key) for backend in BACKENDS} - {None}
    if holders == {DualKVFSDPEngineWithLMHead}:
        return
    if holders:
        names = ", ".join(sorted(f"{h.__module__}.{h.__qualname__}" for h in holders))
        raise RuntimeError(
            f"EngineRegistry: {MODEL_TYPE}/{'/'.join(BACKENDS)} for (device, vendor) {key} is already registered to "
            f"{names}; dualkv's engine cannot take its place"
        )
    EngineRegistry.register(model_type=MODEL_TYPE, backend=list(BACKENDS), device=key[0], vendor=key[1])(
        DualKVFSDPEngineWithLMHead
    )


register()
