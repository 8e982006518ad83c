import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/daemon.js';
import { cleanupInstance, containersOf, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';
import { SYSTEMD_BOX_OPTIONS } from '../support/systemd-box.js';
import {
  aptInstall,
  forge,
  FORGED_IN_BOX,
  FORGERIES,
  KEYRING,
  REPO_IN_BOX,
  type Forgery,
} from './apt-repo.js';
import {
  assertDemoFree,
  DEMO,
  DEMO_PORT,
  hostOverrides,
  restarted,
  snapshot,
  UPGRADED,
} from './demo-host.js';

/**
 * The Debian package on a clean root (issue 28, part 4): Debian bookworm with
 * systemd as PID 1 in a container (scripts/systemd-image/build-image.sh, as
 * test/security/unit-hardening.test.ts), the host's Docker engine through its
 * socket and the host's network (spcd probes demo_compute's port on the
 * host's loopback, as on a host), nothing of the checkout inside. apt
 * refuses three forgeries of the signed repository (apt-repo.ts), then
 * installs the package from it: spcd is enabled and started by the package itself; the
 * shipped demo set, copied up as an operator would, with this host's
 * overrides (demo-host.ts), runs; the newer build is unpacked, an upgrade of
 * demo_ovs_agent is started, and the package is configured while it is in
 * flight: spcd is restarted by the package, the upgrade finishes, no other
 * container restarts; the package unpacked again and spcd SIGKILLed while an
 * upgrade's new generation is in its gate: the restarted spcd's journal rolls
 * it forward (the same instance committed); `dpkg -r` stops spcd and leaves the containers running;
 * `dpkg -P` removes spcd's state and config, the containers still run.
 *
 * The two packages come from the environment (test/e2e/run-install-e2e.sh
 * builds them): SPCD_INSTALL_REPO (the signed repository of the first,
 * installed first) and SPCD_INSTALL_DEB_NEXT (the same version with a suffix). The result line goes to
 * SPCD_INSTALL_RESULT when set.
 */
/** The signed apt repository of the first package (scripts/package/build-repo.sh). */
const APT_REPO = process.env.SPCD_INSTALL_REPO;
const NEXT = process.env.SPCD_INSTALL_DEB_NEXT;
const run = promisify(execFile);
const DOCKER = '/usr/bin/docker';
const IMAGE = 'spcd-e2e/systemd:bookworm';
const id = `${process.pid}-${Math.floor(Math.random() * 1e6)}`;
const instance = `t-install-${id}`;
const box = `spcd-install-${id}`;
/** The forgeries of the repository apt must refuse (apt-repo.ts), made in beforeAll. */
const forged = mkdtempSync(join(tmpdir(), 'spcd-forged-'));
const result: Record<string, string | number> = {};

const inBox = async (script: string, timeout = 180_000): Promise<string> =>
  (await run(DOCKER, ['exec', box, 'sh', '-c', script], { encoding: 'utf8', timeout })).stdout;
const spcctl = (args: string): Promise<string> => inBox(`spcctl ${args}`);
const active = async (): Promise<boolean> =>
  (await inBox('systemctl is-active spcd || true')).trim() === 'active';

/** Every demo container healthy, each check passed `times` in a row under the spcd running now. */
async function settled(times: number): Promise<boolean> {
  for (const name of DEMO) {
    const h = JSON.parse(await spcctl(`health ${name} -o json`)) as {
      status: string;
      checks: { consecutiveSuccesses: number }[];
    };
    if (h.status !== 'healthy' || h.checks.some((c) => c.consecutiveSuccesses < times)) return false;
  }
  return true;
}

/** spcd's log lines under this unit, oldest first: the message and the fields. */
async function unitLog(): Promise<Record<string, unknown>[]> {
  const out = await inBox('journalctl -u spcd --no-pager -o cat || true');
  return out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe.skipIf(!APT_REPO || !NEXT)(
  'the Debian package under systemd (install, upgrade, remove, purge)',
  () => {
    beforeAll(async () => {
      await assertDemoFree();
      execFileSync('bash', [join(REPO, 'scripts/systemd-image/build-image.sh')], {
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      forge(APT_REPO!, NEXT!, forged);
      execFileSync(DOCKER, [
        'run',
        '-d',
        '--name',
        box,
        ...SYSTEMD_BOX_OPTIONS,
        '--network',
        'host',
        '-v',
        `${APT_REPO!}:${REPO_IN_BOX}:ro`,
        '-v',
        `${forged}:${FORGED_IN_BOX}:ro`,
        '-v',
        `${dirname(NEXT!)}:/debs/next:ro`,
        IMAGE,
      ]);
      await waitFor(
        'systemd up',
        async () => /running|degraded/.test(await inBox('systemctl is-system-running || true')),
        { timeoutMs: 60_000 },
      );
      // The one local change to the unit, made before the package starts spcd: a
      // name of its own for this test's containers (an operator's drop-in, kept by dpkg).
      await inBox(
        `mkdir -p /etc/systemd/system/spcd.service.d && printf '[Service]\\nEnvironment=SPCD_INSTANCE=${instance}\\n' > /etc/systemd/system/spcd.service.d/instance.conf`,
      );
    }, 600_000);

    afterAll(async () => {
      await run(DOCKER, ['rm', '-f', box]).catch(() => undefined);
      rmSync(forged, { recursive: true, force: true });
      await cleanupInstance(instance);
      const line =
        `installed=${result.installed ?? 0} upgraded_restarts=${result.upgraded_restarts ?? '?'} ` +
        `removed_left_running=${result.removed_left_running ?? 0} purged=${result.purged ?? 0} ` +
        `daemonset_pod_ready=${result.daemonset_pod_ready ?? 'not-run'} ` +
        `inflight_finished_by=${result.inflight_finished_by ?? '?'} killed_finished_by=${result.killed_finished_by ?? '?'} ` +
        `apt_forgeries_refused=${result.apt_forgeries_refused ?? 0}`;
      if (process.env.SPCD_INSTALL_RESULT) writeFileSync(process.env.SPCD_INSTALL_RESULT, `${line}\n`);
      process.stdout.write(`${line}\n`);
    });

    it('apt refuses a repository signed by a key the host does not trust, a package list rewritten after signing and a package swapped under its signed name: nothing installed', async () => {
      // The operator's one trusted input: the repository's public key, where `signed-by` names it.
      await inBox(`cp ${REPO_IN_BOX}/spcd-archive-keyring.gpg ${KEYRING}`);
      const refusal: Record<Forgery, RegExp> = {
        'stranger-key': /NO_PUBKEY .*\n[^]*is not signed/,
        'rewritten-index': /Packages\.gz +Hash Sum mismatch/,
        'swapped-package': /\.deb +Hash Sum mismatch/,
      };
      for (const f of FORGERIES) {
        const out = await inBox(`${aptInstall(`${FORGED_IN_BOX}/${f}`)}; echo "rc=$?"`, 300_000);
        expect(out, f).toMatch(/rc=100\n$/);
        expect(out, f).toMatch(refusal[f]);
        expect(await inBox("dpkg-query -W -f '${Status}' spcd 2>&1 || true"), f).toMatch(/no packages found/);
      }
      result.apt_forgeries_refused = FORGERIES.length;
    }, 600_000);

    it('install: the package enables and starts spcd, which creates nothing of an unconfigured compute set and runs the demo set', async () => {
      await inBox(aptInstall(REPO_IN_BOX), 300_000);
      expect((await inBox('systemctl is-enabled spcd')).trim()).toBe('enabled');
      await waitFor('spcd active', active, { timeoutMs: 60_000 });
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
      // plane's addresses): spcd creates nothing until they are set.
      const status = JSON.parse(await spcctl('status -o json')) as {
        build?: { commit: string };
        definitions?: { loaded: boolean };
      };
      expect(status.build?.commit).toMatch(/^[0-9a-f]{12}/);
      expect(status.definitions?.loaded).toBe(false);
      expect(await containersOf(instance)).toEqual([]);
      // The operator's choice instead: the shipped demo set, copied up unchanged
      // (the folder is read flat), and this host's overrides.
      await inBox('cd /etc/spcd/container-sets && rm compute.yaml && cp -p demo/demo.yaml demo.yaml');
      expect(await inBox('cat /etc/spcd/container-sets/demo.yaml')).toBe(
        readFileSync(join(REPO, 'container-sets/demo/demo.yaml'), 'utf8'),
      );
      const privileged = await run(DOCKER, [
        'run',
        '--rm',
        '--privileged',
        'spcd-demo/service:1',
        'true',
      ]).then(
        () => true,
        () => false,
      );
      const noPrivileged = privileged
        ? undefined
        : await inBox('cat /etc/spcd/container-sets/hosts/no-privileged.yaml');
      await inBox(`cat > /etc/spcd/overrides.yaml <<'YAML'\n${hostOverrides(noPrivileged)}YAML`);
      await spcctl('reload --wait');
      for (const name of DEMO) {
        await waitFor(`${name} running`, async () => (await inspect(name))?.State.Running, {
          timeoutMs: 90_000,
        });
      }
      await waitFor('the demo set healthy', () => settled(1), { timeoutMs: 120_000 });
      // demo_compute answers on the host's port, as the demo's README shows
      const page = await fetch(`http://127.0.0.1:${DEMO_PORT}/`);
      expect((await page.text()).trim()).toBe('version=1');
      for (const name of DEMO) expect((await inspect(name))?.Config.Labels['spcd.instance']).toBe(instance);
      result.installed = 1;
    });

    it('upgrade of the package while a container upgrade is in flight: it finishes, nothing else restarts', async () => {
      const before = await snapshot();
      const fromGeneration = Number(before.get(UPGRADED)?.generation);
      const spcdPid = (await inBox('systemctl show spcd -p MainPID --value')).trim();
      // an operator's edit of a conffile, kept by the upgrade (as the removed compute.yaml)
      await inBox("echo '# edited by the operator' >> /etc/spcd/overrides.yaml");
      // As apt does it: the new files unpacked first, the old spcd still
      // running; then configured, when postinst restarts spcd. The container
      // upgrade starts in between, and its new generation's gate takes
      // GATE_SECONDS (its check, demo-host.ts): the restart comes inside it.
      await inBox(`dpkg --unpack /debs/next/${basename(NEXT!)} 2>&1`, 300_000);
      expect((await inBox('systemctl show spcd -p MainPID --value')).trim()).toBe(spcdPid);
      await spcctl(`upgrade ${UPGRADED} --image spcd-demo/service:2`);
      const upgradeAt = Date.now();
      expect(await spcctl(`generations ${UPGRADED}`)).not.toMatch(/current\s+spcd-demo\/service:2/);
      await inBox('dpkg --configure spcd 2>&1', 300_000);
      process.stdout.write(
        `package upgrade: configured ${((Date.now() - upgradeAt) / 1000).toFixed(1)} s into the upgrade\n`,
      );
      await waitFor('spcd active again', active, { timeoutMs: 120_000 });
      expect((await inBox('systemctl show spcd -p MainPID --value')).trim()).not.toBe(spcdPid);
      expect(await inBox("dpkg-query -W -f '${Version}' spcd")).toMatch(/\+/);
      expect(await inBox('tail -n 1 /etc/spcd/overrides.yaml; ls /etc/spcd/container-sets/*.yaml')).toBe(
        '# edited by the operator\n/etc/spcd/container-sets/demo.yaml\n',
      );
      await waitFor(
        `${UPGRADED} on image 2`,
        async () => (await inspect(UPGRADED))?.Config.Image === 'spcd-demo/service:2',
        { timeoutMs: 120_000 },
      );
      const upgraded = new Map([[UPGRADED, (await snapshot()).get(UPGRADED)!]]);
      // the new spcd has watched every container through two checks each: a
      // recreate or a restart it would do at its start is done by then
      await waitFor('the demo set healthy under the new spcd', () => settled(2), { timeoutMs: 120_000 });
      const after = await snapshot();
      // the others untouched; the upgraded one replaced once, then never again
      const moved = [
        ...restarted(before, after).filter((n) => n !== UPGRADED),
        ...restarted(upgraded, after),
      ];
      result.upgraded_restarts = moved.length;
      // Who finished the upgrade: the stopping spcd lets a running step end (up
      // to its shutdown deadline, 120 s), else the new one's journal recovery
      // resolves it (a started generation gated again and committed, an
      // earlier step undone: docs/decisions/0060-recovery-rolls-forward.md).
      const log = await unitLog();
      const at = (p: (l: Record<string, unknown>) => boolean): number => log.findIndex(p);
      const stopping = at((l) => l.msg === 'stopping; managed containers keep running');
      const done = at(
        (l) => l.msg === 'operation succeeded' && l.kind === 'upgrade' && l.target === UPGRADED,
      );
      const recovery = log.find((l) => l.msg === 'journal recovery done');
      result.inflight_finished_by = recovery ? 'journal' : 'drain';
      const secondsAt = (i: number): string => ((Number(log[i]?.time) - upgradeAt) / 1000).toFixed(1);
      process.stdout.write(
        `in flight: spcd told to stop ${secondsAt(stopping)} s into the upgrade, which succeeded at ${secondsAt(done)} s; ` +
          `journal recovery: ${JSON.stringify(recovery ?? null)}\n`,
      );
      expect(moved).toEqual([]);
      // in flight when the old spcd was told to stop, and ended by it
      expect(stopping).toBeGreaterThanOrEqual(0);
      expect(done).toBeGreaterThan(stopping);
      expect(result.inflight_finished_by).toBe('drain');
      expect(log.some((l) => String(l.msg).startsWith('shutdown deadline passed'))).toBe(false);
      expect(Number(after.get(UPGRADED)?.generation)).toBe(fromGeneration + 1);
      expect(await spcctl(`generations ${UPGRADED}`)).toMatch(/current\s+spcd-demo\/service:2/);
    });

    it("spcd killed in a container upgrade's gate during a package upgrade: the new spcd's journal rolls it forward", async () => {
      const before = await snapshot();
      const fromGeneration = Number(before.get(UPGRADED)?.generation);
      // The package unpacked again (a reinstall of the newer build), then spcd
      // dies while the upgrade's new generation is in its gate (GATE_SECONDS):
      // no drain. systemd starts it again (Restart=always) on the unpacked
      // files, and its journal recovery resolves the interrupted upgrade.
      await inBox(`dpkg --unpack /debs/next/${basename(NEXT!)} 2>&1`, 300_000);
      await spcctl(`upgrade ${UPGRADED} --image spcd-demo/service:1`);
      const inGate = await waitFor(
        'the new generation running, in its gate',
        async () => {
          const c = await inspect(UPGRADED);
          const fresh = c?.State.Running && Number(c.Config.Labels['spcd.generation']) === fromGeneration + 1;
          return fresh ? c : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      const killedPid = (await inBox('systemctl show spcd -p MainPID --value')).trim();
      await inBox('systemctl kill --kill-who=main --signal=SIGKILL spcd');
      await waitFor(
        'spcd started again by systemd',
        async () =>
          (await active()) && (await inBox('systemctl show spcd -p MainPID --value')).trim() !== killedPid,
        { timeoutMs: 120_000 },
      );
      await inBox('dpkg --configure spcd 2>&1', 300_000);
      await waitFor('spcd active after the package', active, { timeoutMs: 120_000 });
      await waitFor(
        `${UPGRADED} committed on image 1`,
        async () => /current\s+spcd-demo\/service:1/.test(await spcctl(`generations ${UPGRADED}`)),
        { timeoutMs: 180_000 },
      );
      await waitFor('the demo set healthy under the new spcd', () => settled(2), { timeoutMs: 120_000 });
      const after = await snapshot();
      const recovery = (await unitLog()).filter((l) => l.msg === 'journal recovery done').at(-1);
      process.stdout.write(`killed in the gate: journal recovery ${JSON.stringify(recovery ?? null)}\n`);
      expect(recovery?.rolledForward).toEqual([UPGRADED]);
      result.killed_finished_by = 'journal';
      // The very instance the killed spcd started is the one committed: not restarted, not replaced.
      expect(after.get(UPGRADED)?.id).toBe(inGate.Id);
      expect(after.get(UPGRADED)?.startedAt).toBe(inGate.State.StartedAt);
      expect(Number(after.get(UPGRADED)?.generation)).toBe(fromGeneration + 1);
      const others = new Map([...before].filter(([n]) => n !== UPGRADED));
      expect(restarted(others, after)).toEqual([]);
    });

    it('remove stops spcd only; purge removes its state and config; the containers keep running', async () => {
      const before = await snapshot();
      await inBox('dpkg -r spcd 2>&1');
      expect(await active()).toBe(false);
      expect(await inBox('test -e /usr/bin/spcd && echo present || echo gone')).toBe('gone\n');
      expect(await inBox('test -d /var/lib/spcd && test -f /etc/spcd/overrides.yaml && echo kept')).toBe(
        'kept\n',
      );
      const left = await snapshot();
      expect(restarted(before, left)).toEqual([]);
      result.removed_left_running = [...left.values()].filter((s) => s.running).length;
      expect(result.removed_left_running).toBe(DEMO.length);
      await inBox('dpkg -P spcd 2>&1');
      expect(await inBox('ls -d /var/lib/spcd /etc/spcd 2>/dev/null || true')).toBe('');
      expect(restarted(before, await snapshot())).toEqual([]);
      result.purged = 1;
    });
  },
);
