"""The run directory on disk: atomic writes, preparing a directory, checking a resume.

Result files are never half-written: :func:`atomic_write_text` writes a temporary file in the
same directory and renames it over the target.  This module imports nothing heavier than the
config loader, so the checkpoint code and the ``clock`` command can use it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_text(path: str | Path, text: str) -> None:
    """Writes ``text`` to ``path`` via a temporary file and ``os.replace`` (never half-written)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
        # mkstemp creates 0600; give the result the permissions a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def prepare_run_dir(out: str | Path, overwrite: bool) -> None:
    """Creates ``out``; refuses an existing non-empty directory unless ``overwrite``."""
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"--out {str(out)!r} exists and is not empty; pass --overwrite")
    out.mkdir(parents=True, exist_ok=True)


def check_resumable(config, run_dir: str | Path) -> None:
    """Raises ``ConfigError`` unless ``run_dir`` holds a run of exactly this config."""
    from jaxnigt import config as config_lib

    run_dir = Path(run_dir)
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise config_lib.ConfigError(
            f"--resume: {str(run_dir)!r} is not a run directory (no config.yaml)"
        )
    previous = config_lib.from_dict(config_lib.read_yaml(path))
    if previous != config:
        old, new = previous.to_dict(), config.to_dict()
        differs = sorted(k for k in new if old.get(k) != new.get(k))
        raise config_lib.ConfigError(
            f"--resume: {str(run_dir)!r} was written by a different config "
            f"(differs in: {', '.join(differs)})"
        )
