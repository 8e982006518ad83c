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
      await new SystemctlUnitProbe('/nonexistent/run/systemd/system').supervisor('nova_compute'),
    ).toBeUndefined();
  });
});
