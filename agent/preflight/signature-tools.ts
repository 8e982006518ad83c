/**
 * The tools an image policy that requires signatures needs on the host
 * (agent/host/image-signature.ts): skopeo and GnuPG. Without them every
 * create of such an image is refused (IMAGE_REFUSED, "not installed"); this
 * says so before the first one.
 */
import { access, constants } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import type { PreflightCheck } from './types.js';

/** The commands the signature verifier runs. */
export const SIGNATURE_TOOLS = ['skopeo', 'gpg'] as const;

/** Whether `bin` is an executable file in a folder of PATH. */
export async function onPath(bin: string, path = process.env.PATH ?? ''): Promise<boolean> {
  for (const dir of path.split(delimiter).filter((d) => d !== '')) {
    try {
      await access(join(dir, bin), constants.X_OK);
      return true;
    } catch {
      // not in this folder
    }
  }
  return false;
}

/** `signed`: the policy's prefixes whose images must be signed (none: nothing to check). */
export async function checkSignatureTools(
  signed: readonly string[],
  found: (bin: string) => Promise<boolean> = (b) => onPath(b),
): Promise<PreflightCheck> {
  const name = 'image-signature-tools';
  if (signed.length === 0)
    return { name, ok: true, severity: 'warn', detail: 'no image policy entry requires a signature' };
  const missing: string[] = [];
  for (const bin of SIGNATURE_TOOLS) if (!(await found(bin))) missing.push(bin);
  if (missing.length === 0)
    return { name, ok: true, severity: 'warn', detail: `${SIGNATURE_TOOLS.join(' and ')} found` };
  return {
    name,
    ok: false,
    severity: 'warn',
    detail:
      `the image policy requires signatures under ${signed.join(', ')} but ${missing.join(' and ')} ` +
      `${missing.length > 1 ? 'are' : 'is'} not on PATH: every create of such an image will be refused; ` +
      "install Debian's skopeo and gnupg",
  };
}
