/**
 * Failpoints for crash tests: when SPCD_FAILPOINT names a point, spcd kills
 * itself with SIGKILL the moment it reaches it (after the journal write that
 * precedes the step). Off in production: the variable is unset.
 */
export type Failpoint = (point: string) => void;

export function envFailpoint(env: NodeJS.ProcessEnv = process.env): Failpoint {
  const wanted = env.SPCD_FAILPOINT;
  if (!wanted) return () => undefined;
  return (point) => {
    if (point === wanted) process.kill(process.pid, 'SIGKILL');
  };
}

export const noFailpoint: Failpoint = () => undefined;

/** Every failpoint name, in transaction order (documented in docs/explanation/upgrade-transaction.md). */
export const FAILPOINTS = [
  'upgrade.after-pull',
  'upgrade.after-allocate',
  'upgrade.after-create',
  'upgrade.after-rename',
  'upgrade.after-stop-old',
  'upgrade.after-start-new',
  'upgrade.after-gate',
  'upgrade.after-commit',
] as const;

/** The adoption's failpoints: just before its one state write, and just after it (docs/how-to/adopt.md). */
export const ADOPT_FAILPOINTS = ['adopt.before-record', 'adopt.after-record'] as const;
