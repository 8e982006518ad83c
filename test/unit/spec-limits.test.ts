/**
 * Limits on every value that reaches a timer, a syscall or memory: durations,
 * environment values, ulimits and sysctls, the YAML budget of one load, and
 * set files that are symlinks out of the sets directory.
 */
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_DURATION_MS } from '../../agent/model/units.js';
import { formatProblem, validateDir } from '../../agent/spec/load.js';
import { cleanupAfterEach, container, problemsOf, writeDir } from '../fixtures/spec/helpers.js';

cleanupAfterEach();

async function shown(text: string): Promise<string[]> {
  return (await problemsOf(text)).map((p) => `${p.where}: ${p.message}`);
}

describe('durations have a maximum (Node fires longer timers after 1 ms)', () => {
  it('is 24 hours, well under the 2^31-1 ms Node can time', () => {
    expect(MAX_DURATION_MS).toBe(86_400_000);
    expect(2 * MAX_DURATION_MS).toBeLessThan(2 ** 31 - 1);
  });

  it.each([
    ['stop_grace_period', ['stop_grace_period: 25h'], 's.yaml:5: containers.web.stop_grace_period', '"25h"'],
    [
      'check timeout (cron schedule)',
      ['healthchecks:', '  - {name: x, exec: [/bin/true], cron: "* * * * *", timeout: 600h}'],
      's.yaml:6: containers.web.healthchecks[0].timeout',
      '"600h"',
    ],
    [
      'check interval',
      ['healthchecks:', '  - {name: x, exec: [/bin/true], interval: 2147483648}'],
      's.yaml:6: containers.web.healthchecks[0].interval',
      '2147483648',
    ],
    [
      'check start_period',
      ['healthchecks:', '  - {name: x, exec: [/bin/true], start_period: 90000m}'],
      's.yaml:6: containers.web.healthchecks[0].start_period',
      '"90000m"',
    ],
    [
      'bootstrap timeout',
      ['bootstrap:', '  - {name: db, command: [/bin/true], timeout: 48h}'],
      's.yaml:6: containers.web.bootstrap[0].timeout',
      '"48h"',
    ],
  ])('refuses a %s over the maximum with file:line and field', async (_name, fields, where, value) => {
    const problems = await problemsOf(container(...fields));
    expect(problems.map((p) => `${p.where}: ${p.message}`)).toEqual([
      `${where}: ${value} must be at most 24h (86400000 ms)`,
    ]);
  });

  it('accepts exactly the maximum', async () => {
    const { problems } = await validateDir({
      setsDir: await writeDir({ 's.yaml': container('stop_grace_period: 24h') }),
    });
    expect(problems).toEqual([]);
  });
});

describe('environment values', () => {
  it.each([
    ['a newline', 'A: "one\\ntwo"'],
    ['a NUL', 'A: "one\\0two"'],
    ['a carriage return', 'A: "one\\rtwo"'],
  ])('refuses %s with file:line', async (_name, entry) => {
    expect(await shown(container('environment:', `  ${entry}`))).toEqual([
      's.yaml:6: containers.web.environment.A: must not contain NUL, carriage return or newline characters',
    ]);
  });

  it('keeps tabs and other text', async () => {
    const { problems } = await validateDir({
      setsDir: await writeDir({ 's.yaml': container('environment: {A: "x\\ty", B: "é ü"}') }),
    });
    expect(problems).toEqual([]);
  });
});

