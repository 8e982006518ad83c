import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSpcctl } from '../support/cli-run.js';

/**
 * `spcctl validate DIR --globals F --secrets F`: the shipped Linux bridge set
 * rendered with a host's values, no daemon. A value with no safe default that
 * no file gives is named with the container's line in its set file.
 */

let dir: string;
const SECRETS = [
  'rabbitmq: {password: rabbit-secret-1}',
  'nova: {keystone_password: nova-secret-2, placement_password: placement-secret-3, metadata_secret: meta-secret-4}',
  'neutron: {keystone_password: neutron-secret-5}',
].join('\n');

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'spcctl-validate-values-'));
  writeFileSync(join(dir, 'secrets.yaml'), SECRETS + '\n');
  chmodSync(join(dir, 'secrets.yaml'), 0o600);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function globals(text: string): string {
  const f = join(dir, `globals-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(f, text);
  return f;
}

const validate = (globalsFile: string) =>
  runSpcctl([
    'validate',
    'container-sets/linuxbridge',
    '--globals',
    globalsFile,
    '--secrets',
    join(dir, 'secrets.yaml'),
  ]);

describe('validate with values', () => {
  it("names each missing host value with the container's line and the template", async () => {
    const r = await validate(globals('keystone: {internal_url: "http://192.0.2.2:5000/v3"}\n'));
    expect(r.code).toBe(1);
    const lines = r.err.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^container-sets\/linuxbridge\/compute\.yaml:\d+: containers\.nova_compute\.config: .*template nova\/nova\.conf\.j2, line \d+: required: my_ip is required/,
    );
    expect(lines[1]).toMatch(
      /^container-sets\/linuxbridge\/compute\.yaml:\d+: containers\.neutron_linuxbridge_agent\.config: .*template common\/transport_url\.j2 \(included from neutron\/neutron\.conf\.j2\), line 2: required: rabbitmq\.hosts is required/,
    );
    expect(r.err).not.toContain('secret-');
  });

  it('passes once the host gives its address, the control plane and the VXLAN endpoint', async () => {
    const r = await validate(
      globals(
        [
          'keystone: {internal_url: "http://192.0.2.2:5000/v3"}',
          'rabbitmq: {hosts: [192.0.2.3]}',
          'my_ip: 192.0.2.10',
          'neutron: {linuxbridge: {local_ip: 198.51.100.10}}',
        ].join('\n') + '\n',
      ),
    );
    expect(r).toMatchObject({ code: 0, out: 'valid\n', err: '' });
  });

  it('without values, only the definitions are checked (the sets hold no host values)', async () => {
    expect(await runSpcctl(['validate', 'container-sets/linuxbridge'])).toMatchObject({
      code: 0,
      out: 'valid\n',
    });
  });
});
