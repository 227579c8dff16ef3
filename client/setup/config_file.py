"""Reading and editing `config.toml` for the setup wizard without losing a comment.

The wizard never re-encodes the file from data: it loads it with tomlkit, applies a queue of small
edits (`Op`s) to that document and writes the result atomically. Keys and tables the edits do not
name keep their text, comments and order. A file that is not valid TOML still opens: the wizard can
keep it aside and start a fresh one.

Nothing is written until `write()` is called with the whole queue (the wizard's summary screen).
"""

from __future__ import annotations

import os
import re
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable
from tomlkit.toml_document import TOMLDocument

from yagent.ipc.atomic_file import write_atomic
from yagent.ipc.config import ConfigError, parse_config_text, read_config_bytes, settings_from_table
from yagent.ipc.private_files import make_private_dirs
from yagent.ipc.provider_config import ProviderConfigError, parse_llm_config, referenced_providers

__all__ = [
    "ConfigFile",
    "DeleteProvider",
    "DiffLine",
    "DropBom",
    "Op",
    "PutProvider",
    "SetDefault",
    "SetValue",
    "StartFresh",
    "WriteResult",
    "provider_references",
    "write",
]

BOM = b"\xef\xbb\xbf"
HEADER = "# yagent configuration. `yagent setup` edits it in place and keeps your comments.\n"
# Keys of a provider table the wizard's form manages; any other key in the table is left alone.
FORM_KEYS = ("api_base_url", "api_key", "api_key_env", "model", "api_format", "context_window", "temperature",
             "max_tokens")


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of the summary: `+` added, `−` removed, `→` new default, `~` changed, `!` warning."""

    symbol: str
    text: str
    note: str = ""


def _table(node: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _ensure(container: Any, key: str, *, super_table: bool) -> Any:
    if key not in container:
        # Inside `x = { ... }` only another inline table may go.
        inline = isinstance(container, InlineTable)
        container.add(key, tomlkit.inline_table() if inline else tomlkit.table(is_super_table=super_table))
    return container[key]


def _round_trips(doc: TOMLDocument) -> bool:
    """Does the text tomlkit would write mean what the document holds? Not always: a table header
    inserted among dotted keys (`global.llm.providers.a.model = ...`) captures the keys after it."""
    try:
        return tomllib.loads(tomlkit.dumps(doc)) == doc.unwrap()
    except (tomllib.TOMLDecodeError, TOMLKitError, ValueError):
        return False


def _inline(table: Mapping[str, Any]) -> Any:
    inline = tomlkit.inline_table()
    inline.update({k: _plain(v) for k, v in table.items()})  # plain values: a comment would end the line
    return inline


def _add_provider_table(doc: TOMLDocument, providers: Any, name: str, table: Any) -> TOMLDocument:
    """Put a new provider table into `providers`, in a shape that layout can hold.

    A `[global.llm.providers.NAME]` header where the providers are dotted keys would capture the dotted
    keys after it (tomlkit puts it among them); there `providers.NAME = { ... }` keeps the meaning.
    """
    if isinstance(providers, InlineTable):
        providers[name] = _inline(table)
        return doc
    before = tomlkit.dumps(doc)
    attempts = []
    for shape in (table, _inline(table)):
        candidate = doc if not attempts else tomlkit.parse(before)
        try:
            _table(candidate, "global", "llm", "providers")[name] = shape
        except (TOMLKitError, ValueError):
            continue
        if _round_trips(candidate):
            return candidate
        attempts.append(candidate)
    if not attempts:
        raise ValueError("a provider table cannot be added to this file's [global.llm.providers]")
    return attempts[0]  # holds the edit but does not write back as it reads: `write` refuses it


def provider_references(raw: Mapping[str, Any]) -> dict[str, list[str]]:
    """Every place that names a provider, by provider: what `referenced_providers` counts, with where."""
    refs: dict[str, list[str]] = {}

    def add(name: Any, where: str) -> None:
        if isinstance(name, str) and name:
            refs.setdefault(name, []).append(where)

    add(_table(raw, "global", "llm", "use_provider"), "[global.llm] use_provider")
    for section, label in (("agents", "agents.llm"), ("tools", "tools.llm")):
        node = _table(raw, section, "llm")
        if not isinstance(node, Mapping):
            continue
        add(node.get("use_provider"), f"[{label}] use_provider")
        for name, sub in node.items():
            if isinstance(sub, Mapping):
                add(sub.get("use_provider"), f"[{label}.{name}] use_provider")
    providers = _table(raw, "global", "llm", "providers")
    if isinstance(providers, Mapping):
        for owner, table in providers.items():
            fallbacks = table.get("fallback_providers") if isinstance(table, Mapping) else None
            for item in fallbacks if isinstance(fallbacks, list) else []:
                target = item.get("provider") if isinstance(item, Mapping) else item
                add(target, f"fallback_providers of {owner}")
    return refs


@dataclass
class ConfigFile:
    """The file as loaded: its text, and the tomlkit document unless the TOML itself is broken."""

    path: Path
    text: str = ""
    exists: bool = False
    doc: TOMLDocument | None = None
    broken: str = ""  # why the TOML could not be parsed (then `doc` is None)
    raw: bytes = b""  # the bytes as loaded, to notice edits made meanwhile
    bom: bool = False  # it starts with a UTF-8 byte-order mark, which the daemon's TOML reader rejects

    @classmethod
    def load(cls, path: Path) -> ConfigFile:
        """The file as the daemon would read it (`read_config_bytes`: a pipe, a device or a dangling link is
        refused, never waited on); a file the daemon cannot use comes back `broken`, with the reason."""
        try:
            raw = read_config_bytes(path)
        except ConfigError as exc:
            return cls(path, "", True, None, f"cannot read it: {exc.what}")
        if raw is None:
            return cls(path, "", False, tomlkit.document())
        bom = raw.startswith(BOM)
        try:
            text = raw[len(BOM) if bom else 0:].decode("utf-8")
        except UnicodeDecodeError:
            return cls(path, "", True, None, "it is not UTF-8 text", raw)
        try:
            parse_config_text(text, path)  # first: tomlkit is more lenient in places, and recurses as deep
            doc = tomlkit.parse(text)
        except ConfigError as exc:
            return cls(path, text, True, None, exc.what, raw, bom)
        except TOMLKitError as exc:
            return cls(path, text, True, None, f"TOML syntax error: {exc}", raw, bom)
        return cls(path, text, True, doc, "", raw, bom)

    @property
    def newline(self) -> str:
        """The file's line ending: a file written on Windows keeps CRLF on the lines the wizard adds."""
        crlf = self.text.count("\r\n")
        return "\r\n" if crlf and crlf >= self.text.count("\n") - crlf else "\n"

    def project(self, ops: list[Op]) -> TOMLDocument:
        """A copy of the document with `ops` applied (the original stays untouched)."""
        doc = tomlkit.document() if self.doc is None else tomlkit.parse(tomlkit.dumps(self.doc))
        for op in ops:
            doc = op.apply(doc)
        return doc


