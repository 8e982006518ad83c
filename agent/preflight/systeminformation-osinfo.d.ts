/**
 * systeminformation's osinfo part on its own: preflight needs only osInfo(),
 * and the package's index loads every part (cpu, graphics, wifi, docker...),
 * about 6 MB of the daemon's memory for nothing (docs/decisions/0006).
 */
declare module 'systeminformation/lib/osinfo.js' {
  import type { Systeminformation } from 'systeminformation';
  export function osInfo(): Promise<Systeminformation.OsData>;
}
