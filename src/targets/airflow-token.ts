import { postJson } from './target.js';

/** What `POST {url}/auth/token` takes: a user's password, or (Keycloak auth manager) a client's secret. */
export type AirflowCredentials =
  | { readonly username: string; readonly password: string }
  | { readonly client_id: string; readonly client_secret: string };

/** Renew this long before expiry at most; a short-lived token renews after three quarters of its life. */
const RENEW_AHEAD_MS = 60_000;

/**
 * When a freshly received JWT should be replaced, by the local clock, or undefined when it names
 * no expiry (then it is used until Airflow answers 401). Its lifetime is read as `exp - iat`, both
 * Airflow's clock, and counted from when it arrived here, so clock skew between the hosts does not
 * shorten or stretch it; without `iat`, the clocks are trusted.
 */
export function renewalTime(jwt: string, receivedAtMs: number): number | undefined {
  const claims = jwtClaims(jwt);
  if (typeof claims?.exp !== 'number') return undefined;
  const lifetimeMs =
    typeof claims.iat === 'number' ? (claims.exp - claims.iat) * 1000 : claims.exp * 1000 - receivedAtMs;
  if (!(lifetimeMs > 0)) return receivedAtMs;
  return receivedAtMs + lifetimeMs - Math.min(RENEW_AHEAD_MS, lifetimeMs / 4);
}

function jwtClaims(jwt: string): { exp?: unknown; iat?: unknown } | undefined {
  const part = jwt.split('.')[1];
  if (part === undefined) return undefined;
  try {
    const claims: unknown = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return claims !== null && typeof claims === 'object' ? claims : undefined;
  } catch {
    return undefined;
  }
}

export type TokenResult = { readonly jwt: string } | { readonly error: string };

/**
 * One target's JWT: fetched on first use, shared by concurrent deliveries (one request in flight
 * at a time), renewed before expiry and after a 401. The token is kept in memory only.
 */
export class AirflowTokens {
  private cached: { jwt: string; renewAt: number | undefined } | undefined;
  private inflight: Promise<TokenResult> | undefined;

  constructor(
    private readonly tokenUrl: string,
    private readonly credentials: AirflowCredentials,
    private readonly timeoutMs: number,
    private readonly now: () => number,
  ) {}

  async get(): Promise<TokenResult> {
    const cached = this.cached;
    if (cached && (cached.renewAt === undefined || this.now() < cached.renewAt)) return { jwt: cached.jwt };
    this.inflight ??= this.fetch().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  /** Forgets `jwt` after Airflow refused it, unless a newer token has replaced it already. */
  invalidate(jwt: string): void {
    if (this.cached?.jwt === jwt) this.cached = undefined;
  }

  private async fetch(): Promise<TokenResult> {
    const body =
      'username' in this.credentials
        ? { username: this.credentials.username, password: this.credentials.password }
        : {
            grant_type: 'client_credentials',
            client_id: this.credentials.client_id,
            client_secret: this.credentials.client_secret,
          };
    const who =
      'username' in this.credentials
        ? `user ${this.credentials.username}`
        : `client ${this.credentials.client_id}`;
    const response = await postJson(this.tokenUrl, body, {}, this.timeoutMs);
    // Every failure is retried: wrong credentials or an auth manager without this grant are fixed
    // in the config, and the decision must still be delivered then.
    if ('error' in response) return { error: `POST ${this.tokenUrl}: ${response.error}` };
    if (response.status < 200 || response.status >= 300) {
      return {
        error: `POST ${this.tokenUrl} for ${who}: HTTP ${response.status}: ${response.text.slice(0, 300)}`,
      };
    }
    let jwt: unknown;
    try {
      jwt = (JSON.parse(response.text) as { access_token?: unknown }).access_token;
    } catch {
      jwt = undefined;
    }
    if (typeof jwt !== 'string' || jwt === '')
      return { error: `POST ${this.tokenUrl} for ${who}: the answer has no access_token` };
    this.cached = { jwt, renewAt: renewalTime(jwt, this.now()) };
    return { jwt };
  }
}

type HttpAnswer = { status: number; text: string } | { error: string };

/** Sends a request with the given auth headers (e.g. a `postJson` to Airflow). */
export type AuthorizedSend = (auth: Record<string, string>) => Promise<HttpAnswer>;

/** What an Airflow target is configured to authenticate with. */
export interface AirflowAuthConfig {
  readonly url: string;
  readonly timeout: number;
  readonly token?: string | undefined;
  readonly username?: string | undefined;
  readonly password?: string | undefined;
  readonly client_id?: string | undefined;
  readonly client_secret?: string | undefined;
}

/**
 * One target's way to send authorized requests to Airflow: a static `token` as it is, or a JWT
 * from `POST {url}/auth/token` (AirflowTokens), renewed once more when Airflow answers 401. Every
 * JWT sent is pushed to `used`, so errors can be scrubbed of it.
 */
export function airflowAuth(
  config: AirflowAuthConfig,
  now: () => number,
): (used: string[], send: AuthorizedSend) => Promise<HttpAnswer> {
  const base = config.url.replace(/\/+$/, '');
  const credentials: AirflowCredentials | undefined =
    config.username !== undefined && config.password !== undefined
      ? { username: config.username, password: config.password }
      : config.client_id !== undefined && config.client_secret !== undefined
        ? { client_id: config.client_id, client_secret: config.client_secret }
        : undefined;
  const tokens = credentials && new AirflowTokens(`${base}/auth/token`, credentials, config.timeout, now);
  return async (used, send) => {
    if (!tokens) return send(config.token ? { Authorization: `Bearer ${config.token}` } : {});
    const first = await tokens.get();
    if ('error' in first) return first;
    used.push(first.jwt);
    const response = await send({ Authorization: `Bearer ${first.jwt}` });
    if ('error' in response || response.status !== 401) return response;
    tokens.invalidate(first.jwt);
    const renewed = await tokens.get();
    if ('error' in renewed) return renewed;
    used.push(renewed.jwt);
    return send({ Authorization: `Bearer ${renewed.jwt}` });
  };
}
