"""The report's one gate for markup it did not write: everything a notebook or a model brings (markdown, outputs, SVG,
HTML, model text) passes this allow-list sanitiser (nh3) before it reaches a page, which then runs no script and
fetches nothing."""

from __future__ import annotations

import re

import nh3

# The allow-list. HTML: ammonia's default tags and attributes (text, lists, tables, details/summary, code/pre,
# images) and inline styles limited to STYLE_PROPERTIES; SVG: what vega draws charts with; MathML: what latex2mathml
# writes. Everything else goes: script, style, iframe, form, foreignObject, event handlers, javascript: URLs.
SVG_TAGS = {"svg", "g", "path", "rect", "circle", "ellipse", "line", "polyline", "polygon", "text", "tspan", "defs",
            "clipPath", "linearGradient", "radialGradient", "stop", "pattern"}
SVG_ATTRIBUTES = {
    "xmlns", "version", "viewBox", "preserveAspectRatio", "width", "height", "x", "y", "x1", "y1", "x2", "y2", "cx",
    "cy", "r", "rx", "ry", "fx", "fy", "fr", "dx", "dy", "d", "points", "transform", "fill", "fill-opacity",
    "fill-rule", "stroke", "stroke-width", "stroke-opacity", "stroke-linecap", "stroke-linejoin", "stroke-dasharray",
    "stroke-dashoffset", "stroke-miterlimit", "opacity", "clip-path", "clip-rule", "clipPathUnits", "gradientUnits",
    "gradientTransform", "spreadMethod", "patternUnits", "patternContentUnits", "patternTransform", "offset",
    "stop-color", "stop-opacity", "font-family", "font-size", "font-style", "font-variant", "font-weight",
    "text-anchor", "dominant-baseline", "alignment-baseline", "baseline-shift", "letter-spacing", "text-decoration",
    "textLength", "lengthAdjust", "display", "visibility", "pointer-events", "shape-rendering", "text-rendering",
    "vector-effect", "paint-order",
}
MATHML_TAGS = {"math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup", "munder", "mover",
               "munderover", "mmultiscripts", "mprescripts", "none", "mfrac", "msqrt", "mroot", "mstyle", "mpadded",
               "mphantom", "menclose", "merror", "mtable", "mtr", "mlabeledtr", "mtd", "semantics", "annotation"}
MATHML_ATTRIBUTES = {
    "xmlns", "display", "displaystyle", "scriptlevel", "mathvariant", "mathsize", "mathcolor", "mathbackground",
    "stretchy", "fence", "separator", "separators", "form", "lspace", "rspace", "largeop", "movablelimits",
    "symmetric", "minsize", "maxsize", "accent", "accentunder", "linethickness", "bevelled", "numalign",
    "denomalign", "width", "height", "depth", "voffset", "notation", "columnalign", "columnspacing", "columnlines",
    "rowalign", "rowspacing", "rowlines", "frame", "framespacing", "equalrows", "equalcolumns", "columnspan",
    "rowspan", "open", "close", "align", "side", "encoding",
}
STYLE_PROPERTIES = {"text-align", "vertical-align", "white-space", "color", "background-color", "font-family",
                    "font-size", "font-style", "font-weight", "text-decoration", "opacity", "mix-blend-mode"}
_IMAGE_DATA = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}")
_FOREIGN_REF = re.compile(r"url\(\s*['\"]?\s*(?![\s'\"#])|\\", re.I)  # url() not to an id here; CSS escapes
_PAINT = {"fill", "stroke", "clip-path", "style"}


def _attribute(tag: str, name: str, value: str) -> str | None:
    """Value rules on top of the allow-list: images only from inline base64 data, no link to a data: document,
    paint and clip references only to ids in the page (the report fetches nothing)."""
    if name == "src":
        return value if _IMAGE_DATA.fullmatch(value) else None
    if name == "href" and re.sub(r"[\x00-\x20]", "", value).lower().startswith("data:"):
        return None
    if name in _PAINT and _FOREIGN_REF.search(value):
        return None
    return value


_SANITISER = nh3.Cleaner(
    tags=nh3.ALLOWED_TAGS | SVG_TAGS | MATHML_TAGS,
    attributes={
        **nh3.ALLOWED_ATTRIBUTES,
        "*": {"class", "id", "title", "lang", "dir", "role", "style"},
        "table": nh3.ALLOWED_ATTRIBUTES["table"] | {"border"},
        **dict.fromkeys(SVG_TAGS, SVG_ATTRIBUTES),
        **dict.fromkeys(MATHML_TAGS, MATHML_ATTRIBUTES),
    },
    attribute_filter=_attribute,
    generic_attribute_prefixes={"aria-"},
    url_schemes={"http", "https", "mailto", "data"},
    filter_style_properties=STYLE_PROPERTIES,
)


def sanitise(html: str) -> str:
    """`html` from a notebook or a model with only the allow-listed elements, attributes and URLs left: inert."""
    return _SANITISER.clean(html)
