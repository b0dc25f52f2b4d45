/**
 * Why the HTTP server could not bind, said so that whoever starts it knows what to do: Node's own
 * message (`listen EADDRINUSE: address already in use 127.0.0.1:8080`) names neither the likely
 * cause (a second daemon, a quick start run twice) nor the setting that moves it.
 */
const ANOTHER_PORT =
  'start it on another port with PORT=<port> (or http.port in its config; 0 picks a free port)';

const EXPLAINED: Record<string, string> = {
  EADDRINUSE: `the port is already in use (another coverage-rollup, or another program): ${ANOTHER_PORT}`,
  EACCES: `permission denied (ports below 1024 need privileges): ${ANOTHER_PORT}`,
  EADDRNOTAVAIL:
    'this machine has no such address: set http.host (HTTP_HOST) to one of its addresses, or 0.0.0.0 for all',
};

export function explainListenError(error: unknown, host: string, port: number): unknown {
  const explained = EXPLAINED[(error as NodeJS.ErrnoException | undefined)?.code ?? ''];
  return explained === undefined
    ? error
    : new Error(`cannot listen on ${host}:${port}: ${explained}`, { cause: error });
}
