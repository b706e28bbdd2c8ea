"""Pretty-prints and condenses the XML parts of an Office document."""

import defusedxml.minidom


def pretty(data):
    """The XML `data` (bytes) indented, as UTF-8 bytes."""
    dom = defusedxml.minidom.parseString(data)
    return dom.toprettyxml(indent="  ", encoding="utf-8")


def condensed(data):
    """The XML `data` (bytes) with the whitespace-only text pretty() added removed."""
    dom = defusedxml.minidom.parseString(data)
    for node in list(_walk(dom)):
        if node.nodeType == node.TEXT_NODE and not node.data.strip():
            node.parentNode.removeChild(node)
    return dom.toxml(encoding="UTF-8")


def _walk(node):
    for child in node.childNodes:
        yield child
        yield from _walk(child)
