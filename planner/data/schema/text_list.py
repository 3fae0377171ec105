"""A list of labels typed on one line (a category list, a filter's values): ``a, b, "c, d"``.

:func:`format_text_list` writes the items, :func:`parse_text_list` reads them back; an item
holding a comma is written in double quotes, as a CSV file quotes it.
"""

from __future__ import annotations

from collections.abc import Sequence


def format_text_list(items: Sequence[str]) -> str:
    """Items as one editable line, ``a, b, "c, d"``: separated by commas, an item that holds
    a comma or begins with a double quote written in double quotes, a quote inside doubled
    (the quoting of a CSV file). :func:`parse_text_list` reads it back to the same items.

    >>> print(format_text_list(['plain', 'Smith, John', 'He said "hi"', 'say "a", ok']))
    plain, "Smith, John", He said "hi", "say ""a"", ok"
    """
    def one(item: str) -> str:
        if "," in item or item.lstrip().startswith('"'):
            return '"' + item.replace('"', '""') + '"'
        return item

    return ", ".join(one(str(x)) for x in items)


def parse_text_list(text: str) -> list[str]:
    """The items of a line typed as ``a, b, "c, d"``: split at commas outside double
    quotes; an item that begins with a double quote runs to the closing one (``""`` inside
    is one quote), so it may hold commas; the spaces around each item are dropped and empty
    items skipped; a quote elsewhere in an item is kept as typed. Raises ``ValueError``
    (the message says what to fix) on an unclosed quote or text after a closing one.

    >>> parse_text_list('plain, "Smith, John", He said "hi", "say ""a"", ok", ,')
    ['plain', 'Smith, John', 'He said "hi"', 'say "a", ok']
    """
    items: list[str] = []
    i, n = 0, len(text)
    while i <= n:
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] == '"':
            start, i, buf = i, i + 1, []
            while True:
                if i >= n:
                    raise ValueError(f"the quote opened at character {start + 1} is not closed; "
                                     'close it with " (write "" for a quote inside).')
                if text[i] == '"':
                    if text[i + 1:i + 2] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            while i < n and text[i].isspace():
                i += 1
            if i < n and text[i] != ",":
                raise ValueError(f"a comma must follow the quoted item that ends at character {i}; "
                                 'write "" for a quote inside a quoted item.')
            item = "".join(buf).strip()
        else:
            end = text.find(",", i)
            end = n if end < 0 else end
            item, i = text[i:end].strip(), end
        if item:
            items.append(item)
        i += 1  # past the comma
    return items
