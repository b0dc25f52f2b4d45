/** Free TCP ports on 127.0.0.1 for the embedded PostgreSQL: its own first, then the next ones. */
import { createServer } from 'node:net';

const PORT_TRIES = 20;

/** The first free port from `from` on, else one the system picks. */
export async function freePort(from: number): Promise<number> {
  for (let port = from; port < from + PORT_TRIES; port++) if (await portFree(port)) return port;
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}
