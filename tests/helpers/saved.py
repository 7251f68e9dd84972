"""A folder saved once and restored for each test at the same path, so the absolute paths a workspace records
(its inputs, its manifest) stay true: several tests start from one prepared or validated demo workspace instead of
each preparing its own (20-40 s a stage on 2 cores)."""

import shutil
from pathlib import Path


class SavedFolder:
    folder: Path | None
    copy: Path

    def __init__(self, folder: Path, name: str):
        self.folder = folder
        self.copy = folder.with_name(f"{folder.name}.{name}")
        shutil.rmtree(self.copy, ignore_errors=True)
        shutil.copytree(folder, self.copy, symlinks=True)

    @classmethod
    def of(cls, copy: Path) -> "SavedFolder":
        """A copy saved elsewhere, restored with `restore_to` only (it has no folder of its own)."""
        saved = cls.__new__(cls)
        saved.folder, saved.copy = None, copy
        return saved

    def restore(self) -> Path:
        """`folder` exactly as it was saved (whatever the previous test did to it)."""
        assert self.folder is not None, "a copy saved elsewhere has no folder: use restore_to"
        return self.restore_to(self.folder)

    def restore_to(self, folder: Path) -> Path:
        """`folder` (replaced if it exists) as the saved copy holds it."""
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(self.copy, folder, symlinks=True)
        return folder
