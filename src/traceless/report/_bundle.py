"""``traceless report request-<id> --html``: a request bundle (``forget --deployment``) as one
self-contained page for the data-protection officer: the request, the verdict, the bundle's
own verification, and per instance what its receipt says (what was removed per store, the
claim levels, the bystander check, the notes). Reads the bundle only."""

from __future__ import annotations

import time
from pathlib import Path

from traceless.forget import Receipt, load_bundle, load_receipt, verify_bundle

__all__ = ["bundle_markdown"]


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _receipt_section(instance: str, r: Receipt) -> list[str]:
    out = [f"### {instance}: receipt `{r.receipt_id}`", "",
           f"Mode `{r.mode}`, the person as `{r.target.owner or r.target.ref}`, signed {_when(r.created_at)}, "
           f"verification **{'passed' if r.verification.passed else 'FAILED'}**.", "",
           "| store | removed | rewritten | left of the person | claim |", "|---|---:|---:|---:|---|"]
    claims = dict(c.split(":", 1) for c in r.verification.claims if ":" in c)
    for store, t in r.tiers.items():
        out.append(f"| {_cell(store)} | {len(t.removed)} | {len(t.rewritten)} | {t.left} | "
                   f"{_cell(claims.get(store, '-'))} |")
    checks = ", ".join(f"{k}={'yes' if v else 'NO'}" for k, v in r.verification.checks.items())
    out += ["", f"Checks: {_cell(checks)}.", ""]
    out += [f"- {_cell(n)}" for n in r.notes]
    return [*out, ""]


def bundle_markdown(path: str | Path) -> str:
    """The page's markdown: the summary, its verification under the key the bundle names, and
    every receipt it lists."""
    bundle, folder = load_bundle(path)
    res = verify_bundle(folder, public_key=bytes.fromhex(bundle.public_key))
    out = [f"# Erasure request {bundle.request_id}", "",
           f"Deployment **{_cell(bundle.deployment)}**, {len(bundle.instances)} instances, summary signed "
           f"{_when(bundle.created_at)} by key `{bundle.signer}`. Verdict: **{bundle.verdict}**.", "",
           f"Bundle check against the key it names: **{'OK' if res.ok else 'FAILED'}** (summary signature "
           f"{'verifies' if res.signature_ok else 'DOES NOT verify'}; compare the key id `{bundle.signer}` with the "
           "signer's published key, `traceless keys export`, or run `traceless forget verify FOLDER "
           "--public-key KEY`).", "",
           "| instance | system | outcome | receipt | claims | check |", "|---|---|---|---|---|---|"]
    status = {c.receipt_file: c.status for c in res.receipts}
    for e in bundle.entries:
        out.append(f"| {_cell(e.instance)} | {_cell(e.system)} | {e.outcome} | {_cell(e.receipt_file or '-')} | "
                   f"{_cell(', '.join(e.claims) or '-')} | {status.get(e.receipt_file, '-')} |")
    out += [f"| (not listed) | | | {_cell(f)} | | UNLISTED |" for f in res.unlisted]
    out += ["", "## Receipts", ""]
    for e in bundle.entries:
        f = folder / e.receipt_file
        if e.receipt_file and f.is_file():
            out += _receipt_section(e.instance, load_receipt(f))
    return "\n".join(out) + "\n"
