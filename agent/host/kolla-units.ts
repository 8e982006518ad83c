import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { UnitProbe } from '../executor/ports.js';

/** How long `systemctl show` may take. */
const SHOW_DEADLINE_MS = 10_000;

/** The unit kolla-ansible (2023.1 and later) runs a container under. */
export const kollaUnit = (name: string): string => `kolla-${name}-container.service`;

/** What `systemctl show -p LoadState,ActiveState,UnitFileState,ExecStop,Restart` says of a unit. */
export interface UnitFacts {
  readonly loadState: string;
  readonly activeState: string;
  readonly unitFileState: string;
  /** Its ExecStop runs a command (kolla-ansible's: docker stop). */
  readonly stops: boolean;
  readonly restart: string;
}

/** Pure: `systemctl show` output (KEY=value lines) as UnitFacts. */
export function parseShow(text: string): UnitFacts {
  const v = new Map<string, string>();
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) v.set(line.slice(0, i), line.slice(i + 1).trim());
  }
  return {
    loadState: v.get('LoadState') ?? '',
    activeState: v.get('ActiveState') ?? '',
    unitFileState: v.get('UnitFileState') ?? '',
    stops: (v.get('ExecStop') ?? '') !== '',
    restart: v.get('Restart') ?? '',
  };
}

/**
 * Pure: why the unit could still stop or restart its container, or
 * undefined. Active, it supervises now (its ExecStop and Restart act);
 * enabled, it starts and supervises again at the next boot. A retired unit
 * (docs/how-to/adopt.md) is inactive and disabled.
 */
export function unitHazard(unit: string, f: UnitFacts): string | undefined {
  if (f.loadState !== 'loaded') return undefined;
  const active = ['active', 'activating', 'reloading', 'deactivating'].includes(f.activeState);
  const enabled = f.unitFileState.startsWith('enabled');
  if (!active && !enabled) return undefined;
  const what = [active ? `${f.activeState}` : '', enabled ? f.unitFileState : '']
    .filter((w) => w)
    .join(' and ');
  const acts = [
    f.stops ? 'its ExecStop stops the container' : '',
    f.restart !== 'no' ? `Restart=${f.restart}` : '',
  ]
    .filter((w) => w)
    .join(', ');
  return `${unit} is ${what}${acts ? ` (${acts})` : ''}: retire it first (docs/how-to/adopt.md)`;
}

/** The default command: this host's own systemctl. */
const SYSTEMCTL = ['systemctl'] as const;

/**
 * Asks the host's systemd about kolla-ansible's unit of a container, with
 * `command` (--systemctl: the words before `show`). With the default, a
 * host whose PID 1 is not systemd (no /run/systemd/system) has no such unit
 * to fear. A command the operator named (spcd in a pod reaching the host's
 * systemd through nsenter) is always asked: when it cannot answer, the
 * adoption is refused rather than assumed safe.
 */
export class SystemctlUnitProbe implements UnitProbe {
  constructor(
    private readonly command: readonly string[] = SYSTEMCTL,
    private readonly systemdDir = '/run/systemd/system',
  ) {}

  async supervisor(name: string): Promise<string | undefined> {
    const own = this.command.length === 1 && this.command[0] === SYSTEMCTL[0];
    if (own && !existsSync(this.systemdDir)) return undefined;
    const unit = kollaUnit(name);
    const [file, ...words] = this.command as [string, ...string[]];
    const text = await new Promise<string>((resolve, reject) => {
      execFile(
        file,
        [...words, 'show', '-p', 'LoadState,ActiveState,UnitFileState,ExecStop,Restart', unit],
        { timeout: SHOW_DEADLINE_MS, encoding: 'utf8' },
        (err, stdout, stderr) => (err ? reject(new Error(stderr.trim() || err.message)) : resolve(stdout)),
      );
    }).catch((err: unknown) => `error=${err instanceof Error ? err.message : String(err)}`);
    if (text.startsWith('error=')) return `cannot ask systemd about ${unit}: ${text.slice(6)}`;
    return unitHazard(unit, parseShow(text));
  }
}
