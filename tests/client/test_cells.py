"""Cell arithmetic: wrapping and fitting are exact in terminal cells, wide characters included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prompt_toolkit.utils import get_cwidth

from yagent.client.cells import clean, fit, line_width, pad_line, truncate, wrap, wrap_fragments

CJK = "你好世界这是一个测试文本"


def test_cjk_wraps_on_cell_boundaries_without_splitting_a_wide_char() -> None:
    # 9 cells hold four 2-cell characters; the fifth must move to the next line, not be cut.
    lines = wrap(CJK, 9)
    assert lines == ["你好世界", "这是一个", "测试文本"]
    assert [get_cwidth(line) for line in lines] == [8, 8, 8]


def test_mixed_text_breaks_at_spaces_and_next_to_wide_characters() -> None:
    assert wrap("hello 世界 world", 8) == ["hello 世", "界 world"]
    assert wrap("alpha beta gamma", 10) == ["alpha beta", "gamma"]


def test_words_longer_than_a_line_are_hard_split() -> None:
    url = "https://example.com/" + "a" * 50
    lines = wrap(url, 16)
    assert all(len(line) <= 16 for line in lines)
    assert "".join(lines) == url


def test_newlines_are_kept_as_breaks() -> None:
    assert wrap("a\n\nb", 5) == ["a", "", "b"]


def test_clean_drops_controls_and_expands_tabs() -> None:
    assert clean("a\tb\x1b[31mred\x07\r") == "a    b[31mred"
    assert clean("e\u0301") == "é"  # composed, so it occupies one cell as prompt_toolkit will draw it


def test_truncate_and_fit_are_exact_with_wide_characters() -> None:
    assert truncate(CJK, 5) == "你好…"
    assert get_cwidth(truncate(CJK, 5)) == 5
    assert get_cwidth(truncate(CJK, 6)) == 5  # a wide char never straddles the edge
    assert get_cwidth(fit(CJK, 6)) == 6
    assert fit("ab", 5) == "ab   "


def test_pad_line_cuts_and_pads_fragment_lines_to_the_cell() -> None:
    line = pad_line([("a", "abc"), ("b", CJK)], 10)
    assert line_width(line) == 10
    assert line[0] == ("a", "abc")
    assert line_width(pad_line([("a", "x")], 7)) == 7


def test_wrap_fragments_keeps_each_character_style() -> None:
    lines = wrap_fragments([("s1", "hello "), ("s2", "世界世界 wide")], 7)
    assert [line_width(line) <= 7 for line in lines] == [True] * len(lines)
    styles = {style for line in lines for style, _t in line}
    assert styles == {"s1", "s2"}
    assert "".join(t for line in lines for s, t in line if s == "s2").replace(" ", "") == "世界世界wide"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab xyz-/" + CJK + "\n")), max_size=120), st.integers(1, 40))
def test_wrap_never_exceeds_the_width_and_loses_no_visible_character(text: str, width: int) -> None:
    lines = wrap(text, width)
    for line in lines:
        # Only a one-cell-wide column can hold a line wider than itself: one wide character alone.
        assert get_cwidth(line) <= width or (width == 1 and len(line) == 1)
    visible = [ch for ch in clean(text) if ch not in " \n"]
    assert [ch for line in lines for ch in line if ch != " "] == visible
