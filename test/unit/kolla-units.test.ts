import { describe, expect, it } from 'vitest';
import { parseShow, SystemctlUnitProbe, unitHazard } from '../../agent/host/kolla-units.js';

/**
 * When kolla-ansible's unit of a container could still stop or restart it:
 * `systemctl show` as systemd 252 prints it for a unit kolla_container
 * wrote, for the same unit retired as docs/how-to/adopt.md says, and for a
 * host without one.
 */
const UNIT = 'kolla-nova_compute-container.service';
const KOLLA = [
  'Restart=always',
  'ExecStop={ path=/usr/bin/docker ; argv[]=/usr/bin/docker stop nova_compute -t 60 ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }',
  'LoadState=loaded',
  'ActiveState=active',
  'UnitFileState=enabled',
].join('\n');
const RETIRED = ['Restart=no', 'LoadState=loaded', 'ActiveState=inactive', 'UnitFileState=disabled'].join(
  '\n',
);
const NONE = ['Restart=no', 'LoadState=not-found', 'ActiveState=inactive', 'UnitFileState='].join('\n');

describe('kolla-ansible units', () => {
  it('refuses while the unit runs or is enabled, saying what it would do', () => {
    expect(unitHazard(UNIT, parseShow(KOLLA))).toBe(
      `${UNIT} is active and enabled (its ExecStop stops the container, Restart=always): retire it first (docs/how-to/adopt.md)`,
    );
    const disabledButRunning = parseShow(KOLLA.replace('UnitFileState=enabled', 'UnitFileState=disabled'));
    expect(unitHazard(UNIT, disabledButRunning)).toMatch(/ is active \(/);
    const enabledStopped = parseShow(KOLLA.replace('ActiveState=active', 'ActiveState=inactive'));
    expect(unitHazard(UNIT, enabledStopped)).toMatch(/ is enabled \(/);
  });

  it('lets a retired unit, or none, be', () => {
    expect(unitHazard(UNIT, parseShow(RETIRED))).toBeUndefined();
    expect(unitHazard(UNIT, parseShow(NONE))).toBeUndefined();
  });

  it('finds no unit to fear on a host whose PID 1 is not systemd', async () => {
    expect(
      await new SystemctlUnitProbe(['systemctl'], '/nonexistent/run/systemd/system').supervisor(
        'nova_compute',
      ),
    ).toBeUndefined();
  });

  // A named command (--systemctl) gets the words of `systemctl show` after its own: here sh
  // stands in for nsenter, printing what systemd would, or failing as a host without it does.
  const sh = (script: string): string[] => ['sh', '-c', script, 'sh'];

  it('asks a named command even where this namespace has no /run/systemd/system', async () => {
    const probe = new SystemctlUnitProbe(
      sh(
        `test "$1 $4" = "show kolla-nova_compute-container.service" || exit 3; printf '%s' '${KOLLA.replace(/'/g, '')}'`,
      ),
      '/nonexistent/run/systemd/system',
    );
    expect(await probe.supervisor('nova_compute')).toMatch(`${UNIT} is active and enabled`);
  });

  it("refuses when the named command cannot answer, with the command's own words", async () => {
    const probe = new SystemctlUnitProbe(
      sh('echo "System has not been booted with systemd as init system (PID 1)." >&2; exit 1'),
      '/nonexistent/run/systemd/system',
    );
    expect(await probe.supervisor('nova_compute')).toBe(
      `cannot ask systemd about ${UNIT}: System has not been booted with systemd as init system (PID 1).`,
    );
  });
});
