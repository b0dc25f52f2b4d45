"""
Schemathesis hooks for test/real/schemathesis.real.test.ts (loaded through SCHEMATHESIS_HOOKS).

`positive_data_acceptance` says a request the document allows must not be refused. Some refusals
depend on what no JSON Schema can state: a date that does not exist (2025-02-30; the document
gives a bound's grammar as a pattern), a bound of the other domain than its asset's, a window's
order (end before start), a period before a rollup's begin, a cursor only the daemon issues, the
size of a whole event, U+0000 somewhere inside `extra`, a `wait=` longer than the daemon's
`http.max_wait`, a repair of an asset the daemon does not know or to a target its type's config
section refuses. For
the operations that have such refusals (OPERATIONS below) schemathesis.toml turns the built-in check
off and this one runs in its place: the built-in check, except that a 400 whose code (and, for
`invalid_events`, every item's reason) is one of those is accepted. Any other refusal of a request
the document allows still fails, so the document cannot drift from the server.
"""

import json

import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance

# Codes of a 400 that depend on values or state beyond the document, by operation.
WINDOW = {"invalid_bound", "out_of_range", "end_before_start"}
OPERATIONS = {
    "GET /v1/assets": {"invalid_cursor"},
    "GET /v1/assets/{asset}/coverage": WINDOW,
    "POST /v1/events": {"invalid_events"},
    "POST /v1/assets/{asset}/replay-requirements": {"invalid_events"},
    "GET /v1/rollups": {"invalid_cursor"},
    "GET /v1/rollups/{id}/periods": WINDOW | {"invalid_cursor"},
    "POST /v1/rollups/{id}/periods/{start}/trigger": {"invalid_bound", "out_of_range"},
    "GET /v1/repairs": {"invalid_cursor"},
    # An asset the daemon does not know, a target not as its type's config section says.
    "POST /v1/repairs": {"invalid_repair"},
    "GET /v1/audit": {"invalid_cursor"},
}

# Reasons an event is refused for that depend on its values together or on the index.
EVENT_REASONS = {
    "invalid_bound",  # a date that does not exist, a fraction finer than a microsecond
    "out_of_range",  # a bound past the representable range
    "mixed_domain",  # one bound a timestamp, the other an integer
    "domain_mismatch",  # the asset holds the other domain
    "end_before_start",
    "invalid_duration",  # an ISO 8601 duration's grammar
    "payload_too_large",  # the whole event's size in bytes
}


def beyond_schema(reason: str, message: str) -> bool:
    if reason in EVENT_REASONS:
        return True
    if reason == "invalid_interval":
        # Split at its slash as the document says, but a duration after a non-timestamp start.
        return message.startswith("a start/duration interval needs a timestamp start")
    if reason == "invalid_field":
        # produced_at's (or timestamp's) calendar; text in extra PostgreSQL cannot store (U+0000).
        return message.startswith(("produced_at ", "timestamp ", "extra holds text"))
    return False


@schemathesis.check
def positive_data_acceptance_beyond_schema(ctx, response, case):
    """positive_data_acceptance, with the refusals no schema can state accepted (see above)."""
    allowed = OPERATIONS.get(case.operation.label)
    if allowed is None:
        return None
    if response.status_code == 400 and case.meta is not None and case.meta.generation.mode.is_positive:
        try:
            body = json.loads(response.text)
        except ValueError:
            body = {}
        code = body.get("code")
        if code in allowed and code != "invalid_events":
            return None
        if code == "invalid_wait" and "longer than the most" in body.get("message", ""):
            return None  # http.max_wait is the daemon's setting: the document cannot state it
        if code == "invalid_events" and code in allowed:
            items = body.get("errors") or []
            if items and all(beyond_schema(i.get("reason", ""), i.get("message", "")) for i in items):
                return None
    return positive_data_acceptance(ctx, response, case)
