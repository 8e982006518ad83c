import { execFile, execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoContainerYaml, REPO } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { systemdBoxRun } from '../support/systemd-box.js';
import { waitFor } from '../support/wait.js';

/**
 * systemd/spcd.service as shipped, run by Debian's systemd as PID 1 in a
 * container (these machines have no systemd running), spcd and Node mounted
 * in, the host's Docker engine through its socket. spcd must start (READY
 * through sd_notify), serve its socket and run and upgrade a container; and
 * a compromised spcd (a shell in its mount namespace, with its limits) must
 * not be able to write outside its own directories, nor hold capabilities it
 * does not use; and spcd runs under the unit's system call filter.
 */
const run = promisify(execFile);
const DOCKER = '/usr/bin/docker';
const IMAGE = 'spcd-e2e/systemd:bookworm';
const id = `${process.pid}-${Math.floor(Math.random() * 1e6)}`;
const instance = `t-sec-unit-${id}`;
const box = `spcd-sec-unit-${id}`;
const svc = `${instance}-svc`;

const inBox = async (script: string): Promise<string> =>
  (await run(DOCKER, ['exec', box, 'sh', '-c', script], { encoding: 'utf8', timeout: 120_000 })).stdout;
/**
 * The checkout inside the box, at a path of its own: the unit's PrivateTmp
 * would hide a checkout under /tmp (where CI may clone it) from spcd.
 */
const BOX_REPO = '/opt/spcd';
const spcctl = `/usr/local/bin/node ${BOX_REPO}/bin/spcctl.js --socket /run/spcd/spcd.sock`;
/** After READY, in the unit's context (its filter, its limits): a call only the filter refuses. */
const PROBE = 'ExecStartPost=-/bin/sh -c "nice -n 1 true 2>&1; echo syscall-probe-done"';
const mainPid = async (): Promise<string> => (await inBox('systemctl show spcd -p MainPID --value')).trim();

beforeAll(async () => {
  execFileSync('bash', [join(REPO, 'scripts/systemd-image/build-image.sh')], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const modules = realpathSync(join(REPO, 'node_modules'));
  execFileSync(
    DOCKER,
    systemdBoxRun(
      box,
      [`${REPO}:${BOX_REPO}:ro`, `${modules}:${modules}:ro`, `${process.execPath}:/usr/local/bin/node:ro`],
      IMAGE,
    ),
  );
  await waitFor(
    'systemd up',
    async () => /running|degraded/.test(await inBox('systemctl is-system-running || true')),
    {
      timeoutMs: 60_000,
    },
  );
  const set = `set: unit\ncontainers:\n${demoContainerYaml(svc, ['stop_grace_period: 1s'])}`;
  await inBox(
    [
      `printf '#!/bin/sh\\nexec /usr/local/bin/node ${BOX_REPO}/bin/spcd.js "$@"\\n' > /usr/local/bin/spcd`,
      'chmod 755 /usr/local/bin/spcd',
      'mkdir -p /etc/spcd/container-sets /etc/systemd/system/spcd.service.d',
      `printf '%s' '${set}' > /etc/spcd/container-sets/unit.yaml`,
      "printf 'containers: {}\\n' > /etc/spcd/overrides.yaml",
      'groupadd -r spcd',
      `cp ${BOX_REPO}/systemd/spcd.service /etc/systemd/system/spcd.service`,
      // the one change to the unit: a name of its own for the containers of this test, and a probe
      // of the system call filter run in the unit's own context (nice(1) is setpriority, @resources)
      `printf '[Service]\\nEnvironment=SPCD_INSTANCE=${instance}\\n${PROBE}\\n' > /etc/systemd/system/spcd.service.d/instance.conf`,
      'systemctl daemon-reload',
      'systemctl start spcd',
    ].join(' && '),
  );
}, 600_000);

afterAll(async () => {
  await run(DOCKER, ['exec', box, 'systemctl', 'stop', 'spcd']).catch(() => undefined);
  await run(DOCKER, ['rm', '-f', box]).catch(() => undefined);
  await cleanupInstance(instance);
});

describe('systemd/spcd.service under a real systemd', () => {
  it('starts spcd (READY), which serves its socket and runs and upgrades a container', async () => {
    expect((await inBox('systemctl is-active spcd')).trim()).toBe('active');
    await waitFor('svc running', async () => (await inspect(svc))?.State.Running, { timeoutMs: 60_000 });
    expect(await inBox(`${spcctl} upgrade ${svc} --image spcd-demo/service:2 --wait`)).toMatch(/succeeded/);
    expect((await inspect(svc))?.Config.Image).toBe('spcd-demo/service:2');
    expect(await inBox('ls /var/lib/spcd')).toMatch(/state\.json/);
    expect((await inBox('systemctl show spcd -p NRestarts --value')).trim()).toBe('0');
  });

  it('runs under the system call filter: set by systemd, in force on spcd, refusing with EPERM', async () => {
    const shown = (await inBox('systemctl show -p SystemCallFilter -p SystemCallErrorNumber spcd')).trim();
    const lines = new Map(
      shown.split('\n').map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    expect(lines.get('SystemCallErrorNumber')).toMatch(/^(1|EPERM)$/); // systemd 252 shows the number
    const allowed = new Set(lines.get('SystemCallFilter')!.split(' '));
    // an allow-list: what spcd uses, chown for its sockets and V8's pkey_alloc included
    for (const call of ['read', 'connect', 'getsockopt', 'execve', 'clone3', 'chown', 'fchown', 'pkey_alloc'])
      expect(allowed.has(call), call).toBe(true);
    // mounts, uid changes, tracing, modules, BPF, reboot, scheduling and limits are not on it
    for (const call of [
      'mount',
      'setuid',
      'ptrace',
      'init_module',
      'bpf',
      'reboot',
      'setpriority',
      'setrlimit',
    ])
      expect(allowed.has(call), call).toBe(false);
    // the same call in the unit's context and outside it: only the filter refuses it
    const journal = await waitFor('the probe ran', async () => {
      const text = await inBox('journalctl -u spcd -o cat --no-pager');
      return text.includes('syscall-probe-done') ? text : undefined;
    });
    expect(journal).toContain('nice: cannot set niceness: Operation not permitted');
    expect(await inBox('nice -n 1 true 2>&1; echo done')).toBe('done\n');
  });

  it('a compromised spcd can write neither /var nor /etc, and holds six capabilities', async () => {
    const pid = await mainPid();
    // A shell in spcd's own mount namespace: what the unit leaves spcd to write.
    const attempt = (path: string): Promise<string> =>
      inBox(`nsenter -t ${pid} -m sh -c 'echo x > ${path}' 2>&1 && echo written || true`);
    expect(await attempt('/var/spool/spcd-attack')).toMatch(/Read-only file system/);
    expect(await attempt('/etc/spcd-attack')).toMatch(/Read-only file system/);
    expect(await attempt('/var/lib/spcd/spcd-attack')).toBe('written\n'); // its own state directory
    // CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, KILL, SYS_PTRACE: no SYS_ADMIN, SYS_MODULE, NET_RAW...
    expect(await inBox(`grep CapBnd /proc/${pid}/status`)).toBe('CapBnd:\t000000000008002f\n');
    expect(await inBox(`grep NoNewPrivs /proc/${pid}/status`)).toBe('NoNewPrivs:\t1\n');
  });
});
