/** Spec loading: library templates, normalization and the spec hash, problems, the repository's own sets. */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { specHash } from '../../agent/model/hash.js';
import { formatProblem, validateDir } from '../../agent/spec/load.js';
import {
  cleanupAfterEach,
  containerYaml,
  LIBRARY_FILE,
  loadOne,
  writeDir,
} from '../fixtures/spec/helpers.js';

cleanupAfterEach();

describe('library templates', () => {
  it('lets an entry rename a template, override fields and replace its probe', async () => {
    const c = await loadOne(
      containerYaml([
        'healthchecks:',
        '  - {use: port, name: amqp, args: [nova-compute, "5672"], interval: 30s, action: stop}',
        '  - {use: process, args: [nova-compute]}',
        '  - {use: curl, name: direct, http: "http://127.0.0.1/"}',
      ]),
    );
    expect(c.healthchecks.map((h) => [h.name, h.probe, h.schedule, h.action])).toEqual([
      [
        'amqp',
        { kind: 'exec', argv: ['/spcd/healthchecks/healthcheck_port', 'nova-compute', '5672'] },
        { kind: 'interval', intervalMs: 30_000 },
        'stop',
      ],
      [
        'process',
        { kind: 'exec', argv: ['/spcd/healthchecks/healthcheck_process', 'nova-compute'] },
        { kind: 'interval', intervalMs: 10_000 },
        'restart',
      ],
      [
        'direct',
        { kind: 'http', url: 'http://127.0.0.1/', expectStatus: [] },
        { kind: 'interval', intervalMs: 10_000 },
        'restart',
      ],
    ]);
  });

  it('the shipped library names the six scripts', async () => {
    const c = await loadOne(
      containerYaml([
        'healthchecks:',
        ...['port', 'listen', 'socket', 'curl', 'process', 'filemod'].map((n) => `  - {use: ${n}}`),
      ]),
    );
    expect(c.healthchecks.map((h) => (h.probe.kind === 'exec' ? h.probe.argv : []))).toEqual(
      ['port', 'listen', 'socket', 'curl', 'process', 'filemod'].map((n) => [
        `/spcd/healthchecks/healthcheck_${n}`,
      ]),
    );
  });
});

describe('normalization and the spec hash', () => {
  const a = [
    'set: s',
    'containers:',
    '  web:',
    '    image: busybox:1.36',
    '    memory: 64m',
    '    environment: {B: "2", A: 1}',
    '    cap_add: [cap_sys_admin, NET_ADMIN, SYS_ADMIN]',
    '    binds: ["/b:/b:ro", "/a:/a"]',
    '    tmpfs: [/y, {target: /x, options: "size=1m"}]',
    '    devices: [/dev/net/tun, "/dev/kvm"]',
    '    ulimits: {nproc: 10, nofile: {soft: 5, hard: 9}}',
    '    sysctls: {net.b: "1", net.a: 2}',
    '    labels: {z: "1", a: "2"}',
    '    stop_grace_period: 10s',
    '',
  ].join('\n');
  const b = [
    'set: s',
    'containers:',
    '  web:',
    '    stop_grace_period: 10000',
    '    labels: {a: "2", z: 1}',
    '    sysctls: {net.a: "2", net.b: 1}',
    '    ulimits: {nofile: {hard: 9, soft: 5}, nproc: 10}',
    '    devices: [/dev/kvm, {host: /dev/net/tun}]',
    '    tmpfs: ["/x:size=1m", {target: /y}]',
    '    binds: [{target: /a, source: /a}, {source: /b, target: /b, read_only: true}]',
    '    cap_add: [NET_ADMIN, sys_admin]',
    '    environment: {A: "1", B: 2}',
    '    memory: 67108864',
    '    image: busybox:1.36',
    '',
  ].join('\n');

  it('gives deep-equal specs and equal hashes for reordered input and equal units ("64m" == 67108864)', async () => {
    const x = await loadOne(a);
    const y = await loadOne(b);
    const { source: _sx, ...restX } = x;
    const { source: _sy, ...restY } = y;
    expect(restX).toEqual(restY);
    expect(specHash(x)).toBe(specHash(y));
    expect(x.memoryBytes).toBe(67108864);
    expect(x.capAdd).toEqual(['NET_ADMIN', 'SYS_ADMIN']);
  });

  it('gives a different hash when a value really changes', async () => {
    const x = await loadOne(a);
    const y = await loadOne(a.replace('memory: 64m', 'memory: 65m'));
    expect(specHash(x)).not.toBe(specHash(y));
  });
});

