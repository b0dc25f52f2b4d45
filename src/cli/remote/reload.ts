/** `reload` through the daemon's API: POST /v1/admin/reload, and what it changed (or why not). */
import type { LinkFinder } from '../daemon-link.js';
import { ApiError, call } from '../http-client.js';

interface Reloaded {
  readonly rollups: {
    readonly added: readonly string[];
    readonly changed: readonly string[];
    readonly removed: readonly string[];
    readonly unchanged: number;
  };
  readonly restart_required: readonly string[];
}

export async function reloadOverHttp(
  args: readonly string[],
  values: { readonly json?: boolean | undefined },
  findLink: LinkFinder,
): Promise<number> {
  if (args.length > 0) {
    process.stderr.write(
      'coverage-rollup reload: takes no arguments\nusage: coverage-rollup reload [--json] [--url URL]\n',
    );
    return 2;
  }
  const link = findLink();
  let answer: Reloaded;
  try {
    answer = (await call<Reloaded>(link, 'POST', '/v1/admin/reload')).body;
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 422) throw error;
    const errors = Array.isArray(error.body.errors) ? (error.body.errors as string[]) : [];
    if (values.json) process.stdout.write(`${JSON.stringify(error.body)}\n`);
    else
      process.stderr.write(
        `coverage-rollup reload: ${error.message}\n${errors.map((e) => `  ${e}\n`).join('')}`,
      );
    return 1;
  }
  if (values.json) {
    process.stdout.write(`${JSON.stringify(answer)}\n`);
    return 0;
  }
  const { added, changed, removed, unchanged } = answer.rollups;
  const list = (ids: readonly string[]) => (ids.length > 0 ? `: ${ids.join(', ')}` : '');
  process.stdout.write(
    `reloaded: ${added.length} added${list(added)}; ${changed.length} changed${list(changed)}; ${removed.length} removed${list(removed)}; ${unchanged} unchanged\n`,
  );
  if (answer.restart_required.length > 0)
    process.stdout.write(`changed settings that need a restart: ${answer.restart_required.join(', ')}\n`);
  return 0;
}
