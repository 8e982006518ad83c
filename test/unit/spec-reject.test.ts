import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadDesired, validateDir } from '../../agent/spec/load.js';
import { cleanupAfterEach, only, container, problemsOf, writeDir } from '../fixtures/spec/helpers.js';

cleanupAfterEach();

describe('structure', () => {
  it('rejects an unknown container key and lists the allowed ones', async () => {
    const p = await only(container('imagee: x'));
    expect(p.where).toBe('s.yaml:5: containers.web.imagee');
    expect(p.message).toMatch(/^unknown key "imagee" \(allowed: image, command, entrypoint,/);
    expect(p.code).toBe('SPEC_INVALID');
  });

  it('rejects unknown keys at the top, in subsets, in binds and in checks', async () => {
    const problems = await problemsOf(
      [
        'set: s',
        'colour: red',
        'containers:',
        '  web:',
        '    image: busybox:1.36',
        '    binds: [{source: /a, target: /b, mode: ro}]',
        '    healthchecks: [{name: x, exec: [/bin/true], retries: 3}]',
        'sets:',
        '  sub:',
        '    set: nested',
        '',
      ].join('\n'),
    );
    expect(problems.map((p) => `${p.where}: ${p.message.replace(/ \(allowed.*/, '')}`)).toEqual([
      's.yaml:2: colour: unknown key "colour"',
      's.yaml:6: containers.web.binds[0].mode: unknown key "mode"',
      's.yaml:7: containers.web.healthchecks[0].retries: unknown key "retries"',
      's.yaml:10: sets.sub.set: unknown key "set"',
    ]);
    expect(problems[2]!.code).toBe('CHECK_INVALID');
  });

  it('rejects wrong types', async () => {
    const problems = await problemsOf(
      container(
        'command: "libvirtd --listen"',
        'privileged: "yes"',
        'environment: [A=1]',
        'cap_add: SYS_ADMIN',
      ),
    );
    expect(problems.map((p) => `${p.where}: ${p.message}`)).toEqual([
      's.yaml:5: containers.web.command: must be a list, not a string',
      's.yaml:6: containers.web.privileged: must be true or false, not a string',
      's.yaml:7: containers.web.environment: must be a mapping, not a list',
      's.yaml:8: containers.web.cap_add: must be a list, not a string',
    ]);
  });

  it('rejects numbers in a command list, with a hint to quote them', async () => {
    const p = await only(container('command:', '  - sleep', '  - 3600'));
    expect(p.where).toBe('s.yaml:7: containers.web.command[1]');
    expect(p.message).toBe('must be a string, not a number (quote it: "3600")');
  });

  it('rejects an image reference that is not one', async () => {
    const p = await only(
      ['set: s', 'containers:', '  web:', '    image: "kolla/nova compute"', ''].join('\n'),
    );
    expect(`${p.where}: ${p.message}`).toBe(
      's.yaml:4: containers.web.image: "kolla/nova compute" is not an image reference (e.g. kolla/nova-libvirt:2024.1)',
    );
  });

  it('rejects a missing image and a missing set name', async () => {
    const p = await only(['set: s', 'containers:', '  web:', '    command: [x]', ''].join('\n'));
    expect(`${p.where}: ${p.message}`).toBe('s.yaml:3: containers.web: image is required');
    const q = await only('containers: {}\n');
    expect(`${q.where}: ${q.message}`).toBe('s.yaml:1: : set is required (the set name)');
  });

  it('rejects __proto__ keys at any depth of set defaults', async () => {
    const p = await only(
      ['set: s', 'defaults:', '  nova:', '    - {__proto__: {polluted: true}}', ''].join('\n'),
    );
    expect(`${p.where}: ${p.message}`).toBe(
      's.yaml:4: defaults.nova[0].__proto__: key "__proto__" is not allowed',
    );
  });

  it('rejects bad set and container names', async () => {
    const p = await only('set: Compute\n');
    expect(p.where).toBe('s.yaml:1: set');
    const q = await only(['set: s', 'containers:', '  -bad:', '    image: busybox', ''].join('\n'));
    expect(q.where).toBe('s.yaml:3: containers.-bad');
  });
});

describe('YAML', () => {
  it('maps a duplicate key to SPEC_YAML with its line', async () => {
    const p = await only(container('user: a', 'user: b'));
    expect(p.code).toBe('SPEC_YAML');
    expect(p.file).toBe('s.yaml');
    expect(p.line).toBe(6);
    expect(p.message).toMatch(/duplicated mapping key/);
  });

  it('refuses any anchor, even an unused one (CVE-2019-11253)', async () => {
    const p = await only(container('environment: &env {A: "1"}'));
    expect(p).toMatchObject({ code: 'SPEC_YAML', line: 5 });
    expect(p.message).toMatch(/anchors and aliases are not allowed \(found &env\)/);
  });

  it('refuses aliases (billion laughs)', async () => {
    const bomb = ['a: &a ["x","x","x","x"]', 'b: &b [*a,*a,*a,*a]', 'c: [*b,*b,*b,*b]', 'set: s', ''].join(
      '\n',
    );
    const p = await only(bomb);
    expect(p).toMatchObject({ code: 'SPEC_YAML', line: 1 });
  });

  it('rejects invalid YAML with its line', async () => {
    const p = await only(container('command: [a, b', 'user: x'));
    expect(p.code).toBe('SPEC_YAML');
    expect(p.line).toBeGreaterThanOrEqual(5);
  });

  it('rejects an empty file and a comment-only file', async () => {
    for (const text of ['', '# nothing here\n']) {
      const p = await only(text);
      expect(p).toMatchObject({ code: 'SPEC_INVALID', file: 's.yaml', line: 0 });
      expect(p.message).toMatch(/the file is empty/);
    }
  });

  it('rejects a file that is not a mapping, and a second document', async () => {
    const p = await only('- set: s\n');
    expect(`${p.where}: ${p.message}`).toBe('s.yaml:1: : must be a mapping, not a list');
    const q = await only('set: s\n---\nset: t\n');
    expect(q.code).toBe('SPEC_YAML');
  });

  it('refuses merge keys (<<) as unknown keys', async () => {
    const p = await only(container('<<: {user: root}'));
    expect(p.where).toBe('s.yaml:5: containers.web.<<'.replace('.<<', '["<<"]'));
  });

  it('refuses a file over the size cap before reading it (SPEC_TOO_LARGE)', async () => {
    const text = container(`environment: {A: "${'x'.repeat(2000)}"}`);
    const dir = await writeDir({ 's.yaml': text });
    const size = (await stat(join(dir, 's.yaml'))).size;
    const { problems } = await validateDir({ setsDir: dir, maxFileBytes: 1000 });
    expect(problems).toEqual([
      {
        file: join(dir, 's.yaml'),
        line: 0,
        path: '',
        message: `is ${size} bytes, larger than the 1000-byte cap`,
        code: 'SPEC_TOO_LARGE',
      },
    ]);
  });

  it('rejects a file that is not UTF-8', async () => {
    const dir = await writeDir({ 's.yaml': Buffer.from([0x73, 0x65, 0x74, 0x3a, 0x20, 0xff, 0xfe, 0x0a]) });
    const { problems } = await validateDir({ setsDir: dir });
    expect(problems.map((p) => p.code)).toEqual(['SPEC_YAML']);
  });
});

describe('across files', () => {
  it('rejects duplicate set names across files, naming both', async () => {
    const dir = await writeDir({ 'a.yaml': 'set: same\n', 'b.yml': '# b\nset: same\n' });
    const { problems, desired } = await validateDir({ setsDir: dir });
    expect(desired).toBeUndefined();
    expect(problems).toEqual([
      {
        file: join(dir, 'b.yml'),
        line: 2,
        path: 'set',
        message: `set name "same" is already used by ${join(dir, 'a.yaml')}`,
        code: 'SPEC_INVALID',
      },
    ]);
  });

  it('rejects a container name used twice on the host, even in different sets and subsets', async () => {
    const a = ['set: a', 'containers:', '  web:', '    image: busybox', ''].join('\n');
    const b = [
      'set: b',
      'sets:',
      '  inner:',
      '    containers:',
      '      web:',
      '        image: busybox',
      '',
    ].join('\n');
    const dir = await writeDir({ 'a.yaml': a, 'b.yaml': b });
    const { problems } = await validateDir({ setsDir: dir });
    expect(problems.map((p) => `${p.file.slice(dir.length + 1)}:${p.line}: ${p.path}: ${p.message}`)).toEqual(
      [
        `b.yaml:5: sets.inner.containers.web: container web is already defined at ${join(dir, 'a.yaml')}:3 (container names are unique on the host)`,
      ],
    );
  });

  it('returns nothing when one file of several is bad', async () => {
    const dir = await writeDir({ 'a.yaml': 'set: a\n', 'b.yaml': 'set: b\nbogus: 1\n' });
    const { desired, problems } = await validateDir({ setsDir: dir });
    expect(desired).toBeUndefined();
    expect(problems).toHaveLength(1);
    await expect(loadDesired({ setsDir: dir })).rejects.toMatchObject({ code: 'SPEC_INVALID' });
  });

  it('reports a missing directory as SPEC_IO', async () => {
    const { problems } = await validateDir({ setsDir: '/nonexistent/spcd-sets' });
    expect(problems).toMatchObject([{ code: 'SPEC_IO', file: '/nonexistent/spcd-sets', line: 0 }]);
  });
});

describe('depends_on', () => {
  const set = (deps: Record<string, string>): string =>
    [
      'set: s',
      'containers:',
      ...Object.entries(deps).flatMap(([name, dep]) => [
        `  ${name}:`,
        '    image: busybox',
        `    depends_on: [${dep}]`,
      ]),
      '',
    ].join('\n');

  it('rejects a cycle with SPEC_CYCLE naming it', async () => {
    const p = await only(set({ aa: 'bb', bb: 'cc', cc: 'aa' }));
    expect(p.code).toBe('SPEC_CYCLE');
    expect(`${p.where}: ${p.message}`).toBe(
      's.yaml:5: containers.aa.depends_on: depends_on forms a cycle: aa -> bb -> cc -> aa',
    );
  });

  it('rejects a self-dependency as a cycle', async () => {
    const p = await only(set({ aa: 'aa' }));
    expect(p.code).toBe('SPEC_CYCLE');
    expect(`${p.where}: ${p.message}`).toBe(
      's.yaml:5: containers.aa.depends_on[0]: depends_on forms a cycle: aa -> aa',
    );
  });

  it('rejects an unknown target, and one in another set', async () => {
    const text = [
      'set: s',
      'containers:',
      '  aa:',
      '    image: busybox',
      '    depends_on: [ghost]',
      'sets:',
      '  sub:',
      '    containers:',
      '      bb:',
      '        image: busybox',
      '        depends_on:',
      '          - aa',
      '',
    ].join('\n');
    const problems = await problemsOf(text);
    expect(problems.map((p) => `${p.where}: ${p.message}`)).toEqual([
      's.yaml:5: containers.aa.depends_on[0]: "ghost" is not a container of set s (known: none)',
      's.yaml:12: sets.sub.containers.bb.depends_on[0]: "aa" is not a container of set s/sub (known: none)',
    ]);
  });
});
