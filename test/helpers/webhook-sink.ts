import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One POST a webhook target made: its Idempotency-Key header, JSON body and arrival time. */
export interface WebhookCall {
  readonly key: string | undefined;
  readonly body: Record<string, unknown>;
  readonly at: number;
}

export interface WebhookSink {
  readonly url: string;
  readonly calls: WebhookCall[];
  close(): Promise<void>;
}

/** A webhook receiver that answers 200 to every POST and records it, for counting deliveries. */
export async function startWebhookSink(): Promise<WebhookSink> {
  const calls: WebhookCall[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
    });
    req.on('end', () => {
      const key = req.headers['idempotency-key'];
      calls.push({ key: Array.isArray(key) ? key[0] : key, body: JSON.parse(text || '{}'), at: Date.now() });
      res.writeHead(200).end();
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
