import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ContainerStatus, PlanView, SetStatus, StatusDocument } from '../../agent/api/types.js';
import { runSpcctl } from '../support/cli-run.js';
import { SpcdProcess, writeSet } from '../support/daemon.js';
import { ENGINE_CLI } from '../support/docker.js';
import { waitFor } from '../support/wait.js';
import {
  DOCKER,
  SET,
  SERVICES,
  box,
  inBox,
  kollaHostStand,
  n,
  run,
  running,
  sb,
  type Running,
} from '../support/kolla-host.js';

/**
 * spcd scans the containers kolla-ansible made (test/support/kolla-host.ts),
 * the operator's set is the scan, the plan says adopt for each and nothing
 * else, and each is adopted on the operator's word: the same container id,
 * the same State.StartedAt, no restart, also after a SIGKILL of spcd and a
 * new spcd.
 */
kollaHostStand(true);

/** spcd asks the box's systemd (the kolla-ansible host's PID 1) as it would ask its own host's. */
const SYSTEMCTL_ENV = { SPCD_SYSTEMCTL: `${DOCKER} exec ${box} systemctl` };

let spcd: SpcdProcess | undefined;
afterAll(() => spcd?.stop(), 120_000);

function allContainers(sets: readonly SetStatus[]): ContainerStatus[] {
  return sets.flatMap((s) => [...s.containers, ...allContainers(s.sets)]);
}

/** The status once a listing after the adoptions shows every container (the next pass lists them). */
async function statusOnceListed(): Promise<Map<string, ContainerStatus>> {
  let containers = new Map<string, ContainerStatus>();
  await waitFor(
    'a listing shows the adopted containers',
    async () => {
      const status = JSON.parse((await cli('status', '-o', 'json')).out) as StatusDocument;
      containers = new Map(allContainers(status.sets).map((c) => [c.name, c]));
      return SERVICES.every((s) => containers.get(n(s.kolla))?.containerId);
    },
    { timeoutMs: 15_000 },
  );
  return containers;
}

const cli = async (...args: string[]): Promise<{ code: number; out: string; err: string }> =>
  runSpcctl(['--socket', sb.socket, ...args], {});

