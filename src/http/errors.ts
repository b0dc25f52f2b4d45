/** Every HTTP error body is `{code, message}` (plus details where useful). */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
    /** Headers of the error answer (`retry-after` for a 503 that says when to ask again). */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}
