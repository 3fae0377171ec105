"""Text the owner typed (a column name, a query id, a file name), and engine messages that
quote it, made safe to show in Markdown: shown as typed, never formatted, linked or set
as a formula. Pure and light: the pages import it before anything else of the engine.
"""

from __future__ import annotations

#: The characters with which Markdown formats text inside a line: emphasis (* _ ~), code (`),
#: links and images ([ ]), escapes (\\) and, in Streamlit, formulas ($). Left alone: line-start
#: markers (#, -, 1.), as messages are single sentences and '.' or '-' escaped everywhere
#: would make every number in them unreadable in the page's source; and < >, as Streamlit
#: shows HTML as text (unsafe_allow_html is never set), so "must be < 1" stays readable.
_MD_SPECIAL = frozenset("\\`*_[]~$")


def md_literal(text: str) -> str:
    r"""``text`` as Markdown showing exactly those characters: names typed by the owner (a
    column ``**bold**`` or ``[link](http://x)``, a query id, an error that quotes them)
    are shown, never formatted or linked.

    Examples
    --------
    >>> md_literal("[link](http://x) and **b** $x^2$")
    '\\[link\\](http://x) and \\*\\*b\\*\\* \\$x^2\\$'
    """
    return "".join("\\" + c if c in _MD_SPECIAL else c for c in text)
