"""Main-text extraction on the saved pages: key sentences kept, boilerplate left out.

The pages and their checks live in ``tests/fixtures/pages/`` (see ``expectations.py``);
``compare_extractors.py`` there scores other extractors on the same checks.
"""

from __future__ import annotations

import pytest

from agentloop.net.extract import extract_main
from tests.fixtures.pages.expectations import PageExpectation, load_pages, normalise, score

PAGES = load_pages()

# Boilerplate the extractor is known to keep, and why (kept visible rather than hidden).
KNOWN_LEAKS: dict[str, set[str]] = {
    # The "who is online" panel sits in the same container as the posts, with a plain
    # heading and no class name that marks it as boilerplate.
    "forum_thread": {"no registered users and 14 guests"},
}


def test_every_page_has_checks() -> None:
    assert {p.name for p in PAGES} >= {
        "news_article",
        "blog_post",
        "docs_page",
        "recipe_page",
        "forum_thread",
        "nested_divs",
    }
    for page in PAGES:
        assert page.title
        assert len(page.present) >= 5
        assert len(page.absent) >= 5


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_key_sentences_present_and_boilerplate_absent(page: PageExpectation) -> None:
    extracted = extract_main(page.html, f"https://pages.example.test/{page.name}")

    result = score(page, extracted.title, extracted.markdown)

    assert result.missing == []
    assert set(result.leaked) <= KNOWN_LEAKS.get(page.name, set())
    assert result.structure_failed == []
    assert extracted.title == page.title


def test_known_leaks_are_still_leaks() -> None:
    """If the extractor improves, the allowance above should go."""
    by_name = {p.name: p for p in PAGES}
    for name, leaks in KNOWN_LEAKS.items():
        page = by_name[name]
        text = normalise(extract_main(page.html).markdown)
        assert all(normalise(leak) in text for leak in leaks), name


def test_code_blocks_keep_their_lines() -> None:
    docs = next(p for p in PAGES if p.name == "docs_page")
    markdown = extract_main(docs.html).markdown
    assert (
        "```\nfrom tidepool import Client, RetryPolicy\n\n"
        "policy = RetryPolicy(attempts=4, backoff=0.5, max_backoff=8)\n"
    ) in markdown


def test_markdown_is_not_escaped_for_a_renderer() -> None:
    """The reader is a model: snake_case and asterisks stay as written."""
    html = "<html><body><article><h1>T</h1>" + "<p>Set max_backoff * 2 in the config.</p>" * 5
    assert "max_backoff * 2" in extract_main(html + "</article></body></html>").markdown


@pytest.mark.parametrize("html", ["", "   ", "<html></html>", "<html><body></body></html>"])
def test_empty_pages_give_empty_text(html: str) -> None:
    assert extract_main(html).markdown == ""


def test_a_page_of_short_blocks_still_gives_its_text() -> None:
    html = "<html><head><title>Status</title></head><body><div>All systems up.</div></body></html>"
    page = extract_main(html)
    assert "All systems up." in page.markdown
    assert page.title == "Status"


def test_xhtml_with_an_xml_declaration() -> None:
    body = "<p>Served as application/xhtml+xml with a declaration lxml refuses in a str.</p>"
    html = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>X page</title></head>'
        f"<body><div id='content'>{body * 4}</div></body></html>"
    )
    page = extract_main(html)
    assert "Served as application/xhtml+xml" in page.markdown
    assert page.title == "X page"


def test_scripts_styles_and_hidden_blocks_are_dropped() -> None:
    article = "<p>" + "Visible sentence of the story. " * 10 + "</p>"
    html = (
        "<html><head><script>var leak = 'SCRIPT-TEXT';</script><style>.x{}</style></head><body>"
        f"<article>{article}<div hidden>HIDDEN-TEXT</div>"
        "<div style='display:none'>NONE-TEXT</div></article></body></html>"
    )
    markdown = extract_main(html).markdown
    assert "Visible sentence of the story." in markdown
    for leak in ("SCRIPT-TEXT", "HIDDEN-TEXT", "NONE-TEXT"):
        assert leak not in markdown


def test_boilerplate_named_blocks_inside_the_article_are_pruned() -> None:
    story = "<p>" + "The river rose two metres overnight. " * 8 + "</p>"
    html = (
        f"<html><body><article>{story}"
        "<div class='ad-slot'>BUY NOW</div><div class='share-bar'>Share on X</div>"
        "<aside class='newsletter-box'>Sign up today</aside>"
        f"{story}</article></body></html>"
    )
    markdown = extract_main(html).markdown
    assert "The river rose two metres overnight." in markdown
    for leak in ("BUY NOW", "Share on X", "Sign up today"):
        assert leak not in markdown


def test_a_container_named_like_boilerplate_is_kept_when_it_holds_the_text() -> None:
    story = "<p>" + "This whole story sits in a badly named wrapper. " * 10 + "</p>"
    html = f"<html><body><div class='has-ads'>{story}</div></body></html>"
    assert "badly named wrapper" in extract_main(html).markdown


def test_big_pages_are_cut_before_extraction() -> None:
    """Readability's cost grows faster than the page: its input is bounded, and says so."""
    paragraphs = "".join(
        f"<p>Paragraph {i} of a very long article, with words.</p>" for i in range(5000)
    )
    html = f"<html><head><script>{'x' * 500_000}</script></head><body><article>{paragraphs}"
    html += "</article></body></html>"

    small = extract_main(html, max_html_chars=20_000)
    whole = extract_main(html, max_html_chars=1_000_000)

    assert small.input_truncated is True
    assert "Paragraph 0 of a very long article" in small.markdown
    assert "Paragraph 4999" not in small.markdown
    assert whole.input_truncated is False, "the script's 500 KB do not count against the cap"
    assert "Paragraph 4999 of a very long article" in whole.markdown
