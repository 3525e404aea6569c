"""A griffe extension for `make docs`: doctest examples in docstrings become code blocks.

The docstrings are plain text with ``>>>`` examples (they run as doctests); rendered as
Markdown, an example such as ``output_storage[0][0]`` would read as a reference link.
Each run of ``>>>``/``...`` lines with the output lines after it (up to a blank line)
is wrapped in a ```` ```pycon ```` fence before mkdocstrings renders the docstring.
"""

from __future__ import annotations

import griffe


def fence_doctests(text: str) -> str:
    """Wrap each doctest example of ``text`` in a fenced ``pycon`` block.

    >>> prompt = ">" * 3  # spelled out, the example would run as one more doctest
    >>> text = fence_doctests(f"Doubles.\\n\\n{prompt} f(2)\\n4\\n\\nMore.")
    >>> text.splitlines() == ["Doubles.", "", "```pycon", f"{prompt} f(2)", "4", "```", "", "More."]
    True
    """
    out, inside, fence_indent = [], False, ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if not inside and stripped.startswith(">>>"):
            inside, fence_indent = True, line[: len(line) - len(stripped)]
            out.append(fence_indent + "```pycon")
        elif inside and not stripped:
            out.append(fence_indent + "```")
            inside = False
        out.append(line)
    if inside:
        out.append(fence_indent + "```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Fence the doctests of every docstring griffe loads."""

    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
