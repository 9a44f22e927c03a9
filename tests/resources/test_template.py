"""URI templates: RFC 6570's own examples (levels 1-3), round trips, matching rules, and malformed templates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tooldeck.protocol.errors import RegistrationError
from tooldeck.resources.template import UriTemplate

# RFC 6570 section 3.2's variables (the string-valued ones: lists and maps are level 4).
VARIABLES = {
    "dub": "me/too",
    "hello": "Hello World!",
    "half": "50%",
    "var": "value",
    "who": "fred",
    "base": "http://example.com/home/",
    "path": "/foo/bar",
    "v": "6",
    "x": "1024",
    "y": "768",
    "empty": "",
}

# Every level 1-3 example of RFC 6570 sections 1.2 and 3.2.2-3.2.9.
RFC_EXAMPLES = [
    # 1.2, level 1
    ("{var}", "value"),
    ("{hello}", "Hello%20World%21"),
    # 1.2, level 2
    ("{+var}", "value"),
    ("{+hello}", "Hello%20World!"),
    ("{+path}/here", "/foo/bar/here"),
    ("here?ref={+path}", "here?ref=/foo/bar"),
    ("X{#var}", "X#value"),
    ("X{#hello}", "X#Hello%20World!"),
    # 1.2, level 3
    ("map?{x,y}", "map?1024,768"),
    ("{x,hello,y}", "1024,Hello%20World%21,768"),
    ("{+x,hello,y}", "1024,Hello%20World!,768"),
    ("{+path,x}/here", "/foo/bar,1024/here"),
    ("{#x,hello,y}", "#1024,Hello%20World!,768"),
    ("{#path,x}/here", "#/foo/bar,1024/here"),
    ("X{.var}", "X.value"),
    ("X{.x,y}", "X.1024.768"),
    ("{/var}", "/value"),
    ("{/var,x}/here", "/value/1024/here"),
    ("{;x,y}", ";x=1024;y=768"),
    ("{;x,y,empty}", ";x=1024;y=768;empty"),
    ("{?x,y}", "?x=1024&y=768"),
    ("{?x,y,empty}", "?x=1024&y=768&empty="),
    ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
    ("{&x,y,empty}", "&x=1024&y=768&empty="),
    # 3.2.2 simple string expansion
    ("{half}", "50%25"),
    ("O{empty}X", "OX"),
    ("O{undef}X", "OX"),
    ("{x,y}", "1024,768"),
    ("?{x,empty}", "?1024,"),
    ("?{x,undef}", "?1024"),
    ("?{undef,y}", "?768"),
    # 3.2.3 reserved expansion
    ("{+half}", "50%25"),
    ("{base}index", "http%3A%2F%2Fexample.com%2Fhome%2Findex"),
    ("{+base}index", "http://example.com/home/index"),
    ("O{+empty}X", "OX"),
    ("O{+undef}X", "OX"),
    ("up{+path}{var}/here", "up/foo/barvalue/here"),
    # 3.2.4 fragment expansion
    ("{#var}", "#value"),
    ("{#hello}", "#Hello%20World!"),
    ("{#half}", "#50%25"),
    ("foo{#empty}", "foo#"),
    ("foo{#undef}", "foo"),
    # 3.2.5 label expansion with dot-prefix
    ("{.who}", ".fred"),
    ("{.who,who}", ".fred.fred"),
    ("{.half,who}", ".50%25.fred"),
    ("X{.empty}", "X."),
    ("X{.undef}", "X"),
    # 3.2.6 path segment expansion
    ("{/who}", "/fred"),
    ("{/who,who}", "/fred/fred"),
    ("{/half,who}", "/50%25/fred"),
    ("{/who,dub}", "/fred/me%2Ftoo"),
    ("{/var,empty}", "/value/"),
    ("{/var,undef}", "/value"),
    # 3.2.7 path-style parameter expansion
    ("{;who}", ";who=fred"),
    ("{;half}", ";half=50%25"),
    ("{;empty}", ";empty"),
    ("{;v,empty,who}", ";v=6;empty;who=fred"),
    ("{;v,bar,who}", ";v=6;who=fred"),
    ("{;x,y,undef}", ";x=1024;y=768"),
    # 3.2.8 form-style query expansion
    ("{?who}", "?who=fred"),
    ("{?half}", "?half=50%25"),
    ("{?x,y,undef}", "?x=1024&y=768"),
    # 3.2.9 form-style query continuation
    ("{&who}", "&who=fred"),
    ("{&half}", "&half=50%25"),
    ("{&x,y,undef}", "&x=1024&y=768"),
]

# Examples whose URI cannot tell which variable a value belongs to (see the module docstring of template.py).
AMBIGUOUS = {
    "?{undef,y}": {"undef": "768"},  # an undefined variable leaves no trace, so the value goes to the first
    "up{+path}{var}/here": {"path": "/foo/barvalue"},  # nothing separates two adjacent expressions
}


@pytest.mark.parametrize(("template", "expected"), RFC_EXAMPLES)
def test_rfc_6570_examples_expand(template: str, expected: str) -> None:
    assert UriTemplate(template).expand(VARIABLES) == expected


@pytest.mark.parametrize(("template", "uri"), RFC_EXAMPLES)
def test_rfc_6570_examples_match_back(template: str, uri: str) -> None:
    parsed = UriTemplate(template)
    named = {name for part in template.split("{")[1:] if part[0] in ";?&" for name in part[1:].split("}")[0].split(",")}
    # Values come back decoded; an empty value only where the operator spells the name (;x ?x= &x=).
    expected = {
        name: VARIABLES[name]
        for name in parsed.variables
        if name in VARIABLES and (VARIABLES[name] != "" or name in named)
    }
    assert parsed.match(uri) == AMBIGUOUS.get(template, expected)


def test_variables_in_order_of_first_use() -> None:
    assert UriTemplate("s://{b}/{a}{?c,b}{&d}").variables == ("b", "a", "c", "d")
    assert UriTemplate("s://fixed").variables == ()


@pytest.mark.parametrize(
    ("template", "values", "uri"),
    [
        ("file:///{+path}", {"path": "docs/read me.md"}, "file:///docs/read%20me.md"),
        ("s://{x}", {"x": "ä€😀"}, "s://%C3%A4%E2%82%AC%F0%9F%98%80"),
        ("s://{+x}", {"x": "a%2Fb%zz"}, "s://a%2Fb%25zz"),  # reserved expansion keeps %XX, encodes a lone %
        ("s://{x}", {"x": "a%2Fb"}, "s://a%252Fb"),
        ("s://{x}", {}, "s://"),
        ("s://{x}", {"x": None}, "s://"),  # type: ignore[dict-item]
        ("s://café/{x}", {"x": "1"}, "s://caf%C3%A9/1"),  # non-ASCII literals are percent-encoded too
    ],
)
def test_expand_percent_encoding(template: str, values: dict[str, str], uri: str) -> None:
    assert UriTemplate(template).expand(values) == uri


def test_expand_refuses_non_string_values() -> None:
    with pytest.raises(TypeError, match="variable 'id' must be a string, got 3"):
        UriTemplate("s://{id}").expand({"id": 3})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("template", "uri", "values"),
    [
        # simple: one segment, no / ? #
        ("users://{id}/profile", "users://42/profile", {"id": "42"}),
        ("users://{id}/profile", "users://4/2/profile", None),
        ("users://{id}", "users://42?x=1", None),
        ("users://{id}", "users://42#top", None),
        ("users://{id}", "users://", {}),  # empty reads as undefined
        ("users://{id}", "users://a,b", {"id": "a,b"}),  # one variable: the separator is part of the value
        ("s://{x,y}", "s://a,b,c", None),  # more values than variables
        ("s://{x}.{ext}", "s://archive.tar.gz", {"x": "archive.tar", "ext": "gz"}),
        # reserved: may contain /
        ("file:///{+path}", "file:///a/b/c.txt", {"path": "a/b/c.txt"}),
        ("file:///{+path}/raw", "file:///a/b/raw", {"path": "a/b"}),
        ("file:///{+path}{?rev}", "file:///a/b?rev=3", {"path": "a/b", "rev": "3"}),
        ("s://x{#frag}", "s://x#a/b,c", {"frag": "a/b,c"}),
        ("s://x{#frag}", "s://x", {}),
        # label and path segments
        ("s://f{.ext}", "s://f.tar.gz", {"ext": "tar.gz"}),
        ("s://f{.a,b}", "s://f.tar.gz", {"a": "tar", "b": "gz"}),
        ("s://r{/a,b}", "s://r/x/y", {"a": "x", "b": "y"}),
        ("s://r{/a,b}", "s://r/x", {"a": "x"}),
        ("s://r{/a}", "s://r/x/y", None),
        # path-style parameters: named, so empty values come back
        ("s://m{;a,b}", "s://m;b=2;a=1", {"a": "1", "b": "2"}),
        ("s://m{;a,b}", "s://m;a", {"a": ""}),
        ("s://m{;a}", "s://m;zzz=1", None),
        # query: any order, each optional, unknown ones ignored, one value per variable
        ("s://q{?a,b}", "s://q?b=2&a=1", {"a": "1", "b": "2"}),
        ("s://q{?a,b}", "s://q", {}),
        ("s://q{?a,b}", "s://q?", {}),
        ("s://q{?a,b}", "s://q?b=", {"b": ""}),
        ("s://q{?a,b}", "s://q?a=1&utm=x", {"a": "1"}),
        ("s://q{?a,b}", "s://q?a=1&a=2", None),
        ("s://q{?a}{&b}", "s://q?b=2&a=1", {"a": "1", "b": "2"}),
        ("s://q{?a}", "s://q?a=x%26y%3Dz", {"a": "x&y=z"}),
        # literal query parameters must be there, with their value, in any order
        ("s://list?fixed=yes{&x}", "s://list?x=1&fixed=yes", {"x": "1"}),
        ("s://list?fixed=yes{&x}", "s://list?fixed=no&x=1", None),
        ("s://list?fixed=yes{&x}", "s://list?x=1", None),
        ("s://list?fixed=yes{&x}", "s://list", None),
        # a literal query with simple expressions is matched in order
        ("s://search?q={q}&n={n}", "s://search?q=cats&n=3", {"q": "cats", "n": "3"}),
        ("s://search?q={q}&n={n}", "s://search?n=3&q=cats", None),
        # a variable used twice must have one value
        ("s://{x}/{x}", "s://a/a", {"x": "a"}),
        ("s://{x}/{x}", "s://a/b", None),
        # decoding
        ("s://{x}", "s://%E2%82%AC", {"x": "€"}),
        ("s://{x}", "s://%FF", None),  # not UTF-8: no value is made up
        ("s://{x}", "s://a%2", {"x": "a%2"}),  # a broken escape is taken literally
        ("s://{x}", "t://a", None),
    ],
)
def test_match(template: str, uri: str, values: dict[str, str] | None) -> None:
    assert UriTemplate(template).match(uri) == values


def test_match_is_none_for_non_strings() -> None:
    assert UriTemplate("s://{x}").match(42) is None  # type: ignore[arg-type]


# Property: expand then match gives the values back, for values the template can carry unambiguously.
_ANY_TEXT = st.text(min_size=1, max_size=12)
_NO_DOT = st.text(min_size=1, max_size=12).filter(lambda s: "." not in s)  # "." is unreserved: never encoded
_RESERVED_SAFE = st.text(min_size=1, max_size=12).filter(lambda s: not set(s) & set("%,?#"))


@pytest.mark.parametrize(
    ("template", "values"),
    [
        ("s://{x}", _ANY_TEXT),
        ("s://{x}/{y}/z", _ANY_TEXT),
        ("s://{x,y}", _ANY_TEXT),
        ("s://{x}.{y}", _NO_DOT),
        ("s://n{.x}", _ANY_TEXT),
        ("s://n{.x,y}", _NO_DOT),
        ("s://p{/x,y}", _ANY_TEXT),
        ("s://m{;x,y}", _ANY_TEXT),
        ("s://q{?x,y}", _ANY_TEXT),
        ("s://q?fixed=1{&x,y}", _ANY_TEXT),
        ("s://{x}/{+y}{?z}", _RESERVED_SAFE),
        ("s://{x}{#y}", _RESERVED_SAFE),
    ],
)
def test_round_trip(template: str, values: st.SearchStrategy[str]) -> None:
    parsed = UriTemplate(template)

    @given(st.fixed_dictionaries({name: values for name in parsed.variables}))
    def round_trip(given_values: dict[str, str]) -> None:
        assert parsed.match(parsed.expand(given_values)) == given_values

    round_trip()


@given(st.text(max_size=30))
def test_matching_arbitrary_text_never_crashes(uri: str) -> None:
    for template in ("s://{x}/{+y}{?a,b}", "s://{.x,y}{/z}{;w}{#f}", "s://l?k=v{&x}"):
        result = UriTemplate(template).match(uri)
        assert result is None or isinstance(result, dict)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("s://{id", "the expression opened at column 5 is never closed with '}'"),
        ("s://id}", "'}' at column 7 closes no expression"),
        ("s://{a{b}}", "'{' at column 7 is inside the expression opened at column 5"),
        ("s://{}", "empty expression '{}' at column 5"),
        ("s://{a,}", "missing variable name at column 8"),
        ("s://{,a}", "operator ',' at column 6 is reserved by RFC 6570 for future use"),
        ("s://{=path}", "operator '=' at column 6 is reserved"),
        ("s://{!hello}", "operator '!' at column 6 is reserved"),
        ("s://{|var}", "operator '|' at column 6 is reserved"),
        ("s://{$var}", "'$' at column 6 is not allowed in a variable name"),
        ("s://{/?id}", "'?' at column 7 is not allowed in a variable name"),
        ("s://{??hello}", "'?' at column 7 is not allowed in a variable name"),
        ("s://{?x, y}", "' ' at column 9 is not allowed in a variable name"),
        ("s://h{#hello+}", "'+' at column 13 is not allowed in a variable name"),
        ("s://{~thing}", "'~' at column 6 is not allowed in a variable name"),
        ("s://{a..b}", "'.' at column 8 is not allowed in a variable name"),
        ("s://{.a.}", "a variable name cannot end with '.' (column 8)"),
        ("s://{x*}", "the explode modifier '*' at column 7 is RFC 6570 level 4"),
        ("s://{/id*}", "the explode modifier '*' at column 9 is RFC 6570 level 4"),
        ("s://{var:3}", "the prefix modifier ':' at column 9 is RFC 6570 level 4"),
        ("s://{var:prefix}", "the prefix modifier ':' at column 9 is RFC 6570 level 4"),
        ("s://a b/{x}", "' ' at column 6 is not allowed in a URI template (percent-encode it as %20)"),
        ("s://a<b", "'<' at column 6 is not allowed in a URI template"),
        ("s://50%/{x}", "'%' at column 7 must start a percent-encoded byte such as %20"),
        ("s://a|b", "'|' at column 6 is not allowed in a URI template"),
    ],
)
def test_malformed_templates_name_the_column(template: str, message: str) -> None:
    with pytest.raises(RegistrationError) as info:
        UriTemplate(template)
    assert str(info.value).startswith(f"invalid URI template {template!r}: ")
    assert message in str(info.value)


def test_level_4_message_says_what_to_use_instead() -> None:
    with pytest.raises(RegistrationError, match=r"tooldeck supports levels 1-3 \(use \{\+name\} for a value"):
        UriTemplate("file:///{path*}")


def test_a_template_must_be_text() -> None:
    with pytest.raises(RegistrationError, match="a URI template must be a string, got int"):
        UriTemplate(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("template", "absolute"),
    [("file:///{path}", True), ("users://{id}", True), ("{scheme}://x", False), ("/relative/{x}", False)],
)
def test_is_absolute(template: str, absolute: bool) -> None:
    assert UriTemplate(template).is_absolute is absolute


def test_equality_hash_and_text() -> None:
    a, b = UriTemplate("s://{x}"), UriTemplate("s://{x}")
    assert a == b and hash(a) == hash(b) and a != UriTemplate("s://{y}")
    assert a != "s://{x}"
    assert str(a) == "s://{x}" and repr(a) == "UriTemplate('s://{x}')"
    assert len({a, b}) == 1