describe('sysctls follow the container namespaces (as runc checks them at start)', () => {
  it.each([
    [
      ['network: host', 'sysctls: {net.ipv4.ip_forward: 1}'],
      'net.ipv4.ip_forward is not allowed with network: host',
    ],
    [['ipc: host', 'sysctls: {kernel.shmmax: 1}'], 'kernel.shmmax is not allowed with ipc: host'],
    [['ipc: host', 'sysctls: {fs.mqueue.msg_max: 20}'], 'fs.mqueue.msg_max is not allowed with ipc: host'],
    [['uts: host', 'sysctls: {kernel.domainname: x}'], 'kernel.domainname is not allowed with uts: host'],
    [['uts: private', 'sysctls: {kernel.hostname: x}'], 'kernel.hostname is not allowed'],
    [['pid: private', 'sysctls: {vm.swappiness: 1}'], 'vm.swappiness is not in a container namespace'],
    [['pid: private', 'sysctls: {kernel.pid_max: 1}'], 'kernel.pid_max is not in a container namespace'],
  ])('refuses %j', async (fields, message) => {
    const problems = await problemsOf(container(...fields));
    expect(problems).toHaveLength(1);
    expect(problems[0]!.where).toMatch(/^s\.yaml:6: containers\.web\.sysctls\[/);
    expect(problems[0]!.message).toContain(message);
  });

  it('accepts the namespaced ones in their own namespace', async () => {
    const text = container(
      'network: bridge',
      'ipc: shareable',
      'uts: private',
      'sysctls:',
      '  net.ipv4.ip_forward: 1',
      '  net.core.somaxconn: 1024',
      '  kernel.sem: "250 32000 32 128"',
      '  kernel.shm_rmid_forced: 1',
      '  fs.mqueue.msg_max: 20',
      '  kernel.domainname: example.org',
    );
    const { problems } = await validateDir({ setsDir: await writeDir({ 's.yaml': text }) });
    expect(problems).toEqual([]);
  });

  it('refuses a newline in a sysctl value', async () => {
    expect(await shown(container('sysctls: {net.core.somaxconn: "1\\n2"}'))).toEqual([
      's.yaml:5: containers.web.sysctls["net.core.somaxconn"]: must not contain NUL, carriage return or newline characters',
    ]);
  });

  it("refuses a newline in a bootstrap task's environment value", async () => {
    expect(
      await shown(container('bootstrap: [{name: sync, environment: {KOLLA_BOOTSTRAP: "a\\nb"}}]')),
    ).toEqual([
      's.yaml:5: containers.web.bootstrap[0].environment.KOLLA_BOOTSTRAP: must not contain NUL, carriage return or newline characters',
    ]);
  });
});

describe('ulimits', () => {
  it.each([
    ['nofile: -1', 'nofile cannot be unlimited nor above 2147483584'],
    ['nofile: {soft: 1024, hard: 2147483585}', 'nofile cannot be unlimited nor above 2147483584'],
    ['nproc: {soft: 10, hard: 5}', 'soft limit 10 is above hard limit 5'],
    ['nproc: 1.5', 'must be an integer, not a number'],
    ['nproc: "10"', 'must be a mapping, not a string'],
    ['nproc: -2', 'must be between -1 and'],
  ])('refuses %s at load time', async (entry, message) => {
    const problems = await problemsOf(container(`ulimits: {${entry}}`));
    expect(problems).toHaveLength(1);
    expect(problems[0]!.where).toMatch(/^s\.yaml:5: containers\.web\.ulimits\.nproc|nofile/);
    expect(problems[0]!.message).toContain(message);
  });
});

describe('the YAML budget of one load', () => {
  it('refuses a file with more nodes than the budget, naming the file (SPEC_TOO_LARGE)', async () => {
    const text = `set: s\ncontainers: {}\ndefaults:\n  x: [${Array.from({ length: 200 }, () => '[]').join(', ')}]\n`;
    const dir = await writeDir({ 's.yaml': text });
    const { problems } = await validateDir({ setsDir: dir, yamlLimits: { maxNodes: 100 } });
    expect(problems).toEqual([
      {
        file: join(dir, 's.yaml'),
        line: 4,
        path: '',
        message: 'holds more YAML nodes than the 100 allowed across the definitions of one load',
        code: 'SPEC_TOO_LARGE',
      },
    ]);
  });

  it('counts nodes across all files of the load', async () => {
    const one = container('environment: {A: "1", B: "2", C: "3"}');
    const two = one.replace('set: s', 'set: t').replace('web', 'db');
    // the smallest budget one file fits in
    const single = await writeDir({ 'a.yaml': one });
    let n = 1;
    while ((await validateDir({ setsDir: single, yamlLimits: { maxNodes: n } })).problems.length > 0) n++;
    expect(n).toBeGreaterThan(5);
    const dir = await writeDir({ 'a.yaml': one, 'b.yaml': two });
    const over = await validateDir({ setsDir: dir, yamlLimits: { maxNodes: n } });
    expect(over.problems.map((p) => [p.file, p.code])).toEqual([[join(dir, 'b.yaml'), 'SPEC_TOO_LARGE']]);
    expect((await validateDir({ setsDir: dir, yamlLimits: { maxNodes: 2 * n } })).problems).toEqual([]);
  });

  it('refuses nesting deeper than the budget before building it', async () => {
    const deep = `set: s\ncontainers: {}\ndefaults:\n  x: ${'['.repeat(60)}${']'.repeat(60)}\n`;
    const problems = await problemsOf(deep);
    expect(problems.map((p) => `${p.where}: ${p.message} ${p.code}`)).toEqual([
      's.yaml:4: : nests deeper than 40 levels SPEC_TOO_LARGE',
    ]);
  });

  it('refuses files once the load passes its total size, naming the file', async () => {
    const a = container(`environment: {A: "${'x'.repeat(600)}"}`);
    const dir = await writeDir({ 'a.yaml': a, 'b.yaml': a.replace('set: s', 'set: t').replace('web', 'db') });
    const { problems } = await validateDir({ setsDir: dir, yamlLimits: { maxTotalBytes: 1000 } });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ file: join(dir, 'b.yaml'), code: 'SPEC_TOO_LARGE' });
    expect(problems[0]!.message).toMatch(
      /^would bring the definitions of this load to \d+ bytes, over the 1000-byte total$/,
    );
  });

  it('stops the nested-flow bomb early: a 1 MiB file of nested lists is refused quickly', async () => {
    const unit = `${'['.repeat(39)}${']'.repeat(39)},`;
    const text = `[${unit.repeat(Math.floor((1024 * 1024 - 16) / unit.length) - 1)}[]]`;
    const started = Date.now();
    const problems = await problemsOf(text);
    expect(problems.map((p) => p.code)).toEqual(['SPEC_TOO_LARGE']);
    // unbounded, this file took 2 s and 370 MB here; bounded, tens of ms (slack for a loaded machine)
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});

describe('set files that are symlinks', () => {
  it('refuses a symlink to a file outside the sets directory without echoing its lines', async () => {
    const outsideDir = await writeDir({ 'secret.yaml': 'root: "s3cr3t-line"\nset: leaked\n' });
    const dir = await writeDir({});
    await symlink(join(outsideDir, 'secret.yaml'), join(dir, 's.yaml'));
    const { problems } = await validateDir({ setsDir: dir });
    expect(problems).toEqual([
      {
        file: join(dir, 's.yaml'),
        line: 0,
        path: '',
        message: `is a symbolic link to a file outside ${dir}; refused without reading it`,
        code: 'SPEC_IO',
      },
    ]);
    expect(JSON.stringify(problems)).not.toMatch(/s3cr3t|leaked|root/);
  });

  it('follows a symlink that stays inside the sets directory', async () => {
    const dir = await writeDir({});
    await mkdir(join(dir, 'real'));
    await writeFile(join(dir, 'real', 'one.yml.txt'), container());
    await symlink(join(dir, 'real', 'one.yml.txt'), join(dir, 's.yaml'));
    const { problems, desired } = await validateDir({ setsDir: dir });
    expect(problems).toEqual([]);
    expect(desired?.sets.map((s) => s.name)).toEqual(['s']);
  });
});

describe('user text in problems is escaped', () => {
  it('shows an unknown key holding ANSI and newlines on one escaped line', async () => {
    const problems = await problemsOf(container('"x\\e[2J\\rFAKE\\nspcd: all good": 1'));
    expect(problems).toHaveLength(1);
    const line = formatProblem(problems[0]!);
    // eslint-disable-next-line no-control-regex
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    expect(line).toContain('unknown key "x\\x1b[2J\\rFAKE\\nspcd: all good"');
  });
});
