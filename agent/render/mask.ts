/** The text that replaces every secret value in diffs and error messages. */
export const MASK = '******';

/** Secret values, longest first, so a secret that contains another is masked whole. */
export function orderedSecrets(secretValues: Iterable<string>): string[] {
  return [...new Set(secretValues)].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
}

/** Replace every occurrence of every secret value in `text` by MASK. */
export function maskSecrets(text: string, secretValues: Iterable<string>): string {
  let out = text;
  for (const s of orderedSecrets(secretValues)) out = out.split(s).join(MASK);
  return out;
}
