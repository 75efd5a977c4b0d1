"""The one stand-in for a GPU build of torch (the hardware boundary these machines do not have):
just the attributes servegate's runner detection reads (``torch.version.hip/cuda`` and
``torch.cuda``'s device count, availability and properties)."""

from __future__ import annotations

import types


class FakeTorch(types.ModuleType):
    """A fake ``torch`` module; ``has_cuda=False`` is a build without ``torch.cuda``."""

    def __init__(self, *, hip: str | None = None, cuda: str | None = None, arch: str = "",
                 name: str = "", count: int = 0, major: int | None = 9, minor: int = 0,
                 available: bool | None = None, has_cuda: bool = True) -> None:
        super().__init__("torch")
        self.__version__ = "2.14.1+fake"
        self.version = types.SimpleNamespace(hip=hip, cuda=cuda)
        props = types.SimpleNamespace(gcnArchName=arch, name=name, major=major, minor=minor)
        if has_cuda:
            self.cuda = types.SimpleNamespace(
                is_available=lambda: count > 0 if available is None else available,
                device_count=lambda: count, get_device_properties=lambda index: props)
