import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { specHash } from '../../agent/model/hash.js';
import { cleanupAfterEach, container, loadOne, problemsOf, writeDir } from '../fixtures/spec/helpers.js';
import { validateDir } from '../../agent/spec/load.js';

cleanupAfterEach();

/**
 * `dependency:` on a check: a short name, on every probe kind and through the
 * check library; the check's action is none, and restart or stop is refused
 * at the file, line and field.
 */
const checks = (...lines: string[]): string => container('healthchecks:', ...lines.map((l) => `  ${l}`));

describe('the dependency field', () => {
  it.each([
    ['tcp', "tcp: '127.0.0.1:5672'"],
    ['exec', 'exec: [/bin/true]'],
    ['shell', 'shell: "true"'],
    ['http', "http: 'http://127.0.0.1:8774/'"],
    ['process', 'process: nova-compute'],
    ['established', 'established: {process: nova-compute, ports: [5672]}'],
  ])('is accepted on a %s check, with action none by default', async (_kind, probe) => {
    const web = await loadOne(checks(`- {name: amqp, ${probe}, dependency: rabbit_mq-2}`));
    expect(web.healthchecks[0]).toMatchObject({ name: 'amqp', dependency: 'rabbit_mq-2', action: 'none' });
  });

  it('allows action none said outright; a check without it keeps restart and has no dependency key', async () => {
    const web = await loadOne(
      checks(
        "- {name: amqp, tcp: '127.0.0.1:5672', dependency: rabbitmq, action: none}",
        "- {name: api, tcp: '127.0.0.1:8774'}",
      ),
    );
    expect(web.healthchecks.map((c) => [c.name, c.action, c.dependency])).toEqual([
      ['amqp', 'none', 'rabbitmq'],
      ['api', 'restart', undefined],
    ]);
    expect(Object.keys(web.healthchecks[1]!)).not.toContain('dependency');
  });

  it('takes the name at its longest (63 characters)', async () => {
    const name = 'a'.repeat(63);
    const web = await loadOne(checks(`- {name: amqp, tcp: '127.0.0.1:5672', dependency: ${name}}`));
    expect(web.healthchecks[0]!.dependency).toBe(name);
  });

  it.each([
    ['upper case', 'RabbitMQ'],
    ['a dot', 'rabbit.mq'],
    ['64 characters', 'a'.repeat(64)],
    ['empty', "''"],
    ['a number', '5672'],
    ['a list', '[rabbitmq]'],
  ])('refuses a name with %s', async (_what, value) => {
    const problems = await problemsOf(checks(`- {name: amqp, tcp: '127.0.0.1:5672', dependency: ${value}}`));
    expect(problems.map((p) => p.where)).toEqual(['s.yaml:6: containers.web.healthchecks[0].dependency']);
    expect(problems[0]!.message).toMatch(/dependency name|must be a string|must not be empty/);
    expect(problems[0]!.code).toBe('CHECK_INVALID');
  });

  it.each(['restart', 'stop'])(
    'refuses action %s on a dependency check, at the action line',
    async (action) => {
      const problems = await problemsOf(
        checks('- name: amqp', "  tcp: '127.0.0.1:5672'", '  dependency: rabbitmq', `  action: ${action}`),
      );
      expect(problems.map((p) => `${p.where}: ${p.message}`)).toEqual([
        `s.yaml:9: containers.web.healthchecks[0].action: a dependency check never restarts or stops its container: action must be none (got ${action}), or leave it out`,
      ]);
      expect(problems[0]!.code).toBe('CHECK_INVALID');
    },
  );
});

describe('through the check library', () => {
  const LIB = [
    'checks:',
    '  rabbitmq:',
    '    exec: [/spcd/healthchecks/healthcheck_port]',
    '    dependency: rabbitmq',
    '  port:',
    '    exec: [/spcd/healthchecks/healthcheck_port]',
    '    action: restart',
    '  listen:',
    '    exec: [/spcd/healthchecks/healthcheck_listen]',
    '',
  ].join('\n');

  async function withLibrary(text: string) {
    const lib = await writeDir({ 'lib.yaml': LIB });
    const dir = await writeDir({ 's.yaml': text });
    return { lib, ...(await validateDir({ setsDir: dir, checkLibraryFile: join(lib, 'lib.yaml') })) };
  }

  it.each([
    ['a library entry with dependency gives it to each use', 'use: rabbitmq, name: amqp', 'amqp', 'rabbitmq'],
    [
      'a use may add dependency to a library check that has none',
      'use: listen, name: db, dependency: database',
      'db',
      'database',
    ],
  ])('%s, with action none', async (_what, entry, name, dependency) => {
    const { problems, desired } = await withLibrary(checks(`- {${entry}, args: [nova-compute, "5672"]}`));
    expect(problems).toEqual([]);
    const check = desired!.sets[0]!.containers[0]!.healthchecks[0]!;
    expect(check).toMatchObject({ name, dependency, action: 'none' });
  });

  it('a use that says action restart over a dependency library check is refused at its own line', async () => {
    const { problems, lib } = await withLibrary(
      checks('- use: rabbitmq', '  args: [nova-compute, "5672"]', '  action: restart'),
    );
    expect(problems.map((p) => `${p.file.slice(lib.length)}:${p.line}: ${p.path}`)).toHaveLength(1);
    expect(problems[0]!.line).toBe(8);
    expect(problems[0]!.path).toBe('containers.web.healthchecks[0].action');
    expect(problems[0]!.message).toMatch(/^a dependency check never restarts or stops its container/);
  });

  it("a use that adds dependency over a library check's action restart is refused at the library's line", async () => {
    const { problems, lib } = await withLibrary(
      checks('- {use: port, dependency: rabbitmq, args: [nova-compute, "5672"]}'),
    );
    expect(problems.map((p) => `${p.file.slice(lib.length + 1)}:${p.line}`)).toEqual(['lib.yaml:7']);
    expect(problems[0]!.message).toMatch(/action must be none \(got restart\)/);
  });

  it('a library entry that says both is refused in the library file', async () => {
    const lib = await writeDir({
      'lib.yaml': 'checks:\n  mq:\n    tcp: "127.0.0.1:5672"\n    dependency: rabbitmq\n    action: stop\n',
    });
    const problems = await problemsOf('set: s\n', { checkLibraryFile: join(lib, 'lib.yaml') });
    expect(problems.map((p) => `${p.file.slice(lib.length + 1)}:${p.line}: ${p.path}`)).toEqual([
      'lib.yaml:5: checks.mq.action',
    ]);
  });
});

describe('the spec hash', () => {
  it('checks, with or without dependency, change no spec hash (they are not engine-facing)', async () => {
    const bare = await loadOne(container());
    const plain = await loadOne(checks("- {name: amqp, tcp: '127.0.0.1:5672'}"));
    // The golden value of this definition, as before checks knew dependency.
    expect(specHash(plain)).toBe('v2-f22a5ec42fa284bee5a02a35dee8fc8a');
    expect(specHash(plain)).toBe(specHash(bare));
    const dep = await loadOne(checks("- {name: amqp, tcp: '127.0.0.1:5672', dependency: rabbitmq}"));
    expect(specHash(dep)).toBe(specHash(bare));
  });
});
