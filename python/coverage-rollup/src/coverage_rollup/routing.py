"""Where an asset's events go: the daemon's queue-group rule and its queue names, in Python.

The daemon spreads the events queue over ``queue.groups`` queues; an asset always travels through
group ``fnv1a32(name) % groups`` (its name trimmed as JavaScript's ``String.prototype.trim``
trims), under the BullMQ prefix ``{<prefix>-<group>}`` when there is more than one group. On the
PostgreSQL queue backend a prefix names the schema its queues live in.
"""

from __future__ import annotations

import re

# JavaScript's WhiteSpace and LineTerminator code points (what String.prototype.trim removes).
# Python's str.strip() differs: it removes \x1c-\x1f and keeps \ufeff.
_JS_SPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def fnv1a32(text: str) -> int:
    """FNV-1a, 32 bits, over the UTF-8 bytes of ``text``."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def group_of(asset: str, groups: int) -> int:
    """The queue group ``asset`` travels through (0 with one group)."""
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"groups must be a positive integer, got {groups!r}")
    return fnv1a32(asset.strip(_JS_SPACE)) % groups


def group_prefix(prefix: str, groups: int, index: int) -> str:
    """The BullMQ prefix of group ``index``: ``prefix`` itself with one group."""
    return prefix if groups == 1 else f"{{{prefix}-{index}}}"


def queue_schema(prefix: str) -> str:
    """The PostgreSQL schema a prefix names on BullMQ's PostgreSQL backend.

    A prefix that is a plain identifier is the schema itself (``bull``); any other is spelled as
    one: each other character becomes ``_`` (and a leading digit gets one before it), cut to 54
    characters, then ``_`` and 8 hex digits of its fnv1a32 keep prefixes that spell alike apart.
    """
    if _IDENTIFIER.fullmatch(prefix):
        return prefix
    # JavaScript replaces UTF-16 code units: a character beyond U+FFFF becomes two underscores.
    spelled = re.sub(r"[^A-Za-z0-9_]", lambda m: "__" if ord(m.group()) > 0xFFFF else "_", prefix)
    if spelled[:1].isdigit():
        spelled = "_" + spelled
    return f"{spelled[:54]}_{fnv1a32(prefix):08x}"
