/** Rejected specs: field values, health checks, and what loadDesired throws. */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isSpcdError } from '../../agent/errors.js';
import { loadDesired } from '../../agent/spec/load.js';
import {
  cleanupAfterEach,
  only,
  container,
  LIBRARY_FILE,
  problemsOf,
  writeDir,
} from '../fixtures/spec/helpers.js';

cleanupAfterEach();

describe('field values', () => {
  const cases: [string, string[], string, string][] = [
    [
      'relative bind source',
      ['binds:', '  - /a:/b', '  - /c:/d', '  - etc/x:/etc/x'],
      's.yaml:8: containers.web.binds[2]',
      '"etc/x" is not an absolute host path or a volume name ([a-zA-Z0-9][a-zA-Z0-9_.-]+)',
    ],
    [
      'relative bind target (long form)',
      ['binds: [{source: /a, target: b}]'],
      's.yaml:5: containers.web.binds[0].target',
      '"b" must be an absolute path',
    ],
    [
      '".." in a bind',
      ['binds: ["/a/../etc:/b"]'],
      's.yaml:5: containers.web.binds[0]',
      '"/a/../etc" must not contain "..", "." or empty segments, nor end in "/"',
    ],
    [
      'unknown bind option',
      ['binds: ["/a:/b:ro,z"]'],
      's.yaml:5: containers.web.binds[0]',
      'unknown bind option "z" (allowed: ro, rw, rprivate, private, rshared, shared, rslave, slave)',
    ],
    [
      'ro and rw together',
      ['binds: ["/a:/b:ro,rw"]'],
      's.yaml:5: containers.web.binds[0]',
      'options "ro,rw" give ro/rw more than once',
    ],
    [
      'two mounts on one target',
      ['binds: ["/a:/t"]', 'tmpfs: [/t]'],
      's.yaml:6: containers.web.tmpfs[0]',
      'target /t is already mounted by containers.web.binds[0]',
    ],
    [
      'bad device permissions',
      ['devices: ["/dev/kvm:/dev/kvm:rwx"]'],
      's.yaml:5: containers.web.devices[0]',
      'permissions "rwx" must be a combination of r, w, m',
    ],
    [
      'pid enum',
      ['pid: container'],
      's.yaml:5: containers.web.pid',
      'must be one of host, private (got "container")',
    ],
    [
      'ipc enum',
      ['ipc: none'],
      's.yaml:5: containers.web.ipc',
      'must be one of host, private, shareable (got "none")',
    ],
    [
      'cgroupns enum',
      ['cgroupns: yes'],
      's.yaml:5: containers.web.cgroupns',
      'must be one of host, private (got "yes")',
    ],
    [
      'network mode',
      ['network: "container:x"'],
      's.yaml:5: containers.web.network',
      'must be host, none, bridge or a network name (got "container:x")',
    ],
    [
      'role enum',
      ['role: libvirt'],
      's.yaml:5: containers.web.role',
      'must be one of service, hypervisor (got "libvirt")',
    ],
    [
      'reserved label',
      ['labels:', '  team: x', '  spcd.generation: "7"'],
      's.yaml:7: containers.web.labels["spcd.generation"]',
      'label keys starting with "spcd." are reserved for spcd',
    ],
    [
      'bad env name',
      ['environment: {"A-B": x}'],
      's.yaml:5: containers.web.environment.A-B',
      '"A-B" is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)',
    ],
    [
      'unknown capability',
      ['cap_add: [SYS_ADMN]'],
      's.yaml:5: containers.web.cap_add[0]',
      '"SYS_ADMN" is not a Linux capability',
    ],
    [
      'unknown ulimit',
      ['ulimits: {files: 10}'],
      's.yaml:5: containers.web.ulimits.files',
      'unknown ulimit "files" (allowed: as, core, cpu, data, fsize, locks, memlock, msgqueue, nice, nofile, nproc, rss, rtprio, rttime, sigpending, stack)',
    ],
    [
      'soft above hard',
      ['ulimits: {nofile: {soft: 10, hard: 5}}'],
      's.yaml:5: containers.web.ulimits.nofile',
      'soft limit 10 is above hard limit 5 (-1 means unlimited)',
    ],
    [
      'bad size',
      ['memory: 64x'],
      's.yaml:5: containers.web.memory',
      '"64x" is not a size (e.g. 64m, 1g, 512k, or bytes)',
    ],
    [
      'memory below docker minimum',
      ['memory: 1m'],
      's.yaml:5: containers.web.memory',
      '"1m" must be between 6291456 and 9007199254740991 bytes',
    ],
    [
      'bad duration',
      ['stop_grace_period: soon'],
      's.yaml:5: containers.web.stop_grace_period',
      '"soon" is not a duration (e.g. 500ms, 10s, 5m, 1h, or milliseconds)',
    ],
    [
      'bad signal',
      ['stop_signal: TERM'],
      's.yaml:5: containers.web.stop_signal',
      '"TERM" is not a signal name like SIGTERM',
    ],
    [
      'relative working_dir',
      ['working_dir: app'],
      's.yaml:5: containers.web.working_dir',
      '"app" must be an absolute path',
    ],
    ['empty command', ['command: []'], 's.yaml:5: containers.web.command', 'must not be an empty list'],
    [
      'config dest with ..',
      ['config: [{template: t.j2, dest: ../x.conf, container_path: /etc/x.conf}]'],
      's.yaml:5: containers.web.config[0].dest',
      '"../x.conf" must not contain "..", "." or empty segments',
    ],
    [
      'absolute config dest',
      ['config: [{template: t.j2, dest: /etc/x.conf, container_path: /etc/x.conf}]'],
      's.yaml:5: containers.web.config[0].dest',
      '"/etc/x.conf" must be a relative path',
    ],
    [
      'relative container_path',
      ['config: [{template: t.j2, dest: x.conf, container_path: x.conf}]'],
      's.yaml:5: containers.web.config[0].container_path',
      '"x.conf" must be an absolute path',
    ],
    [
      'missing container_path',
      ['config:', '  - {template: t.j2, dest: x.conf}'],
      's.yaml:6: containers.web.config[0]',
      'container_path is required',
    ],
    [
      'unquoted mode',
      ['config: [{template: t.j2, dest: x.conf, container_path: /x, mode: 600}]'],
      's.yaml:5: containers.web.config[0].mode',
      'must be a quoted octal string like "0600", not number',
    ],
    [
      'bootstrap exit code',
      ['bootstrap: [{name: sync, command: [x], accept_exit_codes: [256]}]'],
      's.yaml:5: containers.web.bootstrap[0].accept_exit_codes[0]',
      'must be between 0 and 255, not 256',
    ],
    [
      '__proto__ key',
      ['environment: {__proto__: x}'],
      's.yaml:5: containers.web.environment.__proto__',
      'key "__proto__" is not allowed',
    ],
  ];
  it.each(cases)('rejects %s', async (_name, fields, where, message) => {
    const p = await only(container(...fields));
    expect(`${p.where}: ${p.message}`).toBe(`${where}: ${message}`);
    expect(p.code).toBe('SPEC_INVALID');
  });
});

