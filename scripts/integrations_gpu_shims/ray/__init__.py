"""Import-only stand-in for Ray, put on the path by scripts/run_integrations_gpu.sh when the real
Ray is not installed (a GPU machine without network access, and Ray's wheel is 74 MB).

veRL imports Ray when its package is imported (verl/protocol.py, verl/single_controller) but the
engine's micro-batch path, which the veRL integration's GPU test runs, never calls it: it needs
`ray.ObjectRef` as a name (a dataclass annotation, isinstance checks) and nothing else. Any other
attribute raises AttributeError saying that this is not Ray.
"""

__all__ = ["ObjectRef"]


class ObjectRef:
    """Never instantiated here, so isinstance(x, ray.ObjectRef) is False, as for any local value."""


def __getattr__(name):
    raise AttributeError(
        f"ray.{name}: this is dualkv's import-only Ray stand-in (scripts/integrations_gpu_shims/ray), "
        "not Ray; install ray for anything beyond veRL's engine code"
    )
