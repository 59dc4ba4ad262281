"""What a command writes never lands on what it reads: the one rule for every command that writes
(``audit`` with its reports and ``--export-model``, ``transform``, ``compare``), checked before
any work.

No output may be an input file — the data, your components or embeddings, a report, a model's
ZIP or a file of its folder —, a file another output writes, a folder, a device or a pipe; the
folder that will hold it must accept a new file (a probe is created there and removed). Files
are compared by identity (a symlink, a hard link or ``./`` in the path changes nothing). An
export folder (:class:`Output` with ``folder=True``) writes ``DIR/models.json`` and
``DIR/<model>/manifest.json`` and ``arrays.npz``: none of them may be an input or another output.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import ParameterError
from .modelfile import ARRAYS_FILE, INDEX_FILE, MANIFEST_FILE
from .vocabulary import term


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file (or would be: the same real path, for a file not
    written yet)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


@dataclass(frozen=True)
class Output:
    """A path a command writes, named by its ``flag``; ``folder``: a model export folder."""

    flag: str
    path: Path
    folder: bool = False

    def writes(self, target: Path) -> bool:
        """Whether writing this output would write ``target``."""
        if not self.folder:
            return same_file(self.path, target)
        folder, target = Path(os.path.realpath(self.path)), Path(os.path.realpath(target))
        return target == folder / INDEX_FILE or (target.name in (MANIFEST_FILE, ARRAYS_FILE) and target.parent.parent == folder)


def check_outputs(inputs: Sequence[tuple[Path, str]], outputs: Sequence[Output], *, option: str = "output") -> None:
    """Refuse, before any work, an output that would write an input (``(path, what it is)``,
    e.g. ``(data.csv, "the input file")``) or another output, or that cannot be written.
    ``option`` is the vocabulary name of the file outputs (what a refusal advises choosing)."""
    for i, output in enumerate(outputs):
        for given, what in inputs:
            if output.writes(given):
                raise _overwrites(output, f"{what} {given}" if output.folder else what, option)
        for other in outputs[:i]:
            if other.writes(output.path) or (output.folder and output.writes(other.path)):
                if not (output.folder or other.folder):
                    raise ParameterError(f"{output.flag} and {other.flag} both name {output.path}; give each output its own path.")
                file, folder = (other, output) if output.folder else (output, other)
                raise _overwrites(folder, f"the {file.flag} output {file.path}", option)
        if output.folder:
            _check_folder(output)
        else:
            _check_writable(output.flag, output.path, option)


def _overwrites(output: Output, what: str, option: str) -> ParameterError:
    if output.folder:
        return ParameterError(
            f"{output.flag} {output.path} would write over {what}, which is never overwritten; choose another folder for "
            f"{term('keep_models', True)}."
        )
    return ParameterError(f"{output.flag} {output.path} is {what}, which is never overwritten; choose {term(option)}.")


def _check_folder(output: Output) -> None:
    if output.path.exists() and not output.path.is_dir():
        raise ParameterError(f"{output.flag} {output.path} is a file; give a folder (it receives one folder per model and {INDEX_FILE}).")
    _probe_folder(output.flag, output.path, output.path, "keep_models")


def _check_writable(flag: str, path: Path, option: str) -> None:
    if path.exists() or path.is_symlink():
        if path.is_dir():
            example = "scores.csv" if flag == "--out" else "report." + flag[2:]
            raise ParameterError(f"{flag} {path} is a folder; give a file name such as {path / example}.")
        if not path.is_file():
            raise ParameterError(f"{flag} {path} is not a regular file (a device or a pipe); choose {term(option)}.")
    _probe_folder(flag, path, path.parent, option)
    if path.exists():
        try:
            with open(path, "ab"):
                pass
        except OSError as exc:
            raise ParameterError(f"{flag} {path} cannot be written ({exc.strerror}); choose {term(option)}.") from None


def _probe_folder(flag: str, path: Path, folder: Path, option: str) -> None:
    """``folder`` (or, where it does not exist yet, the first of its parents that does) accepts a
    new file: a probe is created there and removed."""
    while not folder.exists():  # the folders still to create: the probe goes where they would start
        folder = folder.parent
    if not folder.is_dir():
        raise ParameterError(f"{flag} {path}: {folder} is a file, not a folder; choose {term(option)}.")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".fairaudit-probe-"):
            pass
    except OSError as exc:
        raise ParameterError(f"{flag} {path} cannot be written ({exc.strerror}); choose {term(option)}.") from None
