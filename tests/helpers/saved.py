"""A folder saved once and restored for each test at the same path, so the absolute paths a workspace records
(its inputs, its manifest) stay true: several tests start from one prepared or validated demo workspace instead of
each preparing its own (20-40 s a stage on 2 cores)."""

import shutil
from pathlib import Path


class SavedFolder:
    def __init__(self, folder: Path, name: str):
        self.folder = folder
        self.copy = folder.with_name(f"{folder.name}.{name}")
        shutil.rmtree(self.copy, ignore_errors=True)
        shutil.copytree(folder, self.copy, symlinks=True)

    def restore(self) -> Path:
        """`folder` exactly as it was saved (whatever the previous test did to it)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.copytree(self.copy, self.folder, symlinks=True)
        return self.folder
