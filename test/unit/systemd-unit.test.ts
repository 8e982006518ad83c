import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const UNIT = join(import.meta.dirname, '../../systemd/spcd.service');
const text = readFileSync(UNIT, 'utf8');

/** Key -> values, per section, ignoring comments (enough for our own unit). */
function parse(src: string): Record<string, Record<string, string[]>> {
  const out: Record<string, Record<string, string[]>> = {};
  let section = '';
  for (const line of src.split('\n')) {
    const t = line.trim();
    if (!t || t.startsWith('#') || t.startsWith(';')) continue;
    const s = /^\[(.+)\]$/.exec(t);
    if (s) {
      section = s[1]!;
      out[section] = {};
      continue;
    }
    const i = t.indexOf('=');
    const k = t.slice(0, i);
    (out[section]![k] ??= []).push(t.slice(i + 1));
  }
  return out;
}

/** systemd-analyze, installing Debian's systemd package when it is missing. */
function findAnalyze(): { ok: true } | { ok: false; why: string } {
  if (spawnSync('systemd-analyze', ['--version']).status === 0) return { ok: true };
  const apt = spawnSync('sh', ['-c', 'apt-get install -y systemd'], { encoding: 'utf8', timeout: 300_000 });
  if (spawnSync('systemd-analyze', ['--version']).status === 0) return { ok: true };
  return {
    ok: false,
    why: `systemd-analyze missing and apt-get install systemd failed: ${apt.stderr?.slice(-300)}`,
  };
}

const analyze = findAnalyze();
if (!analyze.ok) console.warn(`[systemd-unit] skipping systemd-analyze verify: ${analyze.why}`);

/** verify needs ExecStart's binary to exist: a temp copy points it at /bin/true, flags kept. */
function verify(unitText: string): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'spcd-unit-'));
  const path = join(dir, 'spcd.service');
  writeFileSync(path, unitText.replace(/^ExecStart=\/usr\/local\/bin\/spcd /m, 'ExecStart=/bin/true '));
  const r = spawnSync('systemd-analyze', ['verify', path], { encoding: 'utf8', cwd: dir });
  return { status: r.status, output: `${r.stdout}${r.stderr}`.trim() };
}