def providers_of(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    table = _table(doc, "global", "llm", "providers")
    if not isinstance(table, Mapping):
        return {}
    return {str(k): dict(_plain(v)) for k, v in table.items() if isinstance(v, Mapping)}


def default_of(doc: Mapping[str, Any]) -> str:
    value = _table(doc, "global", "llm", "use_provider")
    return value if isinstance(value, str) else ""


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def referenced_names(doc: Mapping[str, Any]) -> list[str]:
    """Provider names something points at. Uses the shared parser when the file parses, else a raw scan."""
    raw = _plain(doc)
    providers = providers_of(doc)
    env = {t["api_key_env"]: "x" for t in providers.values() if isinstance(t.get("api_key_env"), str)}
    try:
        return referenced_providers(parse_llm_config(raw, env))
    except ProviderConfigError:
        return list(provider_references(raw))


class Op:
    """One queued edit. `apply` edits a tomlkit document; `describe` is its summary line."""

    def apply(self, doc: TOMLDocument) -> TOMLDocument:
        raise NotImplementedError

    def describe(self, before: TOMLDocument) -> DiffLine:
        raise NotImplementedError


@dataclass
class PutProvider(Op):
    """Add a provider, or edit one in place (`replaces` = its old name; a rename moves the table)."""

    name: str
    fields: dict[str, Any]
    replaces: str | None = None

    def apply(self, doc: TOMLDocument) -> TOMLDocument:
        glob = _ensure(doc, "global", super_table=True)
        llm = _ensure(glob, "llm", super_table=False)
        providers = _ensure(llm, "providers", super_table=True)
        old = self.replaces
        if old is not None and old == self.name and old in providers:
            table = providers[old]
            for key in FORM_KEYS:
                value = self.fields.get(key)
                if value in (None, ""):
                    if key in table:
                        del table[key]
                elif key not in table or _plain(table[key]) != value:
                    table[key] = value
            return doc
        if old is not None and old in providers:
            # The items themselves, not their values: a kept key keeps its comment and its layout.
            kept = {k: v for k, v in providers[old].items() if k not in FORM_KEYS}
            del providers[old]
        else:
            kept = {}
        table = tomlkit.table()
        for key in FORM_KEYS:
            value = self.fields.get(key)
            if value not in (None, ""):
                table[key] = value
        for key, value in kept.items():
            table[key] = value
        table.add(tomlkit.nl())  # keeps a blank line before whatever table follows
        return _add_provider_table(doc, providers, self.name, table)

    def describe(self, before: TOMLDocument) -> DiffLine:
        shown = f"{self.fields.get('model', '')} at {self.fields.get('api_base_url', '')}"
        if self.replaces is None:
            return DiffLine("+", f"add provider {self.name}: {shown}")
        old = providers_of(before).get(self.replaces, {})
        changes = []
        for key in FORM_KEYS:
            a, b = old.get(key), self.fields.get(key)
            if a in (None, "") and b in (None, ""):
                continue
            if a != b:
                if key == "api_key":
                    changes.append("api_key changed")
                else:
                    changes.append(f"{key} {a if a not in (None, '') else '(unset)'} → "
                                   f"{b if b not in (None, '') else '(unset)'}")
        rename = f" (renamed from {self.replaces})" if self.replaces != self.name else ""
        text = f"edit provider {self.name}{rename}: " + ("; ".join(changes) if changes else "no field changed")
        return DiffLine("~", text)


@dataclass
class DeleteProvider(Op):
    name: str

    def apply(self, doc: TOMLDocument) -> TOMLDocument:
        providers = _table(doc, "global", "llm", "providers")
        if providers is not None and self.name in providers:
            del providers[self.name]
        return doc

    def describe(self, before: TOMLDocument) -> DiffLine:
        return DiffLine("−", f"delete provider {self.name}")


@dataclass
class SetDefault(Op):
    name: str

    def apply(self, doc: TOMLDocument) -> TOMLDocument:
        llm = _ensure(_ensure(doc, "global", super_table=True), "llm", super_table=False)
        llm["use_provider"] = self.name
        return doc

    def describe(self, before: TOMLDocument) -> DiffLine:
        old = default_of(before) or "(none)"
        return DiffLine("→", f"default provider: {old} → {self.name}")


@dataclass
class SetValue(Op):
    section: tuple[str, ...]
    key: str
    value: Any

    def apply(self, doc: TOMLDocument) -> TOMLDocument:
        node: Any = doc
        for part in self.section:
            node = _ensure(node, part, super_table=False)
        node[self.key] = self.value
        return doc

    def describe(self, before: TOMLDocument) -> DiffLine:
        old = _table(before, *self.section, self.key)
        where = f"[{'.'.join(self.section)}] {self.key}"
        return DiffLine("~", f"{where}: {_plain(old) if old is not None else '(default)'} → {self.value}")


@dataclass
class StartFresh(Op):
    """Replace a file that is not valid TOML; the old text is kept next to it."""

    backup: Path

    def apply(self, doc: TOMLDocument) -> TOMLDocument:
        return doc

    def describe(self, before: TOMLDocument) -> DiffLine:
        return DiffLine("!", f"the broken file is kept as {self.backup}; a new one is written")


@dataclass
class DropBom(Op):
    """Remove the byte-order mark a Windows editor put at the start (the daemon cannot read past it)."""

    def apply(self, doc: TOMLDocument) -> TOMLDocument:
        return doc

    def describe(self, before: TOMLDocument) -> DiffLine:
        return DiffLine("!", "the byte-order mark at the start of the file is removed: yagent reads the file "
                             "as plain UTF-8 and cannot load it otherwise")


@dataclass
class WriteResult:
    ok: bool
    message: str
    warnings: list[str] = field(default_factory=list)


def _dump(config: ConfigFile, doc: TOMLDocument) -> str:
    text = tomlkit.dumps(doc)
    if not config.exists or config.doc is None:
        text = HEADER + ("\n" if text and not text.startswith("\n") else "") + text
    if config.doc is not None and config.newline == "\r\n":
        text = re.sub(r"(?<!\r)\n", "\r\n", text)
    return text


def render(config: ConfigFile, ops: list[Op]) -> str:
    return _dump(config, config.project(ops))


def check(text: str, path: Path, environ: Mapping[str, str]) -> list[str]:
    """Problems the daemon would report loading `text` (empty: it loads)."""
    try:
        table = parse_config_text(text, path)
    except ConfigError as exc:
        return [f"the result is not valid TOML ({exc.what})"]
    try:
        settings_from_table(table, path, environ)
    except ConfigError as exc:
        return [exc.what]
    return []


def write(config: ConfigFile, ops: list[Op], environ: Mapping[str, str] | None = None) -> WriteResult:
    """Apply the queue to the file as loaded and replace it atomically (a new file gets mode 0600, an
    existing one keeps its mode; a symlinked file stays a symlink and the file it points at is replaced)."""
    env = os.environ if environ is None else environ
    path = config.path
    target = Path(os.path.realpath(path))
    try:
        current = read_config_bytes(target)
    except ConfigError as exc:
        return WriteResult(False, f"cannot re-read {path} before writing: {exc.what}; nothing was written")
    if (current is not None) != config.exists or (current is not None and current != config.raw):
        return WriteResult(False, f"{path} changed on disk since the wizard opened it; nothing was written — "
                                  "open the wizard again to start from the new content")
    doc = config.project(ops)
    text = _dump(config, doc)
    if not _round_trips(doc):
        return WriteResult(False, f"the edits cannot be written into {path} without changing what its other "
                                  "lines mean (its layout is unusual for tomlkit); nothing was written — make "
                                  "the change by hand")
    warnings = check(text, path, env)
    try:
        make_private_dirs(target.parent)  # the config may hold keys: its directory is the owner's alone
        for op in ops:
            if isinstance(op, StartFresh) and current is not None:
                _write_new(op.backup, current)
        _replace(target, text)
    except OSError as exc:
        return WriteResult(False, f"writing {path} failed: {exc.strerror or exc}; the file was not changed")
    return WriteResult(True, f"wrote {len(ops)} change{'s' if len(ops) != 1 else ''} to {path}", warnings)


def _write_new(path: Path, data: bytes) -> None:
    """A copy of the old file that may hold keys: readable by its owner only, never over another file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _replace(path: Path, text: str) -> None:
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o600  # a new config may hold API keys
    write_atomic(path, text.encode("utf-8"), mode=mode)


def backup_path(path: Path, clock: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(clock))
    return path.with_name(f"{path.name}.broken-{stamp}")
