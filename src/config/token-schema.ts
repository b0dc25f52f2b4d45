/** `tokens:`: bearer tokens with a name, scopes and the names they may write (docs/configuration.md). */
import { z } from 'zod';
import { isPattern, PATTERN_RULE, SCOPES } from '../core/access/scopes.js';

/**
 * The name is what the audit records, so it must not look like the names the daemon gives
 * itself: `local` (this machine's commands) and `api:<hash>` / `read:<hash>` (api_tokens and
 * read_tokens, named by a short hash of the token).
 */
const tokenName = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/,
    'expected 1-64 letters, digits, _ . or -, starting with a letter or digit',
  )
  .refine((name) => name !== 'local', 'local is the name of the local token; choose another');

const patterns = (what: string) =>
  z.array(z.string().refine(isPattern, `each ${what} pattern must be ${PATTERN_RULE}`));

export const scopedTokenSchema = z
  .strictObject({
    name: tokenName,
    // Never a literal: a token is a secret, and config files get shared and committed.
    token: z.strictObject(
      { env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment variable name') },
      { error: 'expected {env: NAME}: the token is read from that environment variable at start' },
    ),
    scopes: z
      .array(z.enum(SCOPES, { error: `unknown scope: expected one of ${SCOPES.join(', ')}` }))
      .min(1, `give at least one scope: ${SCOPES.join(', ')}`),
    assets: patterns('asset').default([]),
    rollups: patterns('rollup').default([]),
  })
  .superRefine((token, ctx) => {
    // A list without its scope, or a write scope without its list, is a token that does not do
    // what its author meant: refused rather than guessed at.
    const pairs = [
      ['events', 'assets'],
      ['rollups', 'rollups'],
    ] as const;
    for (const [scope, list] of pairs) {
      const has = token.scopes.includes(scope);
      if (has && token[list].length === 0)
        ctx.addIssue({
          code: 'custom',
          path: [list],
          message: `scope ${scope} needs the ${list} it may write, e.g. ["team_a.*"] (["*"] for all)`,
        });
      if (!has && token[list].length > 0)
        ctx.addIssue({
          code: 'custom',
          path: [list],
          message: `${list} limits scope ${scope}, which this token does not have: add it to scopes, or remove ${list}`,
        });
    }
  });

export type ScopedTokenConfig = z.output<typeof scopedTokenSchema>;