describe('systemd/spcd.service', () => {
  const unit = parse(text);
  const svc = unit.Service!;
  const one = (k: string) => svc[k]?.[0];

  it.skipIf(!analyze.ok)('systemd-analyze verify is clean', () => {
    const r = verify(text);
    expect(r.output).toBe('');
    expect(r.status).toBe(0);
  });

  it.skipIf(!analyze.ok)('verify is not a rubber stamp: it catches a bad unit', () => {
    const r = verify(text.replace(/^Restart=always$/m, 'Restart=sometimes'));
    // systemd-analyze exits 0 on such warnings: the output is what counts
    expect(r.output).toMatch(/restart specifier/);
  });

  it('is a notify service with a watchdog, restarted always within a start limit', () => {
    expect(one('Type')).toBe('notify');
    expect(one('NotifyAccess')).toBe('all');
    expect(one('WatchdogSec')).toBe('30s');
    expect(one('Restart')).toBe('always');
    expect(one('RestartSec')).toBe('2s');
    expect(Number(unit.Unit!.StartLimitBurst?.[0])).toBeGreaterThan(1);
    expect(unit.Unit!.StartLimitIntervalSec?.[0]).toBeDefined();
  });

  it('is ordered after docker.service without being bound to it', () => {
    expect(unit.Unit!.After?.join(' ')).toMatch(/\bdocker\.service\b/);
    expect(unit.Unit!.Wants?.join(' ')).toMatch(/\bdocker\.service\b/);
    expect(unit.Unit!.Requires).toBeUndefined();
    expect(unit.Unit!.BindsTo).toBeUndefined();
    expect(unit.Unit!.PartOf).toBeUndefined();
  });

  it('runs spcd on the FHS paths with flags the daemon takes', () => {
    const exec = one('ExecStart')!.split(/\s+/);
    expect(exec[0]).toBe('/usr/local/bin/spcd');
    const flags = Object.fromEntries(
      exec.slice(1).flatMap((a, i, all) => (a.startsWith('--') ? [[a.slice(2), all[i + 1]]] : [])),
    );
    expect(flags).toMatchObject({
      sets: '/etc/spcd/container-sets',
      overrides: '/etc/spcd/overrides.yaml',
      'state-dir': '/var/lib/spcd',
      socket: '/run/spcd/spcd.sock',
      'docker-socket': '/var/run/docker.sock',
    });
    const settings = readFileSync(join(import.meta.dirname, '../../agent/daemon/settings.ts'), 'utf8');
    for (const f of Object.keys(flags))
      expect(settings, `--${f} is a daemon flag`).toContain(`'${f}'`.replace(/^'([a-z]+)'$/, '$1:'));
    expect(one('StateDirectory')).toBe('spcd');
    expect(one('RuntimeDirectory')).toBe('spcd spcd-ro'); // the admin and the read-only socket's
    expect(one('ConfigurationDirectory')).toBe('spcd');
  });

  it('never stops managed containers and keeps the hardening compatible with Docker and host probes', () => {
    // containers are dockerd's children: only spcd's own cgroup is signalled
    expect(['mixed', 'control-group', 'process']).toContain(one('KillMode'));
    expect(one('ExecStop')).toBeUndefined();
    expect(svc.PrivateNetwork).toBeUndefined();
    expect(svc.IPAddressDeny).toBeUndefined();
    expect(svc.PrivateDevices).toBeUndefined();
    expect(svc.MemoryDenyWriteExecute).toBeUndefined();
    expect(svc.InaccessiblePaths).toBeUndefined();
    expect(svc.DevicePolicy).toBeUndefined();
    expect(svc.DeviceAllow).toBeUndefined();
    expect(svc.ProtectClock).toBeUndefined(); // it implies a device allow-list: /dev/kvm would go
    // everything read-only but the state and runtime directories (systemd's rule) and /etc/kolla
    expect(one('ProtectSystem')).toBe('strict');
    expect(svc.ReadWritePaths).toEqual(['-/etc/kolla']);
    expect(one('UMask')).toBe('0077');
    for (const k of [
      'NoNewPrivileges',
      'ProtectHome',
      'PrivateTmp',
      'RestrictSUIDSGID',
      'LockPersonality',
      'RestrictRealtime',
      'RestrictNamespaces',
      'ProtectKernelTunables',
      'ProtectKernelModules',
      'ProtectKernelLogs',
      'ProtectControlGroups',
      'ProtectHostname',
    ])
      expect(one(k), k).toBe('yes');
    expect(one('SystemCallArchitectures')).toBe('native');
    // the services' set less privileged and resource calls; chown (the sockets) and V8's pkey calls back
    expect(svc.SystemCallFilter).toEqual([
      '@system-service',
      '~@privileged @resources',
      '@chown pkey_alloc pkey_free pkey_mprotect',
    ]);
    expect(one('SystemCallErrorNumber')).toBe('EPERM');
    // unix (the Docker and API sockets, sd_notify), loopback probes, netlink (ss for the caller's uid)
    expect(one('RestrictAddressFamilies')?.split(' ').sort()).toEqual([
      'AF_INET',
      'AF_INET6',
      'AF_NETLINK',
      'AF_UNIX',
    ]);
    expect(one('CapabilityBoundingSet')?.split(' ').sort()).toEqual([
      'CAP_CHOWN',
      'CAP_DAC_OVERRIDE',
      'CAP_DAC_READ_SEARCH',
      'CAP_FOWNER',
      'CAP_KILL',
      'CAP_SYS_PTRACE',
    ]);
  });

  it('copies cleanly (the file itself is what install-unit.sh ships)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'spcd-unit-copy-'));
    copyFileSync(UNIT, join(dir, 'spcd.service'));
    expect(readFileSync(join(dir, 'spcd.service'), 'utf8')).toBe(text);
  });
});
