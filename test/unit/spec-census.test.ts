/** The `census:` field of a hypervisor container (issue 12): loaded, defaulted and refused with file:line. */
import { describe, expect, it } from 'vitest';
import { specHash } from '../../agent/model/hash.js';
import { cleanupAfterEach, containerYaml, loadOne, problemsOf } from '../fixtures/spec/helpers.js';
import { shippedCompute } from '../support/sample-values.js';

cleanupAfterEach();

/** A hypervisor container; `fields` start at line 6. */
const hypervisor = (...fields: string[]): string => containerYaml(fields, ['role: hypervisor']);

async function problems(text: string): Promise<string[]> {
  return (await problemsOf(text, {})).map((p) => `${p.where}: ${p.message}`);
}

describe('census', () => {
  it('loads the listing command and its timeout (10 s by default), and does not change the spec hash', async () => {
    const c = await loadOne(
      hypervisor("census: {exec: [virsh, -c, 'qemu:///system', list, --uuid], timeout: 5s}"),
    );
    expect(c.census).toEqual({ argv: ['virsh', '-c', 'qemu:///system', 'list', '--uuid'], timeoutMs: 5000 });
    const d = await loadOne(hypervisor('census: {exec: [virsh, list, --name]}'));
    expect(d.census).toEqual({ argv: ['virsh', 'list', '--name'], timeoutMs: 10_000 });
    const none = await loadOne(hypervisor());
    expect(none.census).toBeUndefined();
    // only what the engine creates is hashed: adding a census recreates nothing
    expect(specHash(c)).toBe(specHash(none));
  });

  it('is refused on a container that is not the hypervisor, naming the field', async () => {
    expect(await problems(containerYaml(['census: {exec: [virsh, list, --uuid]}']))).toEqual([
      's.yaml:5: containers.web.census: census applies to the hypervisor container only (role: hypervisor)',
    ]);
  });

  it('refuses a missing or empty command, an empty argument, unknown keys and timeouts out of range', async () => {
    expect(await problems(hypervisor('census: {timeout: 5s}'))).toEqual([
      's.yaml:6: containers.web.census: exec is required: the command that lists the running domains',
    ]);
    expect(await problems(hypervisor('census: {exec: []}'))).toEqual([
      's.yaml:6: containers.web.census.exec: must not be an empty list',
    ]);
    expect(await problems(hypervisor("census: {exec: [virsh, '']}"))).toEqual([
      's.yaml:6: containers.web.census.exec[1]: must not be empty',
    ]);
    expect((await problems(hypervisor('census: {exec: [x], every: 1s}')))[0]).toMatch(
      /^s\.yaml:6: containers\.web\.census\.every: unknown key "every" \(allowed: exec, timeout\)/,
    );
    expect(await problems(hypervisor('census: {exec: [x], timeout: 10ms}'))).toEqual([
      's.yaml:6: containers.web.census.timeout: "10ms" must be at least 100 ms',
    ]);
    expect((await problems(hypervisor('census: {exec: [x], timeout: 1h}')))[0]).toMatch(
      /^s\.yaml:6: containers\.web\.census\.timeout: "1h" must be at most 5m/,
    );
    expect(await problems(hypervisor('census: [virsh, list]'))).toHaveLength(1);
  });

  it('the shipped compute set takes a census of nova_libvirt with virsh', async () => {
    const { containers } = await shippedCompute();
    const libvirt = containers.find((c) => c.name === 'nova_libvirt');
    expect(libvirt?.census).toEqual({ argv: ['virsh', 'list', '--uuid'], timeoutMs: 30_000 });
    expect(containers.filter((c) => c.census).map((c) => c.name)).toEqual(['nova_libvirt']);
  });
});
