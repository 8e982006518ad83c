import { execFile, execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/daemon.js';
import { cleanupInstance, containersOf, inspect, type Inspected } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * The Debian package on a clean root (issue 28, part 4): Debian bookworm with
 * systemd as PID 1 in a container (scripts/systemd-image/build-image.sh, as
 * test/security/unit-hardening.test.ts), the host's Docker engine through its
 * socket, nothing of the checkout inside. `dpkg -i` the package: spcd is
 * enabled and started by the package itself; a set of spcd-demo/service
 * containers runs; an upgrade of one of them is started and the package is
 * upgraded to a newer build while it is in flight: spcd is restarted by the
 * package, the upgrade finishes, and no managed container restarts; `dpkg -r`
 * stops spcd and leaves the containers running; `dpkg -P` removes spcd's
 * state and config, the containers still run.
 *
 * The two packages come from the environment (test/e2e/run-install-e2e.sh
 * builds them): SPCD_INSTALL_DEB (installed first) and SPCD_INSTALL_DEB_NEXT
 * (the same version with a suffix). The result line goes to
 * SPCD_INSTALL_RESULT when set.
 */
const OLD = process.env.SPCD_INSTALL_DEB;
const NEXT = process.env.SPCD_INSTALL_DEB_NEXT;
const run = promisify(execFile);
const DOCKER = '/usr/bin/docker';
const IMAGE = 'spcd-e2e/systemd:bookworm';
const id = `${process.pid}-${Math.floor(Math.random() * 1e6)}`;
const instance = `t-install-${id}`;
const box = `spcd-install-${id}`;
const a = `${instance}-a`;
const b = `${instance}-b`;
const result: Record<string, string | number> = {};

const inBox = async (script: string, timeout = 180_000): Promise<string> =>
  (await run(DOCKER, ['exec', box, 'sh', '-c', script], { encoding: 'utf8', timeout })).stdout;
const spcctl = (args: string): Promise<string> => inBox(`spcctl ${args}`);

const SET = `set: install
description: spcd-demo/service stand-ins, named for this test's spcd instance
containers:
  ${a}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 2s
  ${b}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 2s
    healthchecks:
      - name: daemon
        exec: [demo-check]
        interval: 4s
        timeout: 2s
`;

type Seen = Pick<Inspected, 'Id'> & { startedAt: string; image: string; running: boolean };
async function snapshot(): Promise<Map<string, Seen>> {
  const out = new Map<string, Seen>();
  for (const name of [a, b]) {
    const c = await inspect(name);
    if (c)
      out.set(name, {
        Id: c.Id,
        startedAt: c.State.StartedAt,
        image: c.Config.Image,
        running: c.State.Running,
      });
  }
  return out;
}

describe.skipIf(!OLD || !NEXT)('the Debian package under systemd (install, upgrade, remove, purge)', () => {
  beforeAll(async () => {
    execFileSync('bash', [join(REPO, 'scripts/systemd-image/build-image.sh')], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    execFileSync(DOCKER, [
      'run',
      '-d',
      '--name',
      box,
      '--cap-add',
      'ALL',
      '--cap-drop',
      'SYS_RESOURCE', // this VM's bounding set lacks it (test-environment.md)
      '--security-opt',
      'seccomp=unconfined',
      '--security-opt',
      'apparmor=unconfined',
      '--tmpfs',
      '/run',
      '--tmpfs',
      '/run/lock',
      '--cgroupns=host',
      '-v',
      '/sys/fs/cgroup:/sys/fs/cgroup:rw',
      '-v',
      '/var/run/docker.sock:/var/run/docker.sock',
      '-v',
      `${dirname(OLD!)}:/debs/old:ro`,
      '-v',
      `${dirname(NEXT!)}:/debs/next:ro`,
      IMAGE,
    ]);
    await waitFor(
      'systemd up',
      async () => /running|degraded/.test(await inBox('systemctl is-system-running || true')),
      {
        timeoutMs: 60_000,
      },
    );
    // The one local change, made before the package starts spcd: a name of its
    // own for this test's containers (an operator's drop-in, kept by dpkg).
    await inBox(
      `mkdir -p /etc/systemd/system/spcd.service.d && printf '[Service]\\nEnvironment=SPCD_INSTANCE=${instance}\\n' > /etc/systemd/system/spcd.service.d/instance.conf`,
    );
  }, 600_000);

  afterAll(async () => {
    await run(DOCKER, ['rm', '-f', box]).catch(() => undefined);
    await cleanupInstance(instance);
    const line =
      `installed=${result.installed ?? 0} upgraded_restarts=${result.upgraded_restarts ?? '?'} ` +
      `removed_left_running=${result.removed_left_running ?? 0} purged=${result.purged ?? 0} ` +
      `daemonset_pod_ready=${result.daemonset_pod_ready ?? 'not-run'} ` +
      `inflight_finished_by=${result.inflight_finished_by ?? '?'}`;
    if (process.env.SPCD_INSTALL_RESULT) writeFileSync(process.env.SPCD_INSTALL_RESULT, `${line}\n`);
    process.stdout.write(`${line}\n`);
  });

  it('install: the package enables and starts spcd, which holds an unconfigured compute set and runs a set', async () => {
    await inBox(`dpkg -i /debs/old/${basename(OLD!)} 2>&1`);
    expect((await inBox('systemctl is-enabled spcd')).trim()).toBe('enabled');
    await waitFor(
      'spcd active',
      async () => (await inBox('systemctl is-active spcd || true')).trim() === 'active',
      {
        timeoutMs: 60_000,
      },
    );
    expect(await inBox('getent group spcd')).toMatch(/^spcd:/);
    expect(
      await inBox(
        'ls /usr/share/bash-completion/completions/spcctl /usr/share/zsh/vendor-completions/_spcctl',
      ),
    ).toBe('/usr/share/bash-completion/completions/spcctl\n/usr/share/zsh/vendor-completions/_spcctl\n');
    expect(await inBox('stat -c %U:%G:%a /etc/spcd /run/spcd/spcd.sock')).toBe(
      'root:spcd:750\nroot:spcd:660\n',
    );
    const version = (await spcctl('--version')).trim();
    expect(version).toMatch(/^spcctl \d+\.\d+\.\d+ \(commit [0-9a-f]{12}(-dirty)?, built \S+\)$/);
    expect((await inBox('spcd --version')).trim()).toBe(version.replace(/^spcctl/, 'spcd'));
    // The shipped compute set needs the host's globals (my_ip, the control
    // plane's addresses): spcd holds and creates nothing until they are set.
    const status = JSON.parse(await spcctl('status -o json')) as {
      build?: { commit: string };
      definitions?: { loaded: boolean };
    };
    expect(status.build?.commit).toMatch(/^[0-9a-f]{12}/);
    expect(status.definitions?.loaded).toBe(false);
    expect(await containersOf(instance)).toEqual([]);
    // The operator's own set instead.
    await inBox(
      `rm /etc/spcd/container-sets/compute.yaml && cat > /etc/spcd/container-sets/install.yaml <<'YAML'\n${SET}YAML`,
    );
    await spcctl('reload --wait');
    for (const name of [a, b]) {
      await waitFor(`${name} running`, async () => (await inspect(name))?.State.Running, {
        timeoutMs: 90_000,
      });
    }
    await waitFor('b healthy', async () => (await spcctl(`health ${b}`)).startsWith(`${b}: healthy`), {
      timeoutMs: 60_000,
    });
    result.installed = 1;
  });

  it('upgrade of the package while a container upgrade is in flight: it finishes, nothing else restarts', async () => {
    const before = await snapshot();
    const spcdPid = (await inBox('systemctl show spcd -p MainPID --value')).trim();
    // an operator's edit of a conffile, kept by the upgrade (as the removed compute.yaml)
    await inBox("echo '# edited by the operator' >> /etc/spcd/overrides.yaml");
    // b's new generation passes its gate only after its first check (4 s).
    await spcctl(`upgrade ${b} --image spcd-demo/service:2`);
    // in flight when the package upgrade begins: generation 2 is not yet current
    expect(await spcctl(`generations ${b}`)).not.toMatch(/current\s+spcd-demo\/service:2/);
    await inBox(`dpkg -i /debs/next/${basename(NEXT!)} 2>&1`, 300_000);
    await waitFor(
      'spcd active again',
      async () => (await inBox('systemctl is-active spcd || true')).trim() === 'active',
      {
        timeoutMs: 120_000,
      },
    );
    expect((await inBox('systemctl show spcd -p MainPID --value')).trim()).not.toBe(spcdPid);
    expect(await inBox("dpkg-query -W -f '${Version}' spcd")).toMatch(/\+/);
    expect(await inBox('tail -n 1 /etc/spcd/overrides.yaml; ls /etc/spcd/container-sets/*.yaml')).toBe(
      '# edited by the operator\n/etc/spcd/container-sets/install.yaml\n',
    );
    await waitFor('b on image 2', async () => (await inspect(b))?.Config.Image === 'spcd-demo/service:2', {
      timeoutMs: 120_000,
    });
    await waitFor('b healthy', async () => (await spcctl(`health ${b}`)).startsWith(`${b}: healthy`), {
      timeoutMs: 60_000,
    });
    const upgraded = (await snapshot()).get(b)!;
    await new Promise((r) => setTimeout(r, 10_000)); // a restart would show by now
    const after = await snapshot();
    let restarts = 0;
    // a: untouched; b: replaced once by its upgrade, then never again
    if (after.get(a)?.Id !== before.get(a)?.Id || after.get(a)?.startedAt !== before.get(a)?.startedAt)
      restarts++;
    if (after.get(b)?.Id !== upgraded.Id || after.get(b)?.startedAt !== upgraded.startedAt) restarts++;
    result.upgraded_restarts = restarts;
    // Who finished the upgrade: the stopping spcd lets a running step end
    // (up to its shutdown deadline), else the new one's journal recovery does.
    const log = await inBox('journalctl -u spcd --no-pager -o cat || true');
    const byJournal = /"msg":"journal recovery done"/.test(log);
    result.inflight_finished_by = byJournal ? 'journal' : 'drain';
    if (!byJournal) expect(log).not.toMatch(/shutdown deadline passed/);
    expect(restarts).toBe(0);
    expect(await spcctl(`generations ${b}`)).toMatch(/current\s+spcd-demo\/service:2/);
  });

  it('remove stops spcd only; purge removes its state and config; the containers keep running', async () => {
    const before = await snapshot();
    await inBox('dpkg -r spcd 2>&1');
    expect((await inBox('systemctl is-active spcd || true')).trim()).not.toBe('active');
    expect(await inBox('test -e /usr/bin/spcd && echo present || echo gone')).toBe('gone\n');
    expect(await inBox('test -d /var/lib/spcd && test -f /etc/spcd/overrides.yaml && echo kept')).toBe(
      'kept\n',
    );
    const left = await snapshot();
    const running = [...left.entries()].filter(([n, s]) => s.running && s.Id === before.get(n)?.Id);
    result.removed_left_running = running.length;
    expect(running.length).toBe(2);
    await inBox('dpkg -P spcd 2>&1');
    expect(await inBox('ls -d /var/lib/spcd /etc/spcd 2>/dev/null || true')).toBe('');
    const purged = await snapshot();
    const stillRunning = [...purged.entries()].filter(([n, s]) => s.running && s.Id === before.get(n)?.Id);
    expect(stillRunning.length).toBe(2);
    result.purged = 1;
  });
});
