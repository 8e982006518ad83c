import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { allContainers } from '../../agent/model/spec.js';
import { loadDesired, validateDir } from '../../agent/spec/load.js';
import { cleanupAfterEach, writeDir } from '../fixtures/spec/helpers.js';

cleanupAfterEach();

const SET = [
  'set: compute',
  'containers:',
  '  nova_libvirt:',
  '    image: kolla/nova-libvirt:2024.1',
  '    privileged: true',
  '    cap_add: [SYS_ADMIN]',
  '    environment: {A: "1", B: "2"}',
  '    labels: {team: compute}',
  '    ulimits: {nofile: 1024}',
  '    binds: ["/run:/run:shared"]',
  '    memory: 1g',
  '',
].join('\n');

async function setup(overrides: string | undefined, set = SET) {
  // The override file sits outside the sets directory, as /etc/spcd/overrides.yaml would.
  const dir = await writeDir(overrides === undefined ? {} : { 'overrides.yaml': overrides });
  const sets = join(dir, 'sets');
  await mkdir(sets);
  await writeFile(join(sets, 'compute.yaml'), set);
  return {
    setsDir: sets,
    overridesFile: overrides === undefined ? undefined : join(dir, 'overrides.yaml'),
    dir,
  };
}

describe('overrides', () => {
  it('replaces scalars and lists, merges mappings key-wise, and a null deletes a key', async () => {
    const o = await setup(
      [
        'containers:',
        '  nova_libvirt:',
        '    privileged: false',
        '    cap_add: [ALL]',
        '    cap_drop: [SYS_RESOURCE]',
        '    environment: {B: "two", C: 3, A: null}',
        '    labels: {site: lab}',
        '    ulimits: {nproc: 100}',
        '    binds: ["/var/run:/var/run"]',
        '    memory: null',
        'values:',
        '  nova: {cpu_allocation_ratio: 4.0}',
        '',
      ].join('\n'),
    );
    const desired = await loadDesired({ setsDir: o.setsDir, overridesFile: o.overridesFile });
    const c = allContainers(desired.sets)[0]!;
    expect(c).toMatchObject({
      privileged: false,
      capAdd: ['ALL'],
      capDrop: ['SYS_RESOURCE'],
      environment: { B: 'two', C: '3' },
      labels: { site: 'lab', team: 'compute' },
      ulimits: [
        { name: 'nofile', soft: 1024, hard: 1024 },
        { name: 'nproc', soft: 100, hard: 100 },
      ],
      binds: [{ source: '/var/run', target: '/var/run', readOnly: false }],
    });
    expect(c.memoryBytes).toBeUndefined();
    expect(Object.keys(c.environment)).toEqual(['B', 'C']);
    expect(desired.hostValues).toEqual({ nova: { cpu_allocation_ratio: 4 } });
  });

  it('reports a bad overridden value at the override file line and path', async () => {
    const o = await setup(
      ['containers:', '  nova_libvirt:', '    environment: {B: "x"}', '    pid: hots', ''].join('\n'),
    );
    const { problems } = await validateDir({ setsDir: o.setsDir, overridesFile: o.overridesFile });
    expect(problems).toEqual([
      {
        file: o.overridesFile,
        line: 4,
        path: 'containers.nova_libvirt.pid',
        message: 'must be one of host, private (got "hots")',
        code: 'SPEC_INVALID',
      },
    ]);
  });

  it('reports a bad merged mapping key at the override line, and unknown keys there too', async () => {
    const o = await setup(
      ['containers:', '  nova_libvirt:', '    labels:', '      spcd.set: x', '    colour: red', ''].join(
        '\n',
      ),
    );
    const { problems } = await validateDir({ setsDir: o.setsDir, overridesFile: o.overridesFile });
    expect(
      problems.map(
        (p) =>
          `${p.file.slice(o.dir.length + 1)}:${p.line}: ${p.path}: ${p.message.replace(/ \(allowed.*/, '')}`,
      ),
    ).toEqual([
      'overrides.yaml:4: containers.nova_libvirt.labels["spcd.set"]: label keys starting with "spcd." are reserved for spcd',
      'overrides.yaml:5: containers.nova_libvirt.colour: unknown key "colour"',
    ]);
  });

  it('reports a bad item of an overridden list at its own line in the override file', async () => {
    const o = await setup(
      ['containers:', '  nova_libvirt:', '    binds:', '      - /a:/a', '      - b:/b', ''].join('\n'),
    );
    const { problems } = await validateDir({ setsDir: o.setsDir, overridesFile: o.overridesFile });
    expect(problems).toMatchObject([
      {
        file: o.overridesFile,
        line: 5,
        path: 'containers.nova_libvirt.binds[1]',
        message: '"b" is not an absolute host path or a volume name ([a-zA-Z0-9][a-zA-Z0-9_.-]+)',
      },
    ]);
  });

  it('keeps reporting base fields at the set file even when an override applies', async () => {
    const set = SET.replace('    memory: 1g', '    memory: lots');
    const o = await setup(['containers:', '  nova_libvirt:', '    privileged: false', ''].join('\n'), set);
    const { problems } = await validateDir({ setsDir: o.setsDir, overridesFile: o.overridesFile });
    expect(problems).toMatchObject([
      { file: join(o.setsDir, 'compute.yaml'), line: 11, path: 'containers.nova_libvirt.memory' },
    ]);
  });

  it('rejects an override for a container that does not exist', async () => {
    const o = await setup(
      ['containers:', '  nova_libvirt: {}', '  nova_libvrt:', '    privileged: false', ''].join('\n'),
    );
    const { problems } = await validateDir({ setsDir: o.setsDir, overridesFile: o.overridesFile });
    expect(problems).toEqual([
      {
        file: o.overridesFile,
        line: 3,
        path: 'containers.nova_libvrt',
        message: `no container named nova_libvrt is defined in ${o.setsDir}`,
        code: 'SPEC_INVALID',
      },
    ]);
  });

  it('rejects unknown top-level keys and a non-mapping values', async () => {
    const o = await setup(['container: {}', 'values: [1]', ''].join('\n'));
    const { problems } = await validateDir({ setsDir: o.setsDir, overridesFile: o.overridesFile });
    expect(problems.map((p) => `${p.line}: ${p.path}: ${p.message}`)).toEqual([
      '1: container: unknown key "container" (allowed: containers, values)',
      '2: values: must be a mapping, not a list',
    ]);
  });

  it('refuses anchors in the override file too', async () => {
    const o = await setup(['values: &v {a: 1}', ''].join('\n'));
    const { problems } = await validateDir({ setsDir: o.setsDir, overridesFile: o.overridesFile });
    expect(problems).toMatchObject([{ code: 'SPEC_YAML', line: 1, file: o.overridesFile }]);
  });

  it('accepts an empty override file', async () => {
    const o = await setup('# nothing overridden on this host\n');
    const desired = await loadDesired({ setsDir: o.setsDir, overridesFile: o.overridesFile });
    expect(allContainers(desired.sets)[0]!.privileged).toBe(true);
    expect(desired.hostValues).toBeUndefined();
  });

  it('a missing override file is SPEC_IO when named, and fine when not', async () => {
    const o = await setup(undefined);
    await expect(
      loadDesired({ setsDir: o.setsDir, overridesFile: join(o.dir, 'absent.yaml') }),
    ).rejects.toMatchObject({
      code: 'SPEC_IO',
    });
    const desired = await loadDesired({ setsDir: o.setsDir });
    expect(allContainers(desired.sets)).toHaveLength(1);
  });
});
