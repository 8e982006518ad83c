/**
 * Every config.json spcd generates for the shipped compute set, run through
 * Kolla's real kolla_set_configs (set_configs.py from
 * ../shared/peers/kolla-2024.1/, built into spcd-e2e/kolla-runtime:bookworm by
 * scripts/kolla-runtime/build-image.sh from global setup): in a container, as
 * root, with KOLLA_CONFIG_STRATEGY=COPY_ALWAYS and Kolla's users at Kolla's
 * uids. The files must land with the owner and mode asked for, permissions
 * must apply (recursively where asked), and /run_command must hold the command.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../agent/log.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { kollaCommand } from '../../agent/render/kolla.js';
import { Renderer, type RenderedConfig } from '../../agent/render/renderer.js';
import { REPO } from '../support/daemon.js';
import { cleanupInstance } from '../support/docker.js';
import { sampleValues, shippedCompute } from '../support/sample-values.js';

const IMAGE = 'spcd-e2e/kolla-runtime:bookworm';
const INSTANCE = `t-kolla-set-configs-${process.pid}`;
const docker = new Docker({ socketPath: '/var/run/docker.sock' });

const { containers } = await shippedCompute();
const dir = mkdtempSync(join(tmpdir(), 'spcd-kolla-set-configs-'));

/** Runs `script` (bash) in the Kolla runtime image with the config dir mounted as Kolla expects. */
async function runInKollaImage(configDir: string, script: string): Promise<{ code: number; out: string }> {
  const c = await docker.createContainer({
    Image: IMAGE,
    Entrypoint: ['/bin/bash', '-c', script],
    Cmd: [],
    User: 'root',
    Env: ['KOLLA_CONFIG_STRATEGY=COPY_ALWAYS'],
    Labels: { 'spcd.instance': INSTANCE },
    HostConfig: { NetworkMode: 'none', Binds: [`${configDir}:/var/lib/kolla/config_files:ro`] },
  });
  try {
    await c.start();
    const { StatusCode } = (await c.wait()) as { StatusCode: number };
    const logs = await c.logs({ stdout: true, stderr: true, follow: false });
    // Demultiplex docker's 8-byte frame headers.
    const parts: string[] = [];
    for (let i = 0; i + 8 <= logs.length;) {
      const len = logs.readUInt32BE(i + 4);
      parts.push(logs.subarray(i + 8, i + 8 + len).toString('utf8'));
      i += 8 + len;
    }
    return { code: StatusCode, out: parts.join('') };
  } finally {
    await c.remove({ force: true });
  }
}

/** "user" -> "user:user" (set_configs' reading of an owner without a group). */
const ownerOf = (owner: string): string => (owner.includes(':') ? owner : `${owner}:${owner}`);
/** "0600" -> "600" as stat %a prints it. */
const statMode = (perm: string): string => String(parseInt(perm, 8).toString(8));

let rendered: Map<string, RenderedConfig>;

beforeAll(async () => {
  await docker
    .getImage(IMAGE)
    .inspect()
    .catch(() => {
      throw new Error(
        `${IMAGE} is missing: global setup runs scripts/kolla-runtime/build-image.sh (needs ../shared/peers/kolla-2024.1 beside the repository); see its output`,
      );
    });
  const { values, secretValues } = await sampleValues();
  const renderer = new Renderer({ templatesDir: join(REPO, 'templates'), log: silentLogger() });
  rendered = new Map(containers.map((c) => [c.name, renderer.renderContainer(c, values, secretValues)]));
});

afterAll(async () => {
  await cleanupInstance(INSTANCE);
  rmSync(dir, { recursive: true, force: true });
});

describe("the shipped compute set's config.json through Kolla's kolla_set_configs", () => {
  it('covers the containers that start through kolla_start', () => {
    expect(containers.map((c) => c.name).sort()).toEqual([
      'neutron_openvswitch_agent',
      'nova_compute',
      'nova_libvirt',
      'openvswitch_db',
      'openvswitch_vswitchd',
    ]);
  });

  it.each(containers.map((c) => [c.name, c] as const))('%s', async (name: string, spec: ContainerSpec) => {
    const r = rendered.get(name)!;
    const configDir = join(dir, name);
    mkdirSync(configDir, { recursive: true });
    for (const f of r.files) {
      mkdirSync(dirname(join(configDir, f.dest)), { recursive: true });
      writeFileSync(join(configDir, f.dest), f.content, { mode: 0o644 });
    }
    writeFileSync(join(configDir, 'config.json'), r.configJson, { mode: 0o644 });
    const perms = spec.permissions ?? [];
    const script = [
      'set -o errexit',
      // What a host leaves behind: root-owned trees with something in them.
      ...perms.map((p) => `mkdir -p '${p.path}/sub' && touch '${p.path}/sub/file'`),
      'kolla_set_configs',
      'echo "run_command=$(cat /run_command)"',
      ...r.files.map((f) => `stat -c 'file %n %U:%G %a' '${f.containerPath}'`),
      ...perms.map((p) =>
        p.recurse
          ? `find '${p.path}' -exec stat -c 'perm %n %U:%G %a' {} +`
          : `stat -c 'perm %n %U:%G %a' '${p.path}'`,
      ),
      ...r.files.map(
        (f) =>
          `cmp '/var/lib/kolla/config_files/${f.dest}' '${f.containerPath}' && echo 'same ${f.containerPath}'`,
      ),
    ].join('\n');
    const { code, out } = await runInKollaImage(configDir, script);
    expect(code, out).toBe(0);
    const lines = out.split('\n');
    expect(lines).toContain(`run_command=${kollaCommand(spec)}`);
    for (const f of r.files) {
      expect(lines, out).toContain(`file ${f.containerPath} ${ownerOf(f.owner)} ${statMode(f.mode)}`);
      expect(lines).toContain(`same ${f.containerPath}`);
    }
    for (const p of perms) {
      const entries = lines.filter((l) => l.startsWith(`perm ${p.path}`));
      // Recursive: the folder, the test's sub/file, and whatever the config files put under it.
      const made = p.recurse ? [p.path, `${p.path}/sub`, `${p.path}/sub/file`] : [p.path];
      for (const m of made)
        expect(
          entries.some((e) => e.startsWith(`perm ${m} `)),
          `${m}\n${out}`,
        ).toBe(true);
      if (!p.recurse) expect(entries.length, out).toBe(1);
      for (const e of entries) expect(e, out).toMatch(new RegExp(` ${ownerOf(p.owner)} \\d+$`));
      if (p.perm) for (const e of entries) expect(e.endsWith(` ${statMode(p.perm)}`), e).toBe(true);
    }
  });
});
