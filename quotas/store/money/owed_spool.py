"""Budget spend owed at exit, spooled and charged back: what a process still owes Redis when it stops.

A process that exits while Redis is away writes what its ledger still owes (:mod:`quotas.store.money.owed`) to a
signed file beside the usage spool (``*.owed`` in :func:`~quotas.store.usage_batches.spool_dir`), and the next
process whose poller finds Redis up charges it, as a spooled usage batch is replayed. Every entry is charged as
a settlement with an id (a failed settlement keeps its own; other spend is given one when spooled), so a file
replayed twice (a replayer that died half-way) charges each entry once. A file whose signature does not verify
is set aside as ``.rejected``.

What is charged from a spool reaches the budgets' spend and alert levels, but sends no alert: the windows that
would name it are not in the file (an outage through a process's exit, then a threshold crossed by exactly that
spend).
"""

from __future__ import annotations

import base64
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from django.core import signing

from quotas.exceptions import StoreUnavailable
from quotas.rules.limits import Window
from quotas.store.money.owed import Owed
from quotas.store.usage_batches import claim, spool_dir

logger = logging.getLogger(__name__)

_SALT = "quotas.owed_spool"


def spool_owed(entries: Sequence[Owed]) -> Path | None:
    """Write ``entries`` to a new signed file in the spool directory; returns its path (None: nothing to write,
    or no spool directory)."""
    if not entries:
        return None
    folder = spool_dir()
    if folder is None:
        return None
    rows = [
        {
            "tag": e.tag,
            "specs": [base64.b64encode(spec).decode() for spec in e.specs],
            # The budgets themselves, so the process that charges them sends the alerts the charge reaches.
            "windows": [_window_record(w) for w in e.windows],
            "now": e.now,
            "micros": e.micros,
            "settlement": e.settlement or uuid.uuid4().hex,  # charged once, however often the file is replayed
            "usage": e.usage,
            "own": list(e.own),
        }
        for e in entries
    ]
    path = folder / f"{os.getpid()}-{time.time_ns()}.owed"
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(signing.dumps({"owed": rows}, salt=_SALT, compress=True))
    tmp.rename(path)  # readers only ever see whole files
    logger.warning("quotas: Redis unreachable at exit; %d owed budget charges spooled to %s", len(rows), path)
    return path


def _window_record(window: Window) -> dict[str, Any]:
    """A budget's window as the spool keeps it: the fields it is made from (the rest are derived)."""
    return {f.name: getattr(window, f.name) for f in fields(Window) if f.init}


def replay_owed(charge: Callable[[Owed], object]) -> int:
    """Charge every spooled entry with ``charge`` (a settlement by id: at most once); returns the files done.
    A file whose charge meets a Redis error is left for the next try."""
    folder = spool_dir()
    if folder is None:
        return 0
    done = 0
    for path in sorted(folder.glob("*.owed")) + sorted(folder.glob("*.owed-claimed")):
        claimed = claim(path, ".owed-claimed")
        if claimed is None:
            continue
        try:
            rows = signing.loads(claimed.read_text(), salt=_SALT)["owed"]
            entries = [
                Owed(
                    tag=str(r["tag"]),
                    windows=tuple(Window(**w) for w in r.get("windows", ())),  # older files: no alerts
                    specs=tuple(base64.b64decode(s) for s in r["specs"]),
                    now=float(r["now"]),
                    micros=int(r["micros"]),
                    settlement=str(r["settlement"]),
                    usage=str(r["usage"]),
                    own=tuple(int(m) for m in r.get("own", ())),  # older files: none
                )
                for r in rows
            ]
        except (signing.BadSignature, ValueError, KeyError, TypeError):
            logger.error("quotas: owed spool file %s is not signed with this SECRET_KEY or unreadable", path)
            claimed.rename(claimed.with_name(path.stem.split(".")[0] + ".rejected"))
            continue
        try:
            for entry in entries:
                charge(entry)
        except StoreUnavailable:
            claimed.rename(folder / (claimed.name.split(".")[0] + ".owed"))  # for the next try
            return done
        claimed.unlink()
        done += 1
    return done
