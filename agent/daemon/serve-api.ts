import type { DaemonParts } from './daemon.js';

/** Serves the operator API on the unix socket. Wired to agent/api/ once it lands. */
export async function serveApi(_parts: DaemonParts): Promise<{ close(): Promise<void> }> {
  return { close: () => Promise.resolve() };
}
