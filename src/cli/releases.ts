/**
 * What a one-shot command must undo when it ends, whatever it imported: an embedded server it
 * started for itself (never the daemon's). Its own module so `main` can run these without loading
 * the modules that register them.
 */
const releases: Array<() => Promise<void>> = [];

export function onRelease(release: () => Promise<void>): void {
  releases.push(release);
}

/** Runs every registered release, once, in order (main calls it when the command ends). */
export async function releaseAll(): Promise<void> {
  for (const release of releases.splice(0)) await release();
}