describe('health checks', () => {
  const cases: [string, string[], string, string][] = [
    [
      'no probe',
      ['- {name: x, interval: 10s}'],
      's.yaml:6: containers.web.healthchecks[0]',
      'needs exactly one probe: exec, shell, tcp, http, process or established',
    ],
    [
      'two probes',
      ['- {name: x, exec: [/bin/true], tcp: "127.0.0.1:1"}'],
      's.yaml:6: containers.web.healthchecks[0].tcp',
      'gives more than one probe (exec, tcp); keep exactly one',
    ],
    [
      'missing name',
      ['- {exec: [/bin/true]}'],
      's.yaml:6: containers.web.healthchecks[0]',
      'name is required (or use a library check with use)',
    ],
    [
      'duplicate name',
      ['- {name: x, exec: [/bin/true]}', '- {name: x, exec: [/bin/false]}'],
      's.yaml:7: containers.web.healthchecks[1]',
      'check name "x" is already used by containers.web.healthchecks[0]',
    ],
    [
      'timeout >= interval',
      ['- name: x', '  exec: [/bin/true]', '  interval: 5s', '  timeout: 5s'],
      's.yaml:9: containers.web.healthchecks[0].timeout',
      'timeout (5000 ms) must be shorter than interval (5000 ms)',
    ],
    [
      'interval below 1 s',
      ['- {name: x, exec: [/bin/true], interval: 500ms, timeout: 100ms}'],
      's.yaml:6: containers.web.healthchecks[0].interval',
      '"500ms" must be at least 1000 ms',
    ],
    [
      'threshold below 1',
      ['- {name: x, exec: [/bin/true], failure_threshold: 0}'],
      's.yaml:6: containers.web.healthchecks[0].failure_threshold',
      'must be between 1 and 1000, not 0',
    ],
    [
      'interval and cron',
      ['- {name: x, exec: [/bin/true], interval: 10s, cron: "* * * * *"}'],
      's.yaml:6: containers.web.healthchecks[0].cron',
      'interval and cron are mutually exclusive',
    ],
    [
      'bad cron',
      ['- {name: x, exec: [/bin/true], cron: "61 * * * * *"}'],
      's.yaml:6: containers.web.healthchecks[0].cron',
      '"61 * * * * *" is not a valid cron expression',
    ],
    [
      'bad action',
      ['- {name: x, exec: [/bin/true], action: kill}'],
      's.yaml:6: containers.web.healthchecks[0].action',
      'must be one of restart, stop, none (got "kill")',
    ],
    [
      'max_output over 1 MiB',
      ['- {name: x, exec: [/bin/true], max_output: 2m}'],
      's.yaml:6: containers.web.healthchecks[0].max_output',
      '"2m" must be between 0 and 1048576 bytes',
    ],
    [
      'bad tcp',
      ['- {name: x, tcp: "localhost"}'],
      's.yaml:6: containers.web.healthchecks[0].tcp',
      '"localhost" is not "host:port" (e.g. 127.0.0.1:5672 or [::1]:5672)',
    ],
    [
      'bad http',
      ['- {name: x, http: "ftp://h/"}'],
      's.yaml:6: containers.web.healthchecks[0].http',
      '"ftp://h/" must be an http:// or https:// URL',
    ],
    [
      'expect_status without http',
      ['- {name: x, exec: [/bin/true], expect_status: [200]}'],
      's.yaml:6: containers.web.healthchecks[0].expect_status',
      'expect_status is only allowed with an http probe',
    ],
    [
      'long process name',
      ['- {name: x, process: nova-compute-long-name}'],
      's.yaml:6: containers.web.healthchecks[0].process',
      '"nova-compute-long-name" is not a process name as in /proc/<pid>/comm (at most 15 characters, no "/")',
    ],
    [
      'exec as a string',
      ['- {name: x, exec: "virsh version"}'],
      's.yaml:6: containers.web.healthchecks[0].exec',
      'must be a list, not a string',
    ],
    [
      'args without use',
      ['- {name: x, exec: [/bin/true], args: ["1"]}'],
      's.yaml:6: containers.web.healthchecks[0].args',
      'args is only allowed together with use',
    ],
    [
      'unknown template',
      ['- {use: portt}'],
      's.yaml:6: containers.web.healthchecks[0].use',
      'no check named "portt" in the check library (known: curl, filemod, listen, port, process, socket)',
    ],
    [
      'args on a non-exec template result',
      ['- {use: port, tcp: "127.0.0.1:1", args: ["1"]}'],
      's.yaml:6: containers.web.healthchecks[0].args',
      'args need a check whose probe is exec',
    ],
  ];
  it.each(cases)('rejects %s', async (_name, lines, where, message) => {
    const p = await only(container('healthchecks:', ...lines.map((l) => `  ${l}`)), {
      checkLibraryFile: LIBRARY_FILE,
    });
    expect(`${p.where}: ${p.message}`).toBe(`${where}: ${message}`);
    expect(p.code).toBe('CHECK_INVALID');
  });

  it('rejects use: without a configured library', async () => {
    const p = await only(container('healthchecks: [{use: port, args: ["1"]}]'));
    expect(`${p.where}: ${p.message}`).toBe(
      's.yaml:5: containers.web.healthchecks[0].use: no check library is configured, so "use: port" cannot be resolved',
    );
  });

  it('reports problems in the library file at its own lines', async () => {
    const lib = await writeDir({
      'lib.yaml': 'checks:\n  port:\n    exec: [/x]\n  bad:\n    exec: [/y]\n    interval: 1s\n',
    });
    const problems = await problemsOf('set: s\n', { checkLibraryFile: join(lib, 'lib.yaml') });
    expect(problems.map((p) => `${p.file.slice(lib.length + 1)}:${p.line}: ${p.path}: ${p.message}`)).toEqual(
      ['lib.yaml:6: checks.bad.interval: timeout (5000 ms) must be shorter than interval (1000 ms)'],
    );
    expect(problems[0]!.code).toBe('CHECK_INVALID');
  });
});

describe('loadDesired', () => {
  it('throws the first problem with every problem in details', async () => {
    const dir = await writeDir({ 's.yaml': container('pid: hots', 'ipc: none') });
    const err = await loadDesired({ setsDir: dir }).catch((e: unknown) => e);
    expect(isSpcdError(err, 'SPEC_INVALID')).toBe(true);
    if (!isSpcdError(err)) return;
    expect(err.message).toBe(
      `${join(dir, 's.yaml')}:5: containers.web.pid: must be one of host, private (got "hots") (and 1 more problem)`,
    );
    expect(err.details.problems).toHaveLength(2);
  });
});
