"""The rules that keep every command of the docs run (tests/docblocks.py): fences name their
language, a block is skipped only by a marker with a reason or naming the test that runs it,
and each page with a block to run is run by one of the two runners."""

from __future__ import annotations

from tests.docblocks import NOT_CODE, RUN, SPARK_PAGES, all_blocks, blocks_run_by, names_a_test, runnable_pages


def test_every_fence_names_a_language_the_runner_knows() -> None:
    unknown = [f"{b.where}: ```{b.lang}" for b in all_blocks() if b.lang not in RUN + NOT_CODE]
    assert not unknown, f"write ```bash or ```python (run), or ```text for output (not run): {unknown}"


def test_a_skipped_block_says_why_or_names_the_test_that_runs_it() -> None:
    skipped = [b for b in all_blocks() if b.marker]
    assert all(b.note for b in skipped), [b.where for b in skipped if not b.note]
    for block in (b for b in skipped if b.marker == "run by"):
        test_id = block.note.split()[0]
        assert names_a_test(test_id), f"{block.where}: {test_id} is no test"
        assert block in blocks_run_by(test_id)


def test_a_comment_right_before_a_block_is_a_marker() -> None:
    stray = [f"{b.where}: {b.comment_before}" for b in all_blocks() if b.comment_before]
    assert not stray, f"write <!-- not run: why --> or <!-- run by tests/x.py::test_y -->: {stray}"


def test_not_run_markers_stay_rare() -> None:
    """What a user can run on one machine runs; these cannot (several hosts, real clusters)."""
    not_run = sorted(b.where for b in all_blocks() if b.marker == "not run" and b.lang in RUN)
    assert len(not_run) <= 4, not_run


def test_the_spark_pages_are_those_with_blocks_to_run() -> None:
    """A page leaving SPARK_PAGES, or one no longer having a block to run, is said here."""
    assert set(runnable_pages(spark=True)) == set(SPARK_PAGES)
