/**
 * Preloaded (`node --import`) into the processes of the embedded-default test: a connection to the
 * default PostgreSQL (5432) or Redis (6379) port goes to a closed port instead, and is reported on
 * stderr. A daemon that works under it needs neither service, whatever runs locally.
 */
import net from 'node:net';

const DEFAULT_PORTS = new Set([5432, 6379]);
const CLOSED = 1;
const connect = net.Socket.prototype.connect;

net.Socket.prototype.connect = function (...args) {
  // net.connect passes [options, callback] as one array; socket.connect(options | port, ...) too.
  const holder = Array.isArray(args[0]) ? args[0] : args;
  const first = holder[0];
  const port = first !== null && typeof first === 'object' ? Number(first.port) : Number(first);
  if (DEFAULT_PORTS.has(port)) {
    process.stderr.write(`closed-default-ports: refused a connection to port ${port}\n`);
    holder[0] = typeof first === 'object' ? { ...first, port: CLOSED } : CLOSED;
  }
  return connect.apply(this, args);
};
