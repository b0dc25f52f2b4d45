// A webhook consumer: answers the trigger at once, runs the job, then reports its outcome to
// coverage-rollup's callback `POST /v1/runs` (docs/targets/webhook.md). Node 20+, no dependencies.
//   API_TOKEN=... node examples/webhook_consumer.mjs
//   env: PORT (default 8090), HOST (default 127.0.0.1, this machine only), COVERAGE_ROLLUP_URL
//   (default: the daemon recorded in ./.coverage-rollup/daemon.json or COVERAGE_ROLLUP_DATA_DIR,
//   read at each report, else http://127.0.0.1:8080), API_TOKEN (a write token of the daemon),
//   JOB_VERSION (reported as the output's version), WORK_MS (simulated work, default 1000),
//   FAIL_ATTEMPTS (attempts up to this number fail, to watch a retry)
// and the rollup's run: {outcome: callback} and
//   target: {type: webhook, url: http://127.0.0.1:8090/run}
//
// The trigger is answered 202 before the work starts: a webhook that held the request for the
// length of the job would hit the delivery timeout and be delivered again. The run's outcome comes
// later, by callback, with the attempt the trigger carried; the rollup waits for it because of
// run.outcome: callback (without it, the 202 itself is the run's success and the callbacks are
// only recorded). A redelivered trigger (same Idempotency-Key) starts nothing new. Callbacks are
// idempotent, so they are retried freely.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';

const PORT = Number(process.env.PORT || 8090);
const HOST = process.env.HOST || '127.0.0.1';
const RECORD = join(process.env.COVERAGE_ROLLUP_DATA_DIR || '.coverage-rollup', 'daemon.json');

/** Where to report: COVERAGE_ROLLUP_URL, else the daemon recorded beside us (it may start after us). */
function base() {
  let url = process.env.COVERAGE_ROLLUP_URL;
  if (!url) {
    try {
      url = JSON.parse(readFileSync(RECORD, 'utf8')).url;
    } catch {
      url = 'http://127.0.0.1:8080';
    }
  }
  return url.replace(/\/$/, '');
}
const TOKEN = process.env.API_TOKEN;
const VERSION = process.env.JOB_VERSION;
const WORK_MS = Number(process.env.WORK_MS ?? 1000);
const FAIL_ATTEMPTS = Number(process.env.FAIL_ATTEMPTS ?? 0);
if (!TOKEN) {
  console.error('set API_TOKEN to one of the daemon api_tokens: the callback is a write');
  process.exit(2);
}

/** Runs taken, by idempotency key and attempt (a real consumer keeps this in its own database). */
const taken = new Set();
/** Runs in progress, so a shutdown waits for their outcome to be reported. */
const inFlight = new Set();

/** The work for one period: replace this with the real job. Throw to fail the run. */
async function runPeriod(payload) {
  await new Promise((resolve) => setTimeout(resolve, WORK_MS));
  const attempt = payload.attempt ?? 1;
  if (attempt <= FAIL_ATTEMPTS) throw new Error(`simulated failure of attempt ${attempt}`);
  // ... read the upstreams for [period.start, period.end), overwrite the output ...
}

/** POST /v1/runs, retried with backoff on network errors, 429 and 5xx; other answers are final. */
async function report(payload, state, error) {
  const body = { idempotency_key: payload.idempotency_key, attempt: payload.attempt ?? 1, state };
  if (error !== undefined) body.error = error;
  if (state === 'succeeded' && VERSION) body.version = VERSION;
  for (let attempt = 1; ; attempt++) {
    let status;
    let text;
    try {
      const response = await fetch(`${base()}/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
      status = response.status;
      text = await response.text();
    } catch (e) {
      text = e.message;
    }
    if (status !== undefined && status < 300) {
      console.log(`${body.idempotency_key} attempt ${body.attempt}: reported ${state}`);
      return;
    }
    const retried = status === undefined || status === 429 || status >= 500;
    if (!retried || attempt >= 8) {
      console.error(
        `${body.idempotency_key}: report of ${state} refused (${status ?? 'no answer'}): ${text}`,
      );
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(30_000, 250 * 2 ** attempt)));
  }
}

async function run(payload) {
  await report(payload, 'running');
  try {
    await runPeriod(payload);
    await report(payload, 'succeeded');
  } catch (error) {
    await report(payload, 'failed', String(error?.message ?? error).slice(0, 1000));
  }
}

const server = createServer((req, res) => {
  let text = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => {
    text += chunk;
  });
  req.on('end', () => {
    let payload;
    try {
      payload = JSON.parse(text);
    } catch {
      payload = undefined;
    }
    if (req.method !== 'POST' || typeof payload?.idempotency_key !== 'string') {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"not a trigger"}');
      return;
    }
    const key = payload.idempotency_key;
    const attempt = payload.attempt ?? 1;
    if (!taken.has(`${key}|${attempt}`)) {
      taken.add(`${key}|${attempt}`);
      console.log(`${key}: ${payload.rollup} ${payload.period?.key} attempt ${attempt} (${payload.reason})`);
      const running = run(payload).catch((error) => console.error(`${key}: ${error.message}`));
      inFlight.add(running);
      running.finally(() => inFlight.delete(running));
    }
    res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ accepted: key }));
  });
});
server.on('error', (error) => {
  console.error(
    error.code === 'EADDRINUSE'
      ? `webhook consumer: port ${PORT} is already in use: start it with PORT=<port>, and point the rollup's target url there`
      : `webhook consumer: ${error.message}`,
  );
  process.exit(2);
});
const reportsTo = process.env.COVERAGE_ROLLUP_URL
  ? `${base()}/v1/runs`
  : `the daemon recorded in ${RECORD} (else http://127.0.0.1:8080)`;
server.listen(PORT, HOST, () =>
  console.log(`webhook consumer listening on ${HOST}:${PORT}, reporting to ${reportsTo}`),
);

/** Stops taking triggers (the daemon redelivers what it cannot hand over) and reports what is running. */
async function shutdown() {
  server.close();
  await Promise.all(inFlight);
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
