/**
 * Dependency checks (CheckSpec.dependency): which state of each container's
 * dependency was last reported, so a down and the up after it are reported
 * once each, across the container's instances (a restart or an upgrade
 * starts its checks afresh).
 */
import type { CheckSpec } from '../model/spec.js';
import type { CheckStatus, DependencyState, DependencyStatus } from './types.js';

export class DependencyReports {
  /** container -> check -> the last reported state. */
  private readonly reported = new Map<string, Map<string, 'up' | 'down'>>();

  /**
   * A dependency check's status changed: 'down' when it turned unhealthy and
   * down was not the last report, 'up' when it turned healthy after a down;
   * otherwise nothing to report.
   */
  change(container: string, check: string, status: CheckStatus): 'up' | 'down' | undefined {
    const last = this.reported.get(container)?.get(check);
    const now = status === 'unhealthy' ? 'down' : status === 'healthy' && last === 'down' ? 'up' : undefined;
    if (now === undefined || now === last) return undefined;
    let checks = this.reported.get(container);
    if (!checks) this.reported.set(container, (checks = new Map()));
    checks.set(check, now);
    return now;
  }

  /** The state a dependency check shows: its own verdict, else the last report. */
  state(container: string, check: string, status: CheckStatus): DependencyStatus {
    if (status === 'healthy') return 'up';
    if (status === 'unhealthy') return 'down';
    return this.reported.get(container)?.get(check) ?? 'unknown';
  }

  /** The dependency checks among a container's checks, each with its state. */
  states(container: string, checks: readonly (readonly [CheckSpec, CheckStatus])[]): DependencyState[] {
    return checks.flatMap(([c, status]) =>
      c.dependency === undefined
        ? []
        : [{ check: c.name, dependency: c.dependency, status: this.state(container, c.name, status) }],
    );
  }

  /** Forgets the reports of checks the container no longer has. */
  keep(container: string, checks: ReadonlySet<string>): void {
    const m = this.reported.get(container);
    if (!m) return;
    for (const name of [...m.keys()]) if (!checks.has(name)) m.delete(name);
    if (m.size === 0) this.reported.delete(container);
  }
}
