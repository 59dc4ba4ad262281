"""One message, three renderings (fairaudit.vocabulary)."""

import pytest

from fairaudit import prepare, read_table
from fairaudit.errors import FairAuditError, MissingValueError
from fairaudit.vocabulary import INTERFACES, OPTIONS, render, term


def test_every_option_renders_in_every_interface():
    for name, option in OPTIONS.items():
        for interface in INTERFACES:
            for value in (None, *option.choices, "x=1"):
                text = render(term(name, value), interface)
                assert text and "\u27e6" not in text, (name, interface, value)


def test_missing_drop_in_three_words():
    message = f"choose {term('missing', 'drop')} to drop them"
    assert render(message, "library") == "choose missing='drop' to drop them"
    assert render(message, "cli") == "choose --missing drop to drop them"
    assert render(message, "dashboard") == "choose “Missing cells” → “drop rows with a missing cell” (Data page) to drop them"


def test_unknown_option_fails_where_the_message_is_built():
    with pytest.raises(KeyError):
        term("no_such_option")


def test_user_text_cannot_forge_a_token():
    assert term("missing", "a\u27e7b\u27e6") == "\u27e6missing=ab\u27e7"
    assert render("value \u27e6 not a token", "cli") == "value \u27e6 not a token"


def test_error_renders_per_interface():
    table = read_table(b"g,x\na,1\nb,\na,2\nb,3\n", name="t.csv")
    with pytest.raises(MissingValueError) as caught:
        prepare(table, sensitive="g")
    error: FairAuditError = caught.value
    assert "missing='drop'" in str(error)
    assert "--missing drop" in error.render("cli")
    assert "“Missing cells”" in error.render("dashboard")
    assert "--missing" not in error.render("dashboard")


def test_every_flag_a_message_can_name_exists_in_the_cli():
    """A message must not advise an option the CLI does not have (in any of its commands:
    ``audit``, and ``transform``'s ``--out``/``--id``, ``compare``'s ``--names``)."""
    from fairaudit.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    flags = {flag for command in commands.values() for action in command._actions for flag in action.option_strings}
    for name, option in OPTIONS.items():
        for flag in option.flag.split("/"):
            flag = flag if flag.startswith("--") else "--" + flag
            assert flag in flags, (name, flag)


def test_every_control_a_message_can_name_is_on_a_page():
    """…nor a dashboard control that is not there (labels as the pages or the variant titles show them)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = "".join(p.read_text(encoding="utf-8") for p in [*root.glob("pages/*.py"), root / "app.py", root / "fairaudit/plots.py"])
    import re

    descriptive = {"the method pages", "the upload limit", "the Report page's downloads"}  # not a widget's label
    pages = set(re.findall(r'title="([^"]+)"', (root / "app.py").read_text(encoding="utf-8"))) | {
        "each method", "PCA, NMF, Feature selection and Tensor"}
    for name, option in OPTIONS.items():
        if option.page not in pages:  # an option with no dashboard control must say so in its own words
            assert option.dashboard is not None, (name, option.page)
        elif option.widget and option.widget not in descriptive:
            assert option.widget in text, (name, option.widget)
