"""The ignore rules decide per directory from its ancestors' ignore files: the verdict is the one a plain walk up
every ancestor, for each kind of ignore file, gives — on generated trees with nested, negated, anchored and
directory-only patterns of all three kinds."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from yagent.workers.tools.ignore import IGNORE_FILES, IgnoreRules

NAMES = ("a", "b", "keep.py", "x.log", "build")
DIRS = ((), ("a",), ("a", "b"), ("build",), ("a", "build"))
PATTERNS = ("*.log", "!keep.py", "build/", "/a", "b", "!x.log", "*.py", "a/b", "/build", "k*", "!b/")


def _reference(rules: IgnoreRules, parts: tuple[str, ...], is_dir: bool) -> bool:
    """The rule as first written: every ancestor of every kind looked up, strongest kind first."""
    for kind in IGNORE_FILES:
        verdict = None
        for depth in range(len(parts)):
            for pat in rules._patterns("/".join(parts[:depth]), kind):
                if pat.dir_only and not is_dir:
                    continue
                if pat.regex.fullmatch("/".join(parts[depth:]) if pat.anchored else parts[-1]):
                    verdict = not pat.negate
        if verdict is not None:
            return verdict
    return False


ignore_files = st.dictionaries(
    st.tuples(st.sampled_from(DIRS), st.sampled_from(IGNORE_FILES)),
    st.lists(st.sampled_from(PATTERNS), max_size=4), max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=ignore_files)
def test_the_layered_verdict_is_the_walk_up_verdict(tmp_path_factory, files) -> None:
    root = tmp_path_factory.mktemp("tree")
    for (directory, kind), patterns in files.items():
        where = root.joinpath(*directory)
        where.mkdir(parents=True, exist_ok=True)
        (where / kind).write_text("\n".join(patterns) + "\n")
    rules, reference = IgnoreRules(root), IgnoreRules(root)
    for directory in DIRS:
        for name in NAMES:
            for is_dir in (False, True):
                parts = (*directory, name)
                assert rules.ignored_parts(parts, is_dir) == _reference(reference, parts, is_dir), (parts, is_dir)
    assert rules.ignored(root, True) is False  # the root itself is never ignored by what lies in it


def test_a_nested_negation_beats_the_parents_pattern_and_a_stronger_kind_beats_both(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "a" / ".gitignore").write_text("!keep.log\n")
    rules = IgnoreRules(tmp_path)
    assert rules.ignored_parts(("a", "x.log"), False) and not rules.ignored_parts(("a", "keep.log"), False)
    (tmp_path / ".rgignore").write_text("keep.log\n")
    assert IgnoreRules(tmp_path).ignored_parts(("a", "keep.log"), False)
