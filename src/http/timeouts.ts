/** How long a client may take (docs/http-api.md "Timeouts"); both answer 408 and close. */

/** From connecting to the end of the request line and headers, also when not a byte comes. */
export const HEADERS_TIMEOUT_MS = 10_000;
/** From connecting to the end of the whole request, body included. */
export const REQUEST_TIMEOUT_MS = 120_000;
/** How often Node looks for connections past those limits: the lateness of a close. */
export const TIMEOUT_CHECK_MS = 1_000;
