"""Messages, codec, runtime directory and configuration."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yagent.ipc import MessageTooLarge, RuntimeDirError
from yagent.ipc.config import (
    DEFAULT_RING_BYTES,
    DEFAULT_RING_TOTAL_BYTES,
    ConfigError,
    clamp_parallel,
    load_settings,
    misplaced_keys,
    parse_duration,
    settings_from_table,
)
from yagent.ipc.errors import MalformedMessage
from yagent.ipc.messages import (
    Event,
    EventBatch,
    PublishedEvents,
    RunSpec,
    StartRun,
    Submit,
    TaskList,
    TaskSummary,
    is_event_item,
)
from yagent.ipc.records import MAX_FRAME_BYTES, decode, decode_keeping, encode, encode_with, message_kinds
from yagent.ipc.runtime_dir import ensure_runtime_dir, resolve_runtime_dir
from yagent.ipc.vocabulary import EventType

CHUNK = EventType.AI_CHUNK.value  # as it comes off the wire: a plain str


def _example(cls):
    import dataclasses
    import enum
    import typing

    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        values[f.name] = {int: 7, float: 1.5, str: "s", bool: True, dict: {"a": 1}, list: [1]}.get(tp)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            values[f.name] = next(iter(tp))
        if values[f.name] is None:
            origin = typing.get_origin(tp)
            if origin is list:
                values[f.name] = []
            elif tp is RunSpec:
                values[f.name] = RunSpec(run="r", task="t", turn=1, project="p", project_root="/", agent="a",
                                         input="i", home="/h")
            else:
                values[f.name] = _example(tp)
    return cls(**values)


def test_every_message_kind_round_trips() -> None:
    kinds = message_kinds()
    assert len(kinds) >= 30
    for kind, cls in kinds.items():
        msg = _example(cls)
        back = decode(encode(msg))
        assert back == msg, kind
        assert back.kind == kind


def test_nested_records_round_trip() -> None:
    summary = TaskSummary(task="t1", project="/p", title="x", state="running", created_at=1.0, updated_at=2.0)
    msg = TaskList(id=3, tasks=[summary, summary])
    assert decode(encode(msg)) == msg
    start = StartRun(spec=RunSpec(run="r", task="t", turn=2, project="p", project_root="/x", agent="coding",
                                  input="do it", home="/h",
                                  settings=settings_from_table({"agent": {"lang": "en"}}, environ={}).run_settings))
    assert decode(encode(start)).spec.settings.lang == "en"


@pytest.mark.parametrize("frame", [
    b"", b"\xc1", msgpack.packb([1, 2]), msgpack.packb({"k": "nope"}), msgpack.packb({"k": "submit", "id": 1}),
    msgpack.packb({"k": "submit", "id": "one", "project": "/", "text": "x"}),
    msgpack.packb({"k": "submit", "id": True, "project": "/", "text": "x"}),
])
def test_malformed_frames_are_rejected_with_a_reason(frame: bytes) -> None:
    with pytest.raises(MalformedMessage) as exc:
        decode(frame)
    assert str(exc.value)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=512))
def test_decode_never_raises_anything_but_protocol_errors(frame: bytes) -> None:
    try:
        decode(frame)
    except MalformedMessage:
        pass


_BATCH_HEAD = encode(EventBatch(events=[]))[:8]  # `{"events": ` as encode lays an event batch out


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=512))
def test_decode_keeping_reads_what_decode_reads_or_refuses_it_alike(tail: bytes) -> None:
    # Frames that start as an event batch does, whatever follows: the kept path must agree with the plain one.
    frame = _BATCH_HEAD + tail
    try:
        plain = decode(frame)
    except MalformedMessage:
        with pytest.raises(MalformedMessage):
            decode_keeping(frame, "events")
        return
    msg, kept = decode_keeping(frame, "events")
    assert msg == plain
    if kept is not None:
        assert msgpack.unpackb(kept, raw=False) == msg.events


def test_a_batch_keeps_its_bytes_only_when_they_say_exactly_what_was_decoded() -> None:
    events = [[CHUNK, 1.5, {"text": "a"}], [CHUNK, 2, {"n": [1, {"x": None}]}]]
    msg, kept = decode_keeping(encode(EventBatch(events=events)), "events")
    assert msg == EventBatch(events=events) and kept == msgpack.packb(events)
    relayed = decode(encode_with(PublishedEvents(task="t", run="r", agent="a", seq=3, events=[]), "events", kept))
    assert relayed == PublishedEvents(task="t", run="r", agent="a", seq=3, events=events)
    # Int keys inside: read with text keys, as `decode` reads them — so the bytes are not what was read.
    msg, kept = decode_keeping(encode(EventBatch(events=[[CHUNK, 1.0, {1: "one"}]])), "events")
    assert msg.events == [[CHUNK, 1.0, {"1": "one"}]] and kept is None
    # Another kind, or the same map laid out otherwise: decoded, nothing kept.
    assert decode_keeping(encode(Submit(id=1, project="/", text="x")), "events")[1] is None
    reordered = msgpack.packb({"k": "events", "events": events})
    assert decode_keeping(reordered, "events") == (EventBatch(events=events), None)
    with pytest.raises(MalformedMessage):  # a byte past the map: refused, as `decode` refuses it
        decode_keeping(encode(EventBatch(events=events)) + b"\x00", "events")


def test_frames_above_the_cap_are_refused_on_both_sides() -> None:
    big = Submit(id=1, project="/", text="x" * (MAX_FRAME_BYTES + 10))
    with pytest.raises(MessageTooLarge):
        encode(big)
    with pytest.raises(MessageTooLarge):
        decode(b"\x00" * (MAX_FRAME_BYTES + 1))


def test_published_events_validate_their_shape() -> None:
    ev = Event.from_published("t1", [3, "r1", "coding", EventType.AI_CHUNK, 1.0, {"text": "hi"}])
    assert ev.to_published() == [3, "r1", "coding", EventType.AI_CHUNK, 1.0, {"text": "hi"}]
    with pytest.raises(MalformedMessage):
        Event.from_published("t1", [3, "r1", "coding", EventType.AI_CHUNK, 1.0])
    with pytest.raises(MalformedMessage):
        Event.from_published("t1", ["3", "r1", "coding", EventType.AI_CHUNK, 1.0, {}])


def test_a_live_batch_is_stamped_from_its_first_seq_and_any_malformed_event_refuses_it() -> None:
    batch = PublishedEvents(task="t1", run="r1", agent="coding", seq=7,
                            events=[[CHUNK, 1.0, {"text": "a"}], [CHUNK, 2, {"text": "b"}]])
    events = Event.from_batch(decode(encode(batch)))
    assert [(e.seq, e.task, e.run, e.agent, e.ts, e.data) for e in events] == [
        (7, "t1", "r1", "coding", 1.0, {"text": "a"}), (8, "t1", "r1", "coding", 2.0, {"text": "b"})]
    for bad in ([CHUNK, True, {}], [CHUNK, 1.0], [1, 1.0, {}], [CHUNK, "1", {}], "x",
                [CHUNK, 1.0, ["not", "a", "map"]], (CHUNK, 1.0, {}), [CHUNK, None, {}]):
        assert not is_event_item(bad)  # the daemon publishes none of these ...
        with pytest.raises(MalformedMessage):  # ... and a client takes none of them
            Event.from_batch(PublishedEvents(task="t1", run="r1", agent="a", seq=1, events=[bad]))
    for good in (["t", 1, {}], ["t", float("nan"), {"x": [1]}], ["t", 2**64 - 1, {}]):
        assert is_event_item(good) and len(Event.from_batch(PublishedEvents(task="t1", run="r", agent="a", seq=1,
                                                                           events=[good]))) == 1


def test_runtime_dir_resolution_order(tmp_path: Path) -> None:
    assert resolve_runtime_dir({"YAGENT_RUNTIME_DIR": str(tmp_path / "x"), "XDG_RUNTIME_DIR": "/run/user/1"}) == \
        tmp_path / "x"
    assert resolve_runtime_dir({"XDG_RUNTIME_DIR": "/run/user/1"}) == Path("/run/user/1/yagent")
    assert resolve_runtime_dir({}) == Path(f"/tmp/yagent-{os.getuid()}")


def test_runtime_dir_is_created_private(tmp_path: Path) -> None:
    root = tmp_path / "rt"
    paths = ensure_runtime_dir(root)
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    assert paths.control == root / "control.sock"


@pytest.mark.parametrize("mode", [0o750, 0o705, 0o777])
def test_runtime_dir_open_to_others_is_refused(tmp_path: Path, mode: int) -> None:
    root = tmp_path / "rt"
    root.mkdir()
    os.chmod(root, mode)
    with pytest.raises(RuntimeDirError, match="accessible by group or others"):
        ensure_runtime_dir(root)


@pytest.mark.skipif(os.getuid() != 0, reason="changing a directory's owner needs root")
def test_runtime_dir_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "rt"
    root.mkdir(mode=0o700)
    os.chown(root, 12345, 12345)
    with pytest.raises(RuntimeDirError, match="owned by uid 12345"):
        ensure_runtime_dir(root)


def test_runtime_dir_symlink_and_long_paths_are_refused(tmp_path: Path) -> None:
    target = tmp_path / "real"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(RuntimeDirError, match="not a directory"):
        ensure_runtime_dir(link, create=False)
    with pytest.raises(RuntimeDirError, match="too long"):
        ensure_runtime_dir(tmp_path / ("x" * 120))


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60), ("20m", 1200), ("1h30m", 5400), ("500ms", 0.5),
                                                (90, 90), ("0", 0)])
def test_durations(text, seconds) -> None:
    assert parse_duration(text, "k") == seconds


@pytest.mark.parametrize("bad", ["soon", "10x", "-5s", True, "5s10"])
def test_bad_durations_name_the_key(bad) -> None:
    with pytest.raises(ValueError, match="k"):
        parse_duration(bad, "k")


def test_parallel_knobs_clamp_and_the_kill_switch_forces_serial() -> None:
    assert clamp_parallel(None, 2, {}) == 2
    assert clamp_parallel(0, 2, {}) == 2
    assert clamp_parallel(-3, 2, {}) == 2
    assert clamp_parallel(1, 2, {}) == 1
    assert clamp_parallel(50, 2, {}) == 8
    assert clamp_parallel(5, 2, {"YAGENT_CONCURRENCY": "0"}) == 1
    assert clamp_parallel(5, 2, {"YAGENT_CONCURRENCY": "00"}) == 5


def test_in_flight_limit_zero_is_kept_and_missing_is_eight(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("[llm]\nmax_in_flight_requests = 0\n")
    assert load_settings(cfg, {}).max_in_flight_requests == 0
    cfg.write_text("[llm]\ntimeout = 30\n")
    assert load_settings(cfg, {}).max_in_flight_requests == 8
    assert load_settings(tmp_path / "missing.toml", {}).max_in_flight_requests == 8


def test_daemon_keys_in_the_wrong_section_are_reported_and_take_no_effect(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('max_workers = 3\n[daemon]\nmax_in_flight_requests = 1\nmax_workers = 4\n'
                    '[agent]\ntask_timeout = "5m"\nmax_steps = 9\n[llm]\nmax_in_flight_requests = 2\n')
    settings = load_settings(path)
    assert settings.max_in_flight_requests == 2 and settings.max_workers == 4 and settings.task_timeout == 0
    assert list(settings.warnings) == [
        "max_workers (at the top level) has no effect there: it belongs in [daemon]",
        "[daemon] max_in_flight_requests has no effect there: it belongs in [llm]",
        "[agent] task_timeout has no effect there: it belongs at the top level, before any [section]",
        "[agent] max_steps is not a setting yagent knows, so it does nothing; the limit is per agent: "
        "director_max_steps, coding_max_steps, repo_max_steps, chat_max_steps, devops_max_steps, browser_max_steps, "
        "meta_max_steps, custom_max_steps",
    ]
    assert misplaced_keys({"daemon": {"max_workers": 2}, "llm": {"max_in_flight_requests": 0}}) == []


def test_the_ring_byte_budgets_are_read_from_daemon_with_defaults_and_a_floor(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("[daemon]\nevent_ring_bytes = 1048576\nevent_ring_total_bytes = 8388608\n")
    settings = load_settings(cfg, {})
    assert (settings.event_ring_bytes, settings.event_ring_total_bytes) == (1048576, 8388608)
    defaults = load_settings(tmp_path / "missing.toml", {})
    assert (defaults.event_ring_bytes, defaults.event_ring_total_bytes) == (DEFAULT_RING_BYTES,
                                                                            DEFAULT_RING_TOTAL_BYTES)
    cfg.write_text("[daemon]\nevent_ring_total_bytes = 10\n")
    with pytest.raises(ConfigError, match="event_ring_total_bytes must be at least"):
        load_settings(cfg, {})
    cfg.write_text("[agent]\nevent_ring_bytes = 1048576\n")
    assert load_settings(cfg, {}).warnings == ("[agent] event_ring_bytes has no effect there: it belongs in [daemon]",)


def test_config_errors_say_what_where_and_what_to_do(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[agent]\ndelegate_idle_timeout = "often"\n')
    with pytest.raises(ConfigError) as exc:
        load_settings(cfg, {})
    lines = exc.value.lines()
    assert len(lines) == 3
    assert "delegate_idle_timeout" in lines[0]
    assert str(cfg) in lines[1]
    assert "yagent setup" in lines[2]
    cfg.write_text("[daemon]\nmax_workers = 'many'\n")
    with pytest.raises(ConfigError, match="max_workers must be an integer"):
        load_settings(cfg, {})


def test_a_key_variable_missing_here_does_not_stop_the_file_from_loading(tmp_path: Path) -> None:
    # A client in a shell without the variable must still attach, and yagentd must still start under a
    # service manager that lacks it (a refusal there is a restart loop); the request that needs it fails.
    path = tmp_path / "config.toml"
    path.write_text('[global.llm]\nuse_provider = "p"\n[global.llm.providers.p]\n'
                    'api_base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key_env = "YAGENT_UNSET_KEY"\n')
    settings = load_settings(path, {})
    assert settings.table["global"]["llm"]["use_provider"] == "p"


def test_the_client_skips_a_frame_over_the_cap_and_still_gets_its_reply(tmp_path: Path) -> None:
    import asyncio

    import zmq
    import zmq.asyncio

    from yagent.ipc.client import DaemonClient
    from yagent.ipc.errors import RemoteError
    from yagent.ipc.messages import ErrorReply, Hello, HelloReply, StatusRequest

    runtime = tmp_path / "rt"
    paths = ensure_runtime_dir(runtime)

    async def main() -> None:
        ctx = zmq.asyncio.Context()
        router = ctx.socket(zmq.ROUTER)
        router.bind(f"ipc://{paths.control}")

        async def fake_daemon() -> None:
            while True:
                identity, frame = await router.recv_multipart()
                msg = decode(frame)
                if isinstance(msg, Hello):
                    reply = HelloReply(id=msg.id, version=msg.version, daemon_pid=1, started_at=0.0,
                                       runtime_dir=str(runtime), home="/h")
                    await router.send_multipart([identity, encode(reply)])
                else:
                    await router.send_multipart([identity, b"\x00" * (MAX_FRAME_BYTES + 10)])
                    await router.send_multipart([identity, encode(ErrorReply(id=msg.id, code="x", message="m"))])

        served = asyncio.create_task(fake_daemon())
        client = DaemonClient(runtime, timeout=10.0, context=ctx)
        try:
            await client.connect()
            with pytest.raises(RemoteError) as caught:  # a RequestTimeout when the big frame killed the reader
                await client.request(StatusRequest(id=0), HelloReply)
            assert caught.value.code == "x"
        finally:
            await client.close()
            served.cancel()
            router.close(0)
            ctx.term()

    asyncio.run(main())


def test_a_config_file_starting_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"\xef\xbb\xbf[agent]\nmax_parallel_delegations = 3\n")  # as some Windows editors save
    assert load_settings(path, {}).max_parallel_delegations == 3


def test_maps_with_non_text_keys_decode_with_text_keys() -> None:
    # Agents build such maps ({line_number: text}); refusing them cost the whole frame of events.
    frame = msgpack.packb({"k": "events", "events": [["x", 1.0, {1: "a", b"raw": {2.5: True}}]]},
                          use_bin_type=True)
    batch = decode(frame)
    assert isinstance(batch, EventBatch) and batch.events == [["x", 1.0, {"1": "a", "raw": {"2.5": True}}]]
