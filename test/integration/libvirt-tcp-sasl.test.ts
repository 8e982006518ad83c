/**
 * libvirt's TCP listener as the shipped compute set renders it with
 * `libvirt.listen_tcp` on (test/fixtures/render/: the sample values, the
 * SASL password from the sample secrets): a real libvirtd of
 * spcd-e2e/libvirt:bookworm with the rendered libvirtd.conf and
 * /etc/sasl2/libvirt.conf, after the rendered bootstrap task (sasl-user) wrote
 * its user into the database. The attack: a client that reaches the port
 * without credentials, or with a wrong password, is refused; the rendered
 * auth.conf (nova-compute's and libvirtd's own credentials) is let in. The
 * libvirtd has no network but its loopback, where it listens.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../agent/log.js';
import { Renderer, renderedFileMap } from '../../agent/render/renderer.js';
import { run } from '../e2e/libvirt-e2e-harness.js';
import { execIn } from '../support/containers.js';
import { REPO } from '../support/daemon.js';
import { cleanupInstance, docker } from '../support/docker.js';
import { sampleValues, shippedCompute } from '../support/sample-values.js';
import { waitFor } from '../support/wait.js';

const LIBVIRT = 'spcd-e2e/libvirt:bookworm';
const INSTANCE = `t-libvirt-sasl-${process.pid}`;
const URI = 'qemu+tcp://127.0.0.1:16509/system';
const dir = mkdtempSync(join(tmpdir(), 'spcd-libvirt-sasl-'));
let id = '';

/** virsh against the TCP listener with `auth` as libvirt's client credentials file. */
const virsh = (auth: string) =>
  execIn(id, ['env', `LIBVIRT_AUTH_FILE=${auth}`, 'virsh', '-c', URI, 'uri'], { timeoutMs: 30_000 });

beforeAll(async () => {
  await run('bash', [join(REPO, 'scripts/libvirt/build-images.sh'), 'bookworm'], 45 * 60_000);
  const { values, secretValues } = await sampleValues();
  const spec = (await shippedCompute()).containers.find((c) => c.name === 'nova_libvirt')!;
  const renderer = new Renderer({ templatesDir: join(REPO, 'templates'), log: silentLogger() });
  const files = renderedFileMap(renderer.renderContainer(spec, values, secretValues));
  const cfg = join(dir, 'cfg');
  mkdirSync(cfg);
  // The host's migration address is not here: the listener goes on loopback.
  const conf = files.get('libvirtd.conf')!.replace(/^listen_addr = .*$/m, 'listen_addr = "127.0.0.1"');
  writeFileSync(join(cfg, 'libvirtd.conf'), conf);
  for (const f of ['sasl.conf', 'sasl-user', 'auth.conf']) writeFileSync(join(cfg, f), files.get(f)!);
  writeFileSync(
    join(cfg, 'wrong-auth.conf'),
    files.get('auth.conf')!.replace(/^password=.*$/m, 'password=x'),
  );
  const c = await docker().createContainer({
    Image: LIBVIRT,
    // The bootstrap task first (as spcd runs it before a start), then libvirtd with --listen.
    Entrypoint: ['bash', '-c', 'bash /cfg/sasl-user && exec libvirtd --listen -f /cfg/libvirtd.conf'],
    Labels: { 'spcd.instance': INSTANCE },
    HostConfig: {
      NetworkMode: 'none',
      Binds: [`${cfg}:/cfg:ro`, `${join(cfg, 'sasl.conf')}:/etc/sasl2/libvirt.conf:ro`],
      CapAdd: ['ALL'],
      CapDrop: ['SYS_RESOURCE'],
    },
  });
  id = c.id;
  await c.start();
  await waitFor(
    'libvirtd listening on TCP',
    async () => (await execIn(id, ['bash', '-c', 'exec 3<>/dev/tcp/127.0.0.1/16509'])).exitCode === 0,
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}, 50 * 60_000);

afterAll(async () => {
  await cleanupInstance(INSTANCE);
  rmSync(dir, { recursive: true, force: true });
});

describe("libvirt's TCP listener of the shipped compute set", () => {
  it('the bootstrap task wrote the SASL user into the database in the libvirtd volume, 0600', async () => {
    const log = await execIn(id, ['stat', '-c', '%a', '/var/lib/libvirt/passwd.db']);
    expect(log.stdout.trim()).toBe('600');
    const users = await execIn(id, ['sasldblistusers2', '-f', '/var/lib/libvirt/passwd.db']);
    expect(users.stdout).toMatch(/^nova@\S+: userPassword$/m);
  });

  // The same URI lets the right credentials in (below): the port is reached, the refusal is SASL's.
  it('refuses a client without credentials and one with a wrong password', async () => {
    const none = await virsh('/nonexistent/auth.conf');
    expect(none.exitCode, none.stdout).not.toBe(0);
    // virsh has no terminal to ask for a name and password: the SASL exchange ends without one.
    expect(none.stderr).toMatch(/failed to connect to the hypervisor/);
    const wrong = await virsh('/cfg/wrong-auth.conf');
    expect(wrong.exitCode, wrong.stdout).not.toBe(0);
    expect(wrong.stderr).toMatch(/authentication failed/i);
  });

  it('lets in the credentials of the rendered auth.conf', async () => {
    const ok = await virsh('/cfg/auth.conf');
    expect(ok.stderr).toBe('');
    expect(ok.exitCode).toBe(0);
    expect(ok.stdout.trim()).toBe(URI);
  });
});
