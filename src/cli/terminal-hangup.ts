import { closeSync } from 'node:fs';
import { isatty } from 'node:tty';

/**
 * At exit Node restores the terminal modes of its standard streams (tcsetattr) and aborts (SIGABRT,
 * "Assertion failed ... ResetStdio") when that fails, as it does on a terminal that hung up: a
 * closed SSH session or terminal window, which is also what sends SIGHUP. Node skips a stream whose
 * descriptor is closed, so the ones that were a terminal at start and are no longer one at exit
 * (hung up) are closed in the last exit handler: the daemon exits with its own code, not SIGABRT.
 * (Fixed in Node itself by nodejs/node#58200, not in every release line the daemon supports.)
 */
export function closeHungUpTerminalAtExit(): void {
  const terminals = [0, 1, 2].filter((fd) => isatty(fd));
  if (terminals.length === 0) return;
  process.once('exit', () => {
    for (const fd of terminals) {
      if (isatty(fd)) continue;
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
    }
  });
}
