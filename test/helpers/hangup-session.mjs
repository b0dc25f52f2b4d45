/**
 * A login shell in miniature, for the closed-terminal test: run under `script` (so its standard
 * streams are a pseudo-terminal and it leads the terminal's session), it starts the command given
 * after the result file with the same terminal, and when the terminal hangs up (the kernel sends
 * SIGHUP to the session leader) it sends SIGHUP on to the command, as bash does to its jobs. When
 * the command exits, its exit code and signal are written to the result file as JSON: the terminal
 * is gone by then, so the file is the only way to learn how it ended.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';

const [resultFile, command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: 'inherit' });
process.on('SIGHUP', () => child.kill('SIGHUP'));
child.once('exit', (code, signal) => {
  writeFileSync(resultFile, JSON.stringify({ code, signal }));
  process.exit(0);
});
