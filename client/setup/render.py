"""The wizard's screens as exactly `height` lines of exactly `width` cells.

    row 0          title and progress rail
    rows 1..h-3    the screen's body (lists and forms are windowed around the selection)
    row h-2        message (errors in red), cut to one line
    row h-1        bottom border carrying the key hints
"""

from __future__ import annotations

from ..cells import Line, fit, pad_line, text_width, truncate, wrap
from .presets import PRESETS
from .wizard import PREFERENCES, REQUIRED_FIELDS, Wizard

__all__ = ["render_wizard"]

MIN_HEIGHT = 4


def _title(w: Wizard, width: int) -> Line:
    frags: Line = [("class:title.name", " yagent setup ")]
    for i, (stage, done) in enumerate(w.stages()):
        current = {"providers": 0, "form": 0, "presets": 0, "probe": 0, "broken": 0, "default": 1,
                   "prefs": 2, "summary": 3}.get(w.screen, -1) == i
        style = "class:title.key" if current else "class:title.hint"
        frags += [("class:title.hint", " · " if i else " "), (style, stage + (" ✓" if done else ""))]
    return pad_line(frags, width, "class:title")


def _hints(w: Wizard, width: int) -> Line:
    b = "class:dialog.border"
    frags: Line = [(b, "─")]
    used = 1
    for i, hint in enumerate(w.hints()):
        part: Line = [("class:dialog.hint", " · " if i else " "), ("class:title.key", hint.label),
                      ("class:dialog.hint", f" {hint.what}")]
        part_w = sum(text_width(t) for _s, t in part)
        if used + part_w + 2 > width:
            break
        frags += part
        used += part_w
    frags.append(("class:dialog.hint", " "))
    used += 1
    frags.append((b, "─" * max(0, width - used)))
    return pad_line(frags, width, b)


