"""The errors fairaudit raises for bad input.

Every problem with what a user supplied (a file, a column choice, a rank, a parameter) is a
:class:`FairAuditError`. Its message is written for the person who made the choice: it names
the file, column, row or value at fault and says what to do about it. The command line prints
the message on one line and exits with status 2; the dashboard shows it with ``st.error`` and
keeps running. Anything that is *not* a ``FairAuditError`` is a bug in fairaudit.
"""

from __future__ import annotations


class FairAuditError(ValueError):
    """Base class: bad input, with a message that says what to do.

    The message may name options with :func:`fairaudit.vocabulary.term`; ``str(error)`` words
    them for the library (``missing='drop'``), :meth:`render` for the CLI (``--missing drop``)
    or the dashboard (“Missing cells” → “drop rows with a missing cell”).
    """

    def render(self, interface: str = "library") -> str:
        """The message worded for ``interface``: ``"library"``, ``"cli"`` or ``"dashboard"``."""
        from .vocabulary import render

        return render(str(self.args[0]) if self.args else "", interface)

    def __str__(self) -> str:
        return self.render("library")


# --- the file itself -------------------------------------------------------------------------
class InputFileError(FairAuditError):
    """The file cannot be read as a table."""


class InputFileNotFound(InputFileError):
    """The path does not name a readable file."""


class EmptyFileError(InputFileError):
    """The file has no bytes, no header or no data rows."""


class FileTooLargeError(InputFileError):
    """The file is larger than the configured size limit."""


class EncodingError(InputFileError):
    """The bytes are not UTF-8, UTF-8 with BOM, Windows-1252 or Latin-1 text."""


class MalformedCSVError(InputFileError):
    """The text is not a rectangular delimited table (ragged rows, broken quotes, ...)."""


class ModelFileError(InputFileError):
    """A saved model (manifest + arrays) cannot be read as one."""


class ReportFileError(InputFileError):
    """A file given as a saved JSON report is not one."""


# --- columns ---------------------------------------------------------------------------------
class ColumnError(FairAuditError):
    """A column choice does not fit the table."""


class UnknownColumnError(ColumnError):
    """A named column is not in the table."""


class DuplicateColumnError(ColumnError):
    """Two columns share a header name."""


class FeatureMismatchError(ColumnError):
    """Data given to a fitted model do not have the columns the model was fitted on."""


class NonNumericColumnError(ColumnError):
    """A feature column holds text where numbers are needed."""


class NoFeaturesError(ColumnError):
    """No usable feature column is left."""


class MissingValueError(FairAuditError):
    """Cells are missing and the chosen policy is to stop."""


class NegativeValueError(FairAuditError):
    """A method that needs non-negative data (NMF) was given negative values."""


# --- groups ----------------------------------------------------------------------------------
class GroupError(FairAuditError):
    """The sensitive attribute does not define usable groups."""


class SingleGroupError(GroupError):
    """Only one group is present; a fairness audit compares at least two."""


class SmallGroupError(GroupError):
    """A group has fewer rows than the minimum group size."""


class SensitiveColumnError(GroupError):
    """A sensitive column cannot be turned into groups as it stands."""


# --- tensors ---------------------------------------------------------------------------------
class TensorError(FairAuditError):
    """A long-format table does not define a complete, consistent tensor."""


class DuplicateCellError(TensorError):
    """The same index combination (tensor cell) appears on more than one line."""


class MissingCellError(TensorError):
    """Index combinations (tensor cells) are absent or have no value and no fill was chosen."""


# --- parameters ------------------------------------------------------------------------------
class ParameterError(FairAuditError):
    """A parameter value is out of range for the data."""


class RankError(ParameterError):
    """A rank is below 1 or above what the data can support."""


__all__ = [
    "ColumnError",
    "DuplicateCellError",
    "DuplicateColumnError",
    "EmptyFileError",
    "EncodingError",
    "FairAuditError",
    "FeatureMismatchError",
    "FileTooLargeError",
    "GroupError",
    "InputFileError",
    "InputFileNotFound",
    "MalformedCSVError",
    "MissingCellError",
    "MissingValueError",
    "ModelFileError",
    "NegativeValueError",
    "NoFeaturesError",
    "NonNumericColumnError",
    "ParameterError",
    "RankError",
    "ReportFileError",
    "SensitiveColumnError",
    "SingleGroupError",
    "SmallGroupError",
    "TensorError",
    "UnknownColumnError",
]
