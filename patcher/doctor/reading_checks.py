"""What the release's own code said of the line: its parser (``launch.parse``: read, refused, or
read by doctor's exact spellings where the engine does not import) and its start-up configuration
(``launch.startup``: refused in its words, or what it resolved). doctor judges the rest of the line
on what these say (patcher/release/release_parser.py runs both in the engine's interpreter).
"""

from __future__ import annotations

from patcher.findings import Finding, hint, ok, problem, unknown
from patcher.release import release_parser
from patcher.release.release import Release


def reading_finding(reading: release_parser.Reading, release: Release) -> Finding:
    """How the line was read: by the release's own parser, refused by it, or (where it does not
    import) by doctor's exact spellings, with the tokens the release may read otherwise."""
    label = release.label()
    code = "launch.parse"
    if reading.status == "parsed":
        when = "cached answer" if reading.cached else f"{reading.seconds:.1f} s"
        return ok(code, f"read by {label}'s own parser ({when})")
    if reading.status == "rejected":
        return problem(code, f"{label}'s own parser refuses the command: the server stops before it loads anything",
                       wanted="a line the release's parser accepts", found=reading.error,
                       hint="fix what the parser names ('--help' after the same command lists its options)")
    where = "run doctor with --python of the environment that runs the server"
    if reading.unsure:
        return unknown(code, f"{label}'s own parser cannot run here ({reading.error}), and the line has "
                       f"{' '.join(reading.unsure)}: an abbreviation, alias, dotted or --config form it may read "
                       "otherwise than doctor's exact spellings", found=" ".join(reading.unsure),
                       hint=f"{where}, or write each option in full")
    return hint(code, f"read by the exact spellings doctor knows: {label}'s own parser cannot run here "
                f"({reading.error}); every option doctor reads is written in full", hint=where)


def startup_findings(reading: release_parser.Reading, release: Release) -> list[Finding]:
    """What the release's own start-up configuration made of the parsed line (issue 53): vLLM's
    ``create_engine_config``, SGLang's ``ServerArgs`` post-processing. Refused (a speculative
    config without its token count, a draft TP it does not take, a key it does not know, an
    option SGLang's checks refuse together) is where the server stops, seconds after start and
    before any weight; configured says what it resolved, and on which GPU where the release asked
    one (a stand-in: a build host has none)."""
    got = reading.startup
    if got is None:
        return []
    code, label = "launch.startup", release.label()
    on = f" on {got['device']}" if got.get("device") else ""
    if got["status"] == "refused":
        return [problem(code, f"{label}'s start-up configuration refuses the command{on}: the server stops "
                        "before it loads anything", wanted="a configuration the release accepts",
                        found=got.get("error") or "",
                        hint="fix what the release names; the rest of this report assumes it is fixed")]
    if got["status"] == "unavailable":
        return [hint(code, f"{label}'s start-up configuration could not be built here ({got.get('error')}): "
                     "its own checks of the configuration were not run",
                     hint="name local model folders in the command (a Hub id is not read offline)")]
    spec = "; no speculative decoding"
    if got.get("method"):
        shape = (f", {got['steps']} step(s), top-k {got['topk']}" if got.get("steps") is not None
                 and got.get("topk") is not None else "")
        spec = f"; speculative method {got['method']}, {got.get('tokens')} token(s){shape}, draft {got.get('draft')}"
    backend = f", attention backend {got['backend']}" if got.get("backend") else ""
    return [ok(code, f"accepted by {label}'s start-up configuration{on}{spec}{backend}")]
