/** Pure status arithmetic for a container's checks. */
import type { CheckStatus, ContainerHealthStatus } from './types.js';

/**
 * A container is unhealthy if any check is; healthy if every check is;
 * unknown without checks; otherwise starting.
 */
export function aggregateStatus(checks: readonly CheckStatus[]): ContainerHealthStatus {
  if (checks.length === 0) return 'unknown';
  if (checks.includes('unhealthy')) return 'unhealthy';
  if (checks.every((s) => s === 'healthy')) return 'healthy';
  return 'starting';
}
