"""Ray is an optional dependency (the ``scale`` extra): imported only when a Ray job is built, with one clear error
when it is missing."""

from __future__ import annotations

from types import ModuleType

INSTALL_HINT = 'pip install "parakeet-executorch[scale]"'


class RayNotInstalled(ImportError):
    """Ray Data is not installed; the message says how to install it (one line)."""


def import_ray() -> ModuleType:
    """``ray`` with ``ray.data`` imported. Raises RayNotInstalled when Ray (or one of Ray Data's own dependencies,
    such as pyarrow) cannot be imported."""
    try:
        import ray
        import ray.data  # noqa: F401 (ray.data is used through the returned module)
    except ModuleNotFoundError as exc:
        missing = exc.name or "ray"
        raise RayNotInstalled(f"the Ray mode needs Ray Data, and {missing} is not installed: {INSTALL_HINT}") from None
    return ray
