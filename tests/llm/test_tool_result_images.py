"""A tool result's images (a browser screenshot) on the wire: sent to a model that reads images, in each wire
format's own shape, the newest two only, a file that cannot be an image named instead, and never again once a
server refuses one. Real HTTP against the fake provider."""

from __future__ import annotations

import asyncio
import base64
import os
import zlib
from pathlib import Path

from tests.fake_provider import Failure, FakeProvider, Step
from tests.llm.conftest import SYSTEM, make_engine
from yagent.workers.context import estimate_message_tokens
from yagent.workers.context.rule_truncation import cut_result
from yagent.workers.context.tokens import IMAGE_TOKENS
from yagent.workers.llm import Message, ToolCall
from yagent.workers.llm._catalog import lookup_model
from yagent.workers.llm._images import MAX_IMAGE_BYTES, SENT_IMAGES, images_to_send, read_image


def png(path: Path, shade: int) -> Path:
    """A real 1×1 PNG of one grey shade: each file's bytes differ."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", bytes([0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0])) \
        + chunk(b"IDAT", zlib.compress(bytes([0, shade]))) + chunk(b"IEND", b"")
    path.write_bytes(raw)
    return path


def conversation(*shots: Path) -> list[Message]:
    """The Browser's turn: one screenshot call per file, each answered with its stored image."""
    messages = [Message.system(SYSTEM), Message.user("Check the login page.")]
    for i, shot in enumerate(shots):
        messages.append(Message.assistant(tool_calls=(ToolCall(f"s{i}", "browser_screenshot", "{}"),)))
        messages.append(Message.tool(f"s{i}", f"Screenshot of /login\nStored as {shot}", images=(str(shot),)))
    return messages


def ask(fake: FakeProvider, messages: list[Message], api_format: str, model: str, answers: int = 1) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok") for _ in range(answers)])

    async def main() -> None:
        async with make_engine(fake, api_format, model=model, max_retries=0) as engine:
            for _ in range(answers):
                await engine.complete(messages).final()

    asyncio.run(main())


def data_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def test_a_model_that_reads_images_gets_the_newest_two_after_the_tool_results_openai(
        fake: FakeProvider, tmp_path: Path) -> None:
    shots = [png(tmp_path / f"shot{i}.png", i * 40) for i in range(3)]
    ask(fake, conversation(*shots), "openai", "gpt-4o")
    sent = fake.requests[0].body["messages"]
    roles = [m["role"] for m in sent]
    # Each tool result straight after its call; the images in a user turn after it: only the newest two.
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "user", "assistant", "tool", "user"]
    images = [[p["image_url"]["url"] for p in m["content"] if p["type"] == "image_url"]
              for m in sent if m["role"] == "user" and isinstance(m["content"], list)]
    assert images == [[data_url(shots[1])], [data_url(shots[2])]]
    assert all(isinstance(m["content"], str) for m in sent if m["role"] == "tool")
    assert f"The image {shots[2]} from tool call s2:" in sent[-1]["content"][0]["text"]


def test_a_model_that_reads_images_gets_them_inside_the_tool_result_anthropic(
        fake: FakeProvider, tmp_path: Path) -> None:
    shot = png(tmp_path / "shot.png", 200)
    ask(fake, conversation(shot), "anthropic", "claude-sonnet-4-5")
    turn = fake.requests[0].body["messages"][-1]
    (result,) = turn["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "s0"
    assert result["content"] == [
        {"type": "text", "text": f"Screenshot of /login\nStored as {shot}"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": base64.b64encode(shot.read_bytes()).decode()}}]


def test_a_model_that_reads_no_images_gets_the_text_alone(fake: FakeProvider, tmp_path: Path) -> None:
    shot = png(tmp_path / "shot.png", 90)
    assert lookup_model("fake-model") is None and lookup_model("deepseek-chat").images is False
    for api_format, model in (("openai", "fake-model"), ("openai", "deepseek-chat"), ("anthropic", "fake-model")):
        fake.requests.clear()
        ask(fake, conversation(shot), api_format, model)
        assert "base64" not in fake.requests[0].raw.decode(), (api_format, model)
        assert str(shot) in fake.requests[0].raw.decode()


def test_a_file_that_cannot_be_an_image_is_named_in_its_place_and_never_followed(
        fake: FakeProvider, tmp_path: Path) -> None:
    secret = tmp_path / "secret.png"
    png(secret, 10)
    link = tmp_path / "link.png"
    link.symlink_to(secret)  # a link swapped in where a screenshot was: O_NOFOLLOW
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    huge = tmp_path / "huge.png"
    with huge.open("wb") as fh:  # sparse: over the limit without writing it
        fh.write(b"\x89PNG\r\n\x1a\n")
        fh.truncate(MAX_IMAGE_BYTES + 1)
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)  # opened without blocking, refused as no file
    expected = {link: "cannot be read", text: "is not a PNG, JPEG, GIF or WebP image", huge: "over the",
                fifo: "is not a file", tmp_path / "gone.png": "cannot be read"}
    for path, problem in expected.items():
        image = read_image(str(path))
        assert image.data == "" and problem in image.problem, (path, image)
    ask(fake, conversation(link, text), "openai", "gpt-4o")
    raw = fake.requests[0].raw.decode()
    assert base64.b64encode(secret.read_bytes()).decode() not in raw
    assert f"(The image {link} of tool call s0 is not shown: it cannot be read" in raw
    assert f"(The image {text} of tool call s1 is not shown: it is not a PNG" in raw


def test_a_server_that_refuses_images_is_asked_again_without_them_and_never_sent_one_more(
        fake: FakeProvider, tmp_path: Path) -> None:
    shot = png(tmp_path / "shot.png", 60)
    fake.script("coding", "Coding agent", [
        Step(failure=Failure.http(400, message="Invalid content type. image_url is only supported by certain models",
                                  error_type="invalid_request_error")),
        Step(text="first"), Step(text="second")])

    async def main() -> list[str]:
        async with make_engine(fake, "openai", model="gpt-4o", max_retries=0) as engine:
            return [(await engine.complete(conversation(shot)).final()).text for _ in range(2)]

    assert asyncio.run(main()) == ["first", "second"]
    carried = ["image_url" in r.raw.decode() for r in fake.requests]
    assert carried == [True, False, False]
    assert [m["role"] for m in fake.requests[1].body["messages"]][-1] == "tool"


def test_images_persist_as_paths_count_as_tokens_and_go_with_a_cut_result(tmp_path: Path) -> None:
    shot = str(png(tmp_path / "shot.png", 30))
    message = Message.tool("s0", "Screenshot of /login", name="browser_screenshot", images=(shot,))
    assert Message.from_dict(message.to_dict()) == message and message.to_dict()["images"] == [shot]
    assert "images" not in Message.tool("s1", "text").to_dict()  # old lines and digests stay as they were
    assert Message.from_dict({"role": "tool", "tool_call_id": "x", "content": "", "images": [3, shot]}).images \
        == (shot,)
    plain = Message.tool("s0", "Screenshot of /login", name="browser_screenshot")
    assert estimate_message_tokens(message) == estimate_message_tokens(plain) + IMAGE_TOKENS
    cut = cut_result(message, keep_tokens=2, tokens=IMAGE_TOKENS)
    assert cut.images == () and cut.tool_call_id == "s0"
    assert len(images_to_send(conversation(*[Path(shot)] * 5))) == SENT_IMAGES
