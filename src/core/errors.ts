/** Stable, machine-readable codes for input a producer or user must fix. Part of the contract. */
export const BAD_INPUT_REASONS = [
  'invalid_json',
  'payload_too_large',
  'invalid_payload',
  'missing_asset',
  'invalid_asset',
  'missing_bounds',
  'invalid_bound',
  'invalid_interval',
  'invalid_duration',
  'out_of_range',
  'mixed_domain',
  'domain_mismatch',
  'end_before_start',
  'invalid_field',
  'unknown_type',
  'too_many_periods',
] as const;

export type BadInputReason = (typeof BAD_INPUT_REASONS)[number];

/** Input that will never succeed as sent: never retried, dead-lettered or answered with 400. */
export class BadInputError extends Error {
  override readonly name = 'BadInputError';
  constructor(
    readonly reason: BadInputReason,
    message: string,
  ) {
    super(message);
  }
}