describe('problems', () => {
  it('formatProblem prints file:line: path: message', () => {
    expect(
      formatProblem({
        file: 'container-sets/compute.yaml',
        line: 12,
        path: 'containers.nova_libvirt.pid',
        message: 'must be one of host, private',
        code: 'SPEC_INVALID',
      }),
    ).toBe('container-sets/compute.yaml:12: containers.nova_libvirt.pid: must be one of host, private');
    expect(
      formatProblem({ file: 'x.yaml', line: 0, path: '', message: 'is empty', code: 'SPEC_INVALID' }),
    ).toBe('x.yaml: is empty');
  });

  it('collects every problem of every file in one pass', async () => {
    const dir = await writeDir({
      'a.yaml': 'set: a\ncontainers:\n  web:\n    image: busybox\n    pid: hots\n',
      'b.yaml': 'set: b\ncontainers:\n  db:\n    image: busybox\n    ipc: none\n    uts: none\n',
    });
    const { desired, problems } = await validateDir({ setsDir: dir });
    expect(desired).toBeUndefined();
    expect(problems.map((p) => `${p.file.slice(dir.length + 1)}:${p.line}: ${p.path}`)).toEqual([
      'a.yaml:5: containers.web.pid',
      'b.yaml:5: containers.db.ipc',
      'b.yaml:6: containers.db.uts',
    ]);
  });
});

// The repository's own definitions must load: container-sets/ and each subdirectory
// holding set files; each file in container-sets/hosts/ is an override file that
// must apply cleanly to at least one of those directories.
const REPO_SETS = new URL('../../container-sets', import.meta.url).pathname;
const yamlIn = (dir: string): string[] =>
  existsSync(dir) ? readdirSync(dir).filter((f) => /\.ya?ml$/.test(f) && !f.startsWith('.')) : [];
const setDirs = existsSync(REPO_SETS)
  ? [
      REPO_SETS,
      ...readdirSync(REPO_SETS)
        .filter((d) => d !== 'hosts')
        .map((d) => join(REPO_SETS, d)),
    ].filter((d) => statSync(d).isDirectory() && yamlIn(d).length > 0)
  : [];
const hostFiles = yamlIn(join(REPO_SETS, 'hosts')).map((f) => join(REPO_SETS, 'hosts', f));

describe.runIf(setDirs.length > 0)("the repository's container-sets/", () => {
  it.each(setDirs)('%s loads without problems', async (dir) => {
    const { problems, desired } = await validateDir({ setsDir: dir, checkLibraryFile: LIBRARY_FILE });
    expect(problems.map(formatProblem)).toEqual([]);
    expect(desired?.sets.length).toBeGreaterThan(0);
  });

  it.runIf(hostFiles.length > 0).each(hostFiles)(
    'override %s applies to one of them',
    async (overridesFile) => {
      const results = await Promise.all(
        setDirs.map((setsDir) => validateDir({ setsDir, overridesFile, checkLibraryFile: LIBRARY_FILE })),
      );
      const ok = results.filter((r) => r.problems.length === 0);
      expect(ok.length, results.flatMap((r) => r.problems.map(formatProblem)).join('\n')).toBeGreaterThan(0);
    },
  );
});