describe('a host kolla-ansible built, adopted by spcd with no restart', () => {
  const before = new Map<string, Running>();

  it("has kolla-ansible's containers running, each under its systemd unit", async () => {
    for (const s of SERVICES) {
      const r = await running(n(s.kolla));
      expect(r.running).toBe(true);
      before.set(s.kolla, r);
      expect((await inBox(`systemctl is-active kolla-${n(s.kolla)}-container.service || true`)).trim()).toBe(
        'active',
      );
    }
  });

  it('scans them into a set whose plan says adopt for each, and nothing else', async () => {
    writeSet(sb, 'empty.yaml', 'set: empty\ncontainers: {}\n');
    spcd = SpcdProcess.start(sb, [], SYSTEMCTL_ENV);
    await spcd.ready(60_000);
    const only = SERVICES.map((s) => n(s.kolla)).join(',');
    const scan = await cli('adopt', 'scan', SET, '--only', only);
    expect(scan.code, scan.err).toBe(0);
    for (const s of SERVICES) expect(scan.out).toContain(`${n(s.kolla)}:`);
    writeFileSync(join(sb.setsDir, 'kolla.yaml'), scan.out);
    const plan = await cli('plan', '-o', 'json');
    const view = JSON.parse(plan.out) as PlanView;
    expect(
      view.items.map((i) => [i.container, i.action, i.reason.startsWith('blocked')]),
      plan.out + scan.out,
    ).toEqual(expect.arrayContaining(SERVICES.map((s) => [n(s.kolla), 'adopt', false])));
    expect(view.items.filter((i) => i.action !== 'adopt')).toEqual([]);
    const reload = await cli('reload', '--wait');
    expect(reload.code, reload.err + reload.out).toBe(0);
  });

  it("refuses to adopt while kolla-ansible's unit could stop or restart the container, naming the unit", async () => {
    for (const s of SERVICES) {
      const r = await cli('adopt', 'apply', n(s.kolla), '--wait');
      expect(r.code, r.out).not.toBe(0);
      expect(r.err).toContain('ADOPT_BLOCKED');
      expect(r.err).toMatch(
        new RegExp(
          `kolla-${n(s.kolla)}-container\\.service is active and enabled \\(its ExecStop stops the container, Restart=[a-z-]+\\)`,
        ),
      );
      expect(await running(n(s.kolla))).toEqual(before.get(s.kolla));
    }
  });

  it("retires kolla-ansible's units with no container stopped: a drop-in first, then disable --now", async () => {
    for (const s of SERVICES) {
      const unit = `kolla-${n(s.kolla)}-container.service`;
      // Without the drop-in, stopping the unit runs its ExecStop (docker stop): the drop-in empties it,
      // kills the attached CLI with SIGKILL (which it cannot forward) and ends Restart=always.
      await inBox(
        [
          `mkdir -p /etc/systemd/system/${unit}.d`,
          `printf '[Service]\\nExecStop=\\nKillSignal=SIGKILL\\nRestart=no\\n' > /etc/systemd/system/${unit}.d/retire.conf`,
          'systemctl daemon-reload',
          `systemctl disable --now ${unit}`,
          // the SIGKILL leaves the unit failed (result: signal); Restart=no keeps it down
          `systemctl reset-failed ${unit}`,
        ].join(' && '),
      );
      expect((await inBox(`systemctl is-active ${unit} || true`)).trim()).toBe('inactive');
      expect((await inBox(`systemctl is-enabled ${unit} || true`)).trim()).toBe('disabled');
      expect((await inBox(`systemctl show -p ExecStop --value ${unit}`)).trim()).toBe('');
    }
    // A reboot of the host: systemd shuts down and boots again; nothing starts or stops the old way.
    await run(DOCKER, ['restart', box], { timeout: 120_000 });
    await waitFor(
      'systemd up again',
      async () => /running|degraded/.test(await inBox('systemctl is-system-running || true')),
      {
        timeoutMs: 60_000,
      },
    );
    for (const s of SERVICES)
      expect((await inBox(`systemctl is-active kolla-${n(s.kolla)}-container.service || true`)).trim()).toBe(
        'inactive',
      );
    // Each container runs on as it was, with no supervisor until spcd adopts it.
    for (const s of SERVICES) expect(await running(n(s.kolla))).toEqual(before.get(s.kolla));
  });

  it("adopts each on the operator's word: generation 1, the same id and StartedAt", async () => {
    for (const s of SERVICES) {
      const r = await cli('adopt', 'apply', n(s.kolla), '--wait');
      expect(r.code, r.err + r.out).toBe(0);
    }
    const containers = await statusOnceListed();
    for (const s of SERVICES) {
      const now = await running(n(s.kolla));
      expect(now).toEqual(before.get(s.kolla));
      expect(containers.get(n(s.kolla))).toMatchObject({
        generation: 1,
        containerId: now.id,
        state: 'running',
      });
    }
  });

  it('keeps them after a SIGKILL of spcd and a new spcd, still without a restart', async () => {
    await spcd?.kill9();
    spcd = SpcdProcess.start(sb, [], SYSTEMCTL_ENV);
    await spcd.ready(60_000);
    await waitFor(
      'the new spcd lists them',
      async () => {
        const plan = JSON.parse((await cli('plan', '-o', 'json')).out) as PlanView;
        return plan.items.length === 0 && plan.problems.length === 0;
      },
      { timeoutMs: 30_000 },
    );
    const containers = await statusOnceListed();
    for (const s of SERVICES) {
      const now = await running(n(s.kolla));
      expect(now).toEqual(before.get(s.kolla));
      expect(containers.get(n(s.kolla))).toMatchObject({ generation: 1, containerId: now.id });
    }
  });

  it('heals an adopted container that exits: the same container started again, no recreate', async () => {
    const name = n(SERVICES[0]!.kolla);
    const was = await running(name);
    await run(ENGINE_CLI, ['kill', name]);
    const back = await waitFor(
      `${name} started again by spcd`,
      async () => {
        const now = await running(name);
        return now.running && now.startedAt !== was.startedAt && now;
      },
      { timeoutMs: 60_000 },
    );
    expect(back.id).toBe(was.id);
    // spcd's view follows at its next listing of the engine
    await waitFor(
      `spcd to show ${name} running again`,
      async () => (await statusOnceListed()).get(name)?.state === 'running',
      { timeoutMs: 30_000 },
    );
    expect((await statusOnceListed()).get(name)).toMatchObject({ generation: 1, containerId: was.id });
  });
});
