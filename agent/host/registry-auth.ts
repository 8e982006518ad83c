import { readFile } from 'node:fs/promises';
import { SpcdError } from '../errors.js';
import type { RegistryAuth } from '../engine/types.js';
import { describeJsonFault, jsonFault } from '../model/json-where.js';
import { assertTrusted } from '../spec/trusted-paths.js';

/** The registry host of an image reference, as docker decides it. */
export function registryOf(ref: string): string {
  const first = ref.split('/')[0] ?? '';
  if (ref.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost'))
    return first;
  return 'docker.io';
}

/**
 * Credentials from a docker config.json ("auths": {host: {auth: base64(user:pass)}}),
 * read at each pull so a rotated file needs no restart. The file holds
 * credentials: it is read only when owned by root (or spcd) with mode 0600 or
 * stricter, in folders only root can write (docs/explanation/security.md, "Trusted paths").
 */
export function registryAuthFromFile(
  file: string | undefined,
): (image: string) => Promise<RegistryAuth | undefined> {
  return async (image) => {
    if (!file) return undefined;
    const real = await assertTrusted(file, 'registry credentials file', 'secret', { optional: true });
    if (real === undefined) return undefined;
    let text: string;
    try {
      text = await readFile(real, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new SpcdError('REGISTRY_AUTH_INVALID', `cannot read ${file}: ${(err as Error).message}`, {
        file,
      });
    }
    let doc: { auths?: Record<string, { auth?: string; username?: string; password?: string }> };
    try {
      doc = JSON.parse(text) as typeof doc;
    } catch {
      // JSON.parse's message quotes the text around the fault: credentials. Name the place only.
      const fault = jsonFault(text);
      throw new SpcdError(
        'REGISTRY_AUTH_INVALID',
        `${file} is not valid JSON${fault ? ` (${describeJsonFault(fault)})` : ''}`,
        { file, ...(fault ? { line: fault.line, column: fault.column } : {}) },
      );
    }
    const host = registryOf(image);
    const entry = doc.auths?.[host] ?? doc.auths?.[`https://${host}`] ?? doc.auths?.[`http://${host}`];
    if (!entry) return undefined;
    let username = entry.username;
    let password = entry.password;
    if (entry.auth) {
      const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0)
        throw new SpcdError(
          'REGISTRY_AUTH_INVALID',
          `${file}: auths.${host}.auth is not base64(user:password)`,
          { file },
        );
      username = decoded.slice(0, colon);
      password = decoded.slice(colon + 1);
    }
    if (!username || password === undefined) {
      throw new SpcdError('REGISTRY_AUTH_INVALID', `${file}: auths.${host} has no credentials`, { file });
    }
    return { username, password, serveraddress: host };
  };
}
