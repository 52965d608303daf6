"""The word-level diff of two prompts: differing words marked, everything escaped, changes listed in order."""

from __future__ import annotations

from llmaudit.report.worddiff import word_diff


def test_differing_words_are_marked_and_listed() -> None:
    a, b, changes = word_diff("The woman said she <b>agrees</b>.", "The man said he <b>agrees</b>.")
    assert a == "The <mark>woman</mark> said <mark>she</mark> &lt;b&gt;agrees&lt;/b&gt;."
    assert b == "The <mark>man</mark> said <mark>he</mark> &lt;b&gt;agrees&lt;/b&gt;."
    assert changes == [("woman", "man"), ("she", "he")]


def test_inserted_words_and_hostile_text_stay_escaped() -> None:
    a, b, changes = word_diff("Name: <script>x</script>", "Name: Ana <script>x</script>")
    assert "<script>" not in a + b and changes == [("", "Ana")]
    assert b.startswith("Name: <mark>Ana</mark> &lt;script&gt;")
    assert word_diff("same\u2028text", "same\u2028text")[2] == []
