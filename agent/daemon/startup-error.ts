import { SpcdError, toSpcdError } from '../errors.js';

/** A start-up error as the operator reads it on stderr: the code, and each problem at its file and line. */
export function describeStartupError(err: unknown): string {
  const e = err instanceof SpcdError ? err : toSpcdError(err);
  const problems =
    (e.details.problems as { file: string; line: number; path: string; message: string }[] | undefined) ?? [];
  if (problems.length === 0) return `${e.code}: ${e.message}`;
  return [
    `${e.code}: ${problems.length} problem(s) in the definitions:`,
    ...problems.map((p) => `  ${p.file}:${p.line}: ${p.path}: ${p.message}`),
  ].join('\n');
}
