"""Text the owner typed (a column name, a query id, a file name), and engine messages that
quote it, made safe to show in Markdown: shown as typed, never formatted, linked or set
as a formula. Pure and light: the pages import it before anything else of the engine.
"""

from __future__ import annotations

#: The characters with which Markdown formats text inside a line: emphasis (* ~), code (`),
#: links and images ([ ]), escapes (\\) and, in Streamlit, formulas ($); '_' too, where it
#: can open or close emphasis (beside a character that is not a letter or digit: inside a
#: word, as in ``age_mean``, CommonMark never reads it so, and it stays as typed). Left
#: alone: line-start markers (#, -, 1.), as messages are single sentences and '.' or '-'
#: escaped everywhere would make every number in them unreadable in the page's source;
#: and < >, as Streamlit shows HTML as text (unsafe_allow_html is never set).
_MD_SPECIAL = frozenset("\\`*[]~$")


def md_literal(text: str) -> str:
    r"""``text`` as Markdown showing exactly those characters: names typed by the owner (a
    column ``**bold**`` or ``[link](http://x)``, a query id, an error that quotes them)
    are shown, never formatted or linked.

    Examples
    --------
    >>> md_literal("[link](http://x) and **b** $x^2$")
    '\\[link\\](http://x) and \\*\\*b\\*\\* \\$x^2\\$'
    >>> md_literal("age_mean is _not_ emphasis")
    'age_mean is \\_not\\_ emphasis'
    """
    out = []
    for i, c in enumerate(text):
        if c in _MD_SPECIAL:
            out.append("\\" + c)
        elif c == "_" and not (0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()):
            out.append("\\_")
        else:
            out.append(c)
    return "".join(out)
