"""What a path and a hash read from an engine's RECORD (or our own files) may look like: input,
checked before it is joined to a site-packages folder or compared."""

from __future__ import annotations

import re

HASH_SHAPE = re.compile(r"sha256=[A-Za-z0-9_-]{43}")


def plain_rel(rel: str) -> bool:
    """A relative POSIX path with no empty, ``.`` or ``..`` part and no NUL: it cannot climb out."""
    parts = rel.split("/")
    return bool(rel) and "\0" not in rel and not rel.startswith("/") \
        and all(part not in ("", ".", "..") for part in parts)
