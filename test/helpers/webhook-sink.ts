import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One POST a webhook target made: its path, Idempotency-Key header, JSON body, arrival time and the status answered. */
export interface WebhookCall {
  readonly path: string;
  readonly key: string | undefined;
  readonly body: Record<string, unknown>;
  readonly at: number;
  readonly status: number;
}

export interface WebhookSink {
  readonly url: string;
  readonly calls: WebhookCall[];
  close(): Promise<void>;
}

/**
 * A webhook receiver that records every POST and answers it `answer(path, key)` (200 unless
 * told), for counting deliveries. `url` ends in /hook; any path under the port is answered.
 */
export async function startWebhookSink(
  answer: (path: string, key: string | undefined) => number = () => 200,
): Promise<WebhookSink> {
  const calls: WebhookCall[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
    });
    req.on('end', () => {
      const header = req.headers['idempotency-key'];
      const key = Array.isArray(header) ? header[0] : header;
      const path = req.url ?? '/';
      const status = answer(path, key);
      calls.push({ path, key, body: JSON.parse(text || '{}'), at: Date.now(), status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    calls,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