def _window(items: list[Line], selected: int, room: int) -> list[Line]:
    if len(items) <= room:
        return items
    if room <= 0:
        return []
    start = min(max(0, selected - room // 2), len(items) - room)
    out = items[start:start + room]
    if start > 0:
        out[0] = [("class:dim", f"  ↑ {start} more")]
    if start + room < len(items):
        out[-1] = [("class:dim", f"  ↓ {len(items) - start - room} more")]
    return out


def _columns(width: int, parts: list[tuple[str, str, int]]) -> Line:
    """Lay out (style, text, share) columns so they add up to exactly `width` cells."""
    total_share = sum(share for _s, _t, share in parts) or 1
    widths = [max(1, width * share // total_share) for _s, _t, share in parts]
    widths[-1] = max(0, width - sum(widths[:-1]))
    out: Line = []
    for (style, text, _share), w in zip(parts, widths, strict=True):
        # One blank cell closes each column, so a cut value never runs into the next one.
        out.append((style, fit(text, max(0, w - 1)) + (" " if w else "")))
    return out


def _body_providers(w: Wizard, width: int, room: int) -> list[Line]:
    providers = w.providers()
    default = w.default_provider()
    head = [pad_line([("class:dim", f" providers in {w.config.path}")], width)]
    if not providers:
        return [*head, [], [("", "   no providers yet: "), ("class:title.key", "a"), ("", " adds one")]]
    rows: list[Line] = []
    for i, (name, table) in enumerate(providers.items()):
        marks = []
        if name == default or (len(providers) == 1 and not default):
            marks.append("default")
        env = table.get("api_key_env")
        if env and not w.environ.get(str(env)):
            marks.append(f"⚠ ${env} unset")
        sel = i == w.selected
        style = "class:dialog.option.selected" if sel else ""
        inner = width - 3
        cols = _columns(inner, [(style, name, 3), (style, str(table.get("model", "")), 4),
                                (style, str(table.get("api_base_url", "")), 6), (style, " ".join(marks), 3)])
        rows.append([("class:prompt", " ▸ " if sel else "   "), *cols])
    return [*head, *_window(rows, w.selected, room - 1)]


def _body_form(w: Wizard, width: int, room: int) -> list[Line]:
    form = w.form
    assert form is not None
    title = f" edit provider {form.editing}" if form.editing else " add a provider"
    out: list[Line] = [pad_line([("class:title.key", title), ("class:dim", "  (* required)")], width)]
    label_w = min(18, max(8, width // 4))
    field_w = max(4, width - label_w - 4)
    rows: list[Line] = []
    for i, f in enumerate(form.visible()):
        focused = i == form.focus
        star = "*" if f.key in REQUIRED_FIELDS else " "
        label_style = "class:field.label.focused" if focused else "class:field.label"
        rows.append([("class:prompt", " ▸" if focused else "  "), (label_style, fit(f"{star}{f.label}", label_w)),
                     ("", "  "), *f.field.render(field_w, focused=focused)])
    hidden = [f for f in form.fields if f.optional and not form.show_optional]
    if hidden:
        rows.append([("class:dim", f"   {len(hidden)} optional fields hidden (api format, context window, …)")])
    problem_rows = [[("class:error", "   " + t)] for p in form.problems for t in wrap(p, max(1, width - 3))]
    field_room = room - 1
    if len(rows) > field_room:
        rows = _window(rows, form.focus, field_room)
    out += rows
    left = room - len(out)
    if problem_rows and left > 1:
        out.append([])
        out += problem_rows[:left - 1]
    return out


def _body_presets(w: Wizard, width: int, room: int) -> list[Line]:
    out: list[Line] = [pad_line([("class:dim", " presets fill only the fields that are still empty")], width)]
    rows: list[Line] = []
    for i, p in enumerate(PRESETS):
        sel = i == w.preset_index
        style = "class:dialog.option.selected" if sel else ""
        rows.append([("class:prompt", " ▸ " if sel else "   "),
                     *_columns(width - 3, [(style, p.label, 1), ("class:dim", p.api_base_url, 1)])])
    return out + _window(rows, w.preset_index, room - 1)


def _body_probe(w: Wizard, width: int, room: int) -> list[Line]:
    name, table = w.probe_target or ("?", {})
    out: list[Line] = [pad_line([("", f" testing {name}: "), ("class:dim", f"{table.get('model', '')} at "
                                                                           f"{table.get('api_base_url', '')}")],
                                width)]
    if w.probe_running:
        out.append([("class:dim", "   sending a one-token request…")])
        return out
    r = w.probe_result
    if r is None:
        return out
    out.append([])
    style = "class:answer" if r.ok else "class:error"
    out += [[(style, "   " + t)] for t in wrap(("✓ " if r.ok else "✗ ") + r.summary, max(1, width - 3))]
    if r.detail:
        out += [[("class:dim", "   " + t)] for t in wrap(f"the endpoint said: {r.detail}", max(1, width - 3))]
    if not r.ok:
        out += [[("class:dim", "   " + t)] for t in wrap("you can keep it anyway (enter), fix it (e) or retry (r)",
                                                          max(1, width - 3))]
    return out


def _body_default(w: Wizard, width: int, room: int) -> list[Line]:
    out: list[Line] = [pad_line([("", " which provider do agents use unless told otherwise?")], width)]
    rows: list[Line] = []
    current = w.default_provider()
    providers = w.providers()
    name_w = min(max((text_width(n) for n in providers), default=0), max(8, width // 3))
    for i, (name, table) in enumerate(providers.items()):
        sel = i == w.selected
        style = "class:dialog.option.selected" if sel else ""
        mark = "  (current)" if name == current else ""
        rows.append([("class:prompt", " ▸ " if sel else "   "),
                     (style, fit(f"{fit(name, name_w)}  {table.get('model', '')}{mark}", width - 3))])
    return out + _window(rows, w.selected, room - 1)


def _body_prefs(w: Wizard, width: int, room: int) -> list[Line]:
    out: list[Line] = []
    label_w = min(16, max(8, width // 4))
    for i, pref in enumerate(PREFERENCES):
        sel = i == w.pref_row
        value = w.pref_values.get(pref.key, w.current_pref(pref))
        changed = value != w.current_pref(pref)
        style = "class:dialog.option.selected" if sel else ""
        text = f"◂ {value} ▸" + ("  (changed)" if changed else "")
        out.append([("class:prompt", " ▸ " if sel else "   "), ("class:field.label", fit(pref.label, label_w)),
                    (style, fit(text, max(1, width - 3 - label_w)))])
    out.append([])
    pref = PREFERENCES[w.pref_row]
    out += [[("class:dim", "   " + t)] for t in wrap(pref.help, max(1, width - 3))]
    return out[:room]


def _body_summary(w: Wizard, width: int, room: int) -> list[Line]:
    out: list[Line] = [pad_line([("", f" changes to {w.config.path}")], width)]
    styles = {"+": "class:answer", "−": "class:error", "→": "class:question", "~": "class:question",
              "!": "class:error", "=": "class:dim"}
    lines: list[Line] = []
    diff = w.diff()
    if not diff:
        lines.append([("class:dim", "   = nothing to change")])
    for d in diff:
        for k, t in enumerate(wrap(d.text, max(1, width - 5))):
            lines.append([("", "   "), (styles.get(d.symbol, ""), f"{d.symbol if k == 0 else ' '} {t}")])
    for warning in w.warnings():
        for k, t in enumerate(wrap(f"after writing, still to fix: {warning}", max(1, width - 5))):
            lines.append([("", "   "), ("class:error", f"{'!' if k == 0 else ' '} {t}")])
    if diff:
        lines.append([("", "   "), ("class:dim", "= everything else in the file stays as it is, comments included")])
    if len(lines) > room - 1:
        keep = max(0, room - 2)
        lines = [*lines[:keep], [("class:dim", f"   … {len(lines) - keep} more lines")]]
    return out + lines


def _body_broken(w: Wizard, width: int, room: int) -> list[Line]:
    text = (f"{w.config.path} cannot be used: {w.config.broken}. The wizard can start a fresh file and keep "
            "the broken one next to it, or you can quit and fix it by hand.")
    return [[("class:error", " " + t)] for t in wrap(text, max(1, width - 1))]


def _body_quit(w: Wizard, width: int, room: int) -> list[Line]:
    text = f"discard {len(w.ops)} queued change(s)? Nothing has been written yet."
    return [[("", " " + t)] for t in wrap(text, max(1, width - 1))]


_BODIES = {"providers": _body_providers, "form": _body_form, "presets": _body_presets, "probe": _body_probe,
           "default": _body_default, "prefs": _body_prefs, "summary": _body_summary, "broken": _body_broken,
           "quit": _body_quit}


def render_wizard(w: Wizard, width: int, height: int) -> list[Line]:
    width = max(1, width)
    height = max(MIN_HEIGHT, height)
    room = height - 3
    body = [pad_line(line, width) for line in _BODIES[w.screen](w, width, room)[:room]]
    while len(body) < room:
        body.append(pad_line([], width))
    style = "class:message.error" if w.message_error else "class:message"
    message = [(style, fit(" " + truncate(w.message, width), width))]
    return [_title(w, width), *body, message, _hints(w, width)]
