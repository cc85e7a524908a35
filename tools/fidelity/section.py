"""One table of the fidelity check: rows of (item, verdict, where/why), and its text."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Section:
    """One table: rows of (item, verdict, where/why) and the mismatches among them."""

    title: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, item: str, ok: bool | None, where: str) -> None:
        self.rows.append((item, {True: "ok", False: "MISMATCH", None: "n/a"}[ok], where))

    @property
    def mismatches(self) -> list[tuple[str, str, str]]:
        return [r for r in self.rows if r[1] == "MISMATCH"]


def traced(sec: Section) -> tuple[int, int]:
    """(lines traced to the source, lines that claim to be SGLang's): third-party and
    simulator-only lines are out of the count."""
    ok = sum(1 for r in sec.rows if r[1] == "ok")
    return ok, ok + sum(1 for r in sec.rows if r[1] == "MISMATCH")


def render(version: str, sections: list[Section], verbose: bool) -> str:
    out = [f"== SGLang {version}"]
    for sec in sections:
        counts = {v: sum(1 for r in sec.rows if r[1] == v) for v in ("ok", "MISMATCH", "n/a")}
        out.append(f"-- {sec.title}: {len(sec.rows)} checked, {counts['ok']} ok, {counts['MISMATCH']} mismatch, "
                   f"{counts['n/a']} not SGLang's")
        if sec.title == "messages":
            ok, claimed = traced(sec)
            out.append(f"   traced to {version}'s source: {ok}/{claimed} ({100 * ok / max(1, claimed):.1f} %)")
        for item, verdict, where in sec.rows:  # every rule row; message rows only when off
            if verbose or verdict != "ok" or sec.title == "defaults":
                out.append(f"   {verdict:8} {item}  [{where}]")
    return "\n".join(out)
