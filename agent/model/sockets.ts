/**
 * Where the read-only API socket is by default, from the admin socket's path:
 * the same file name in a sibling directory with `-ro` appended
 * (/run/spcd/spcd.sock -> /run/spcd-ro/spcd.sock). A directory of its own,
 * so each socket's directory can belong to its own group (docs/explanation/security.md).
 * spcd and spcctl derive it the same way.
 */
import { basename, dirname, join } from 'node:path';

export function defaultReadOnlySocket(adminSocket: string): string {
  return join(`${dirname(adminSocket)}-ro`, basename(adminSocket));
}
