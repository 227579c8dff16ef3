"""The daemon's ledger of answered authorisation prompts: only an allowing answer to an authorisation prompt
that named outside paths is kept, each for one operation of the tool it was asked for; garbage in a prompt's
details keeps nothing and raises nothing."""

from __future__ import annotations

import math
import multiprocessing
import os
from pathlib import Path

import msgpack

from yagent.daemon.approved_operations import MAX_KEPT, Approval, ApprovalLedger, _receive, _within_frame
from yagent.ipc.messages import ApprovedOperationResult, Question
from yagent.ipc.records import MAX_FRAME_BYTES, encode
from yagent.ipc.vocabulary import QuestionKind


def _question(paths: object = ("/elsewhere/f",), *, kind: QuestionKind = QuestionKind.AUTHORIZE, **details: object
              ) -> Question:
    return Question(request_id="r.1", kind=kind, prompt="p",
                    details={"tool": "create_file", "summary": "create_file /elsewhere/f",
                             "outside_paths": list(paths) if isinstance(paths, tuple) else paths, **details})


def test_an_allowing_answer_is_good_for_one_operation_of_its_tool() -> None:
    ledger = ApprovalLedger()
    ledger.note(3, _question(), {"value": " Once "})
    assert ledger.take(3, "create_file") == Approval("create_file", "create_file /elsewhere/f", ("/elsewhere/f",))
    assert "already used" in str(ledger.take(3, "create_file"))


def test_a_try_with_another_tool_uses_the_answer_up() -> None:
    ledger = ApprovalLedger()
    ledger.note(1, _question(), {"value": "session"})
    assert ledger.take(1, "run_bash") == "prompt 1 approved create_file, not run_bash"
    assert isinstance(ledger.take(1, "create_file"), str)


def test_denials_dismissals_other_kinds_and_garbage_keep_nothing() -> None:
    ledger = ApprovalLedger()
    cases = [
        (_question(), {"value": "deny"}),
        (_question(), {"value": "yes"}),
        (_question(), {"cancelled": True, "value": "once"}),
        (_question(), {}),
        (_question(), {"value": math.nan}),
        (_question(kind=QuestionKind.CONFIRM), {"value": "once"}),
        (_question(()), {"value": "once"}),  # nothing outside: nothing for the daemon to carry out
        (_question(("relative/f",)), {"value": "once"}),
        (_question(("/a\x00b",)), {"value": "once"}),
        (_question((7,)), {"value": "once"}),
        (_question("/elsewhere/f"), {"value": "once"}),  # a string, not a list
        (_question(tool=None), {"value": "once"}),
        (_question(summary=["x"]), {"value": "once"}),
    ]
    for ask, (question, answer) in enumerate(cases):
        ledger.note(ask, question, answer)
        assert isinstance(ledger.take(ask, "create_file"), str), (question, answer)


def test_only_the_newest_answers_are_kept() -> None:
    ledger = ApprovalLedger()
    for ask in range(MAX_KEPT + 5):
        ledger.note(ask, _question(), {"value": "once"})
    assert isinstance(ledger.take(0, "create_file"), str)
    assert isinstance(ledger.take(MAX_KEPT + 4, "create_file"), Approval)


def test_a_result_too_big_for_one_frame_is_cut_rather_than_never_sent() -> None:
    huge = ApprovedOperationResult(id=4, content="x" * (MAX_FRAME_BYTES + 10), data={"blob": "y" * MAX_FRAME_BYTES})
    cut = _within_frame(huge)
    assert cut.id == 4 and len(encode(cut)) <= MAX_FRAME_BYTES and cut.content.endswith("too long for one reply]")
    assert "truncated" in cut.data
    small = ApprovedOperationResult(id=5, content="ok")
    assert _within_frame(small) is small


class _Planted:
    """Unpickled, it would run code in the daemon: here, create a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _receive_from(send) -> object:
    reader, writer = multiprocessing.Pipe(duplex=False)
    exited_r, exited_w = os.pipe()
    os.close(exited_w)  # the process has exited: its sentinel is ready, nothing lingers to be killed
    try:
        send(writer)
        writer.close()
        return _receive(reader, exited_r, 0)
    finally:
        reader.close()
        os.close(exited_r)


def test_an_operations_reply_is_read_as_msgpack_and_a_planted_pickle_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    assert _receive_from(lambda w: w.send(_Planted(marker))) is None
    assert not marker.exists()
    good = {"content": "ok", "is_error": False, "data": {"n": 1}}
    assert _receive_from(lambda w: w.send_bytes(msgpack.packb(good))) == good
    assert _receive_from(lambda w: w.send_bytes(b"\xc1 not msgpack")) is None
    assert _receive_from(lambda w: None) is None  # died without a word
