import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docker } from '../support/docker.js';
import { waitFor } from '../support/wait.js';
import {
  COMMON,
  ETC_KOLLA,
  inBox,
  kollaContainer,
  kollaHostStand,
  n,
  running,
  type Running,
} from '../support/kolla-host.js';

kollaHostStand(false);

/**
 * Each way kolla-ansible's unit stops a container, against the box's real
 * systemd, on a container of its own that the module makes (not adopted):
 * the reason the runbook retires the units with a drop-in first. Its
 * graceful timeout is 5 s instead of kolla-ansible's 60 (the test's time),
 * and its command exits on SIGTERM, as a service does.
 */
describe('the hazards of a kolla-ansible unit, against a real systemd', () => {
  const name = n('hazard');
  const unit = `kolla-${name}-container.service`;
  const since = async (startedAt: string, what: string, cond: (r: Running) => boolean): Promise<Running> => {
    let last: Running | undefined;
    await waitFor(
      what,
      async () => {
        last = await running(name);
        return last.startedAt !== startedAt && cond(last);
      },
      { timeoutMs: 60_000 },
    );
    return last as Running;
  };
  const stopped = async (): Promise<void> => {
    await waitFor('the container stopped', async () => !(await running(name)).running, { timeoutMs: 30_000 });
  };

  beforeAll(async () => {
    const folder = join(ETC_KOLLA, 'hazard');
    mkdirSync(folder, { recursive: true });
    writeFileSync(
      join(folder, 'serve.sh'),
      "#!/bin/sh\ntrap 'exit 0' TERM INT\nwhile :; do sleep 1 & wait $!; done\n",
    );
    writeFileSync(
      join(folder, 'config.json'),
      JSON.stringify({
        command: '/usr/local/bin/serve.sh',
        config_files: [
          {
            source: '/var/lib/kolla/config_files/serve.sh',
            dest: '/usr/local/bin/serve.sh',
            owner: 'root',
            perm: '0755',
          },
        ],
      }),
    );
    const out = await kollaContainer({
      kolla: 'hazard',
      folder: 'hazard',
      params: {
        volumes: ['/etc/localtime:/etc/localtime:ro'],
        common_options: { ...COMMON, graceful_timeout: '5' },
      },
    });
    expect(out, out).toMatch(/CHANGED/);
    await waitFor('its unit runs it', async () => (await running(name)).running, { timeoutMs: 30_000 });
  }, 120_000);

  afterAll(async () => {
    await docker()
      .getContainer(name)
      .remove({ force: true })
      .catch(() => undefined);
  });

  it('stopping the unit runs its ExecStop: docker stop stops the container', async () => {
    await inBox(`systemctl stop ${unit}`);
    expect((await running(name)).running).toBe(false);
    const before = (await running(name)).startedAt;
    await inBox(`systemctl start ${unit}`);
    await since(before, 'started again by its unit', (r) => r.running);
  });

  it('SIGTERM to the attached docker start -a is passed on: the container stops, and the unit starts it again', async () => {
    const before = (await running(name)).startedAt;
    // The unit's main process is the attached CLI, up for a moment (it forwards signals once attached).
    const main = (await inBox(`systemctl show -p MainPID --value ${unit}`)).trim();
    expect(Number(main)).toBeGreaterThan(0);
    expect(await inBox(`tr '\\0' ' ' < /proc/${main}/cmdline`)).toContain(`docker start -a ${name}`);
    await inBox('sleep 2');
    await inBox(`kill -TERM ${main}`);
    await stopped();
    // Restart=always, RestartSec=11 (kolla-ansible's 120 s / 10 retries - 1)
    await since(before, 'started again by its unit', (r) => r.running);
  });

  it('disabling and deleting the unit file, then daemon-reload, leaves the loaded unit supervising it', async () => {
    await inBox(`systemctl disable ${unit} && rm /etc/systemd/system/${unit} && systemctl daemon-reload`);
    expect((await inBox(`systemctl is-active ${unit} || true`)).trim()).toBe('active');
    await inBox(`systemctl stop ${unit}`);
    await stopped();
  });
});
