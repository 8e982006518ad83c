/** spcctl's exit codes (docs/reference/api.md lists them). */
export const EXIT = {
  OK: 0,
  /** The operation ran and failed, or validation found problems, or the daemon answered 5xx. */
  FAILED: 1,
  /** Bad command line, or the daemon refused the request as malformed (400, 405, 413, 422). */
  USAGE: 2,
  /** The daemon cannot be reached: no socket, permission denied (or 403 on the read-only socket), nobody listening. */
  UNREACHABLE: 3,
  /** No such container, set, generation or route (404). */
  NOT_FOUND: 4,
  /** Conflict: another operation has it locked, or --expect-generation did not match (409). */
  CONFLICT: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

export function exitForStatus(status: number): ExitCode {
  if (status === 404) return EXIT.NOT_FOUND;
  if (status === 409) return EXIT.CONFLICT;
  if (status === 403) return EXIT.UNREACHABLE;
  if (status === 400 || status === 405 || status === 413 || status === 422) return EXIT.USAGE;
  return EXIT.FAILED;
}
