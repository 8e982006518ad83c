import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { Ajv2020 } from 'ajv/dist/2020.js';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../agent/cli/main.js';
import { containerSetSchema, overridesSchema } from '../../agent/spec/schema.js';
import { cleanupAfterEach, containerYaml, LIBRARY_FILE, problemsOf } from '../fixtures/spec/helpers.js';
import { REPO_ROOT } from '../support/shipped-sets.js';
import { multiLineFlows } from '../support/yaml-style.js';

cleanupAfterEach();

const SET_SCHEMA_FILE = 'container-sets/container-set.schema.json';
const OVERRIDES_SCHEMA_FILE = 'container-sets/container-overrides.schema.json';
/** The shipped sets this test keeps in block style and names the schema in. */
const SHIPPED_SETS = [
  'container-sets/compute.yaml',
  'container-sets/linuxbridge/compute.yaml',
  'container-sets/ovn/compute.yaml',
  'container-sets/demo/demo.yaml',
  'container-sets-e2e/libvirt.yaml',
  'container-sets-e2e/openstack/control.yaml',
  'container-sets-e2e/openstack/network.yaml',
  'container-sets-e2e/openstack/ovn.yaml',
];
const SHIPPED_OVERRIDES = [
  'container-sets/hosts/no-privileged.yaml',
  'container-sets/hosts/ovs-no-privileged.yaml',
  'container-sets/hosts/ovs-userspace-datapath.yaml',
  'container-sets/hosts/linuxbridge-no-privileged.yaml',
  'container-sets-e2e/hosts/openstack-compute.yaml',
];
/** Other valid sets: they must validate too. */
const OTHER_SETS = ['test/fixtures/spec/good/compute.yaml', 'test/fixtures/spec/good/demo.yml'];

const read = (file: string): string => readFileSync(join(REPO_ROOT, file), 'utf8');
const ajv = new Ajv2020({ allErrors: true });
const setValidator = ajv.compile(containerSetSchema());
const overridesValidator = new Ajv2020({ allErrors: true }).compile(overridesSchema());

function schemaErrors(text: string): string[] {
  const ok = setValidator(yaml.load(text));
  return ok ? [] : (setValidator.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ''}`);
}

describe('the published schema', () => {
  it('is what `npm run schema` generates from the validator (run it after changing a field)', () => {
    expect(JSON.parse(read(SET_SCHEMA_FILE))).toEqual(containerSetSchema());
    expect(JSON.parse(read(OVERRIDES_SCHEMA_FILE))).toEqual(overridesSchema());
  });

  it("is what `spcctl schema` prints (no daemon needed); --overrides prints the override file's", async () => {
    for (const [args, schema] of [
      [['schema'], containerSetSchema()],
      [['schema', '--overrides'], overridesSchema()],
    ] as const) {
      let out = '';
      const stdout = new Writable({
        write(chunk: Buffer, _enc, cb): void {
          out += chunk.toString();
          cb();
        },
      });
      const code = await runCli([...args], { stdout, stderr: stdout, env: {} });
      expect(code).toBe(0);
      expect(JSON.parse(out)).toEqual(schema);
    }
  });

  it('describes every field of the table, with its doc line', () => {
    const container = (containerSetSchema().$defs as Record<string, { properties: Record<string, unknown> }>)
      .container!;
    expect(container.properties.pids_limit).toEqual({
      description: expect.stringContaining('pids.max') as unknown,
      type: 'integer',
      minimum: 1,
      maximum: 4_194_304,
    });
  });

  for (const file of [...SHIPPED_SETS, ...OTHER_SETS]) {
    it(`accepts ${file}`, () => {
      expect(schemaErrors(read(file))).toEqual([]);
    });
  }

  for (const file of SHIPPED_OVERRIDES) {
    it(`accepts the override file ${file}`, () => {
      expect(overridesValidator(yaml.load(read(file))), JSON.stringify(overridesValidator.errors)).toBe(true);
    });
  }

  it('accepts named volumes in both forms, a trailing "/" on a target, and a volume read-only', () => {
    const text = c(
      'binds:',
      '  - kolla_logs:/var/log/kolla/',
      '  - nova_libvirt_qemu:/etc/libvirt/qemu:ro',
      '  - { source: libvirtd, target: /var/lib/libvirt, read_only: false }',
      '  - /run:/run:shared',
    );
    expect(schemaErrors(text)).toEqual([]);
  });

  it('is named on the first line of each shipped file, by a path that leads to it', () => {
    for (const [files, schema] of [
      [SHIPPED_SETS, SET_SCHEMA_FILE],
      [SHIPPED_OVERRIDES, OVERRIDES_SCHEMA_FILE],
    ] as const) {
      for (const file of files) {
        const first = read(file).split('\n')[0] ?? '';
        const m = /^# yaml-language-server: \$schema=(\S+)$/.exec(first);
        expect(m, file).not.toBeNull();
        expect(resolve(REPO_ROOT, dirname(file), m![1]!), file).toBe(resolve(REPO_ROOT, schema));
      }
    }
  });
});

describe('the shipped sets stay in block style', () => {
  it('have no flow mapping or sequence over several lines', () => {
    for (const file of [...SHIPPED_SETS, ...SHIPPED_OVERRIDES])
      expect(
        multiLineFlows(read(file)).map((f) => `${file}:${f.line}: multi-line flow ${f.kind}`),
        'write it in block style',
      ).toEqual([]);
  });

  it('the check finds the multi-line flow maps prettier writes, and not brackets in a block scalar', () => {
    const text =
      'a:\n  b:\n    {\n      x: 1,\n      y: 2,\n    }\n  c: [1, 2]\n  d: |\n    { not flow\n  e: [\n    1]\n';
    expect(multiLineFlows(text)).toEqual([
      { line: 3, kind: 'mapping' },
      { line: 10, kind: 'sequence' },
    ]);
  });
});

/** One container field (or a whole file when it starts with "set:"). */
const c = (...fields: string[]): string => containerYaml(fields);

/** Bad inputs: the validator refuses each with a file:line problem, and so does the schema. */
const BOTH_REFUSE: Record<string, string> = {
  'unknown top-level key': 'set: s\nsett: x\n',
  'no set name': 'description: x\n',
  'bad set name': 'set: Bad_Name\n',
  'set: in a subset': 'set: s\nsets:\n  sub:\n    set: sub\n',
  'defaults not a mapping': 'set: s\ndefaults: [1, 2]\n',
  'one-character container name': 'set: s\ncontainers:\n  x:\n    image: a:1\n',
  'unknown container key': c('imagee: a'),
  'no image': 'set: s\ncontainers:\n  web:\n    pid: host\n',
  'bad image': 'set: s\ncontainers:\n  web:\n    image: UPPER/Case\n',
  'privileged as a string': c("privileged: 'yes'"),
  'pid mode': c('pid: shared'),
  'network container:x': c("network: 'container:x'"),
  'unknown capability': c('cap_add: [NOT_A_CAP]'),
  'relative bind source': c('binds: [./relative:/x]'),
  'bind source with a slash, not a volume name': c('binds: [a/b:/x]'),
  'one-character volume name': c('binds: [a:/x]'),
  'volume with a propagation': c('binds: [kolla_logs:/var/log/kolla:shared]'),
  'volume with a propagation (long form)': c(
    'binds: [{ source: kolla_logs, target: /x, propagation: rslave }]',
  ),
  'bind long form unknown key': c('binds: [{ source: /a, target: /b, mode: ro }]'),
  'tmpfs unknown key': c('tmpfs: [{ target: /t, size: 1 }]'),
  'device without host': c('devices: [{ container: /dev/x }]'),
  'unknown ulimit': c('ulimits: { nofiles: 1 }'),
  'ulimit without hard': c('ulimits: { nofile: { soft: 1 } }'),
  'memory not a size': c('memory: lots'),
  'pids_limit 0': c('pids_limit: 0'),
  'pids_limit a string': c('pids_limit: many'),
  'reserved label': c("labels: { spcd.x: 'y' }"),
  'reserved label in upper case': c("labels: { SPCD.x: 'y' }"),
  'environment name': c('environment: { 1BAD: x }'),
  'environment value with a newline': c('environment: { A: "x\\ny" }'),
  'environment value a list': c('environment: { A: [1] }'),
  'stop signal': c('stop_signal: TERM'),
  'stop grace period': c('stop_grace_period: 10 years'),
  role: c('role: vm'),
  'depends_on twice': c('depends_on: [web2, web2]'),
  'check without probe': c('healthchecks: [{ name: x }]'),
  'check with two probes': c("healthchecks: [{ name: x, exec: [a], tcp: 'h:1' }]"),
  'check interval and cron': c("healthchecks: [{ name: x, exec: [a], interval: 10s, cron: '* * * * *' }]"),
  'check without name': c('healthchecks: [{ exec: [a] }]'),
  'check args without use': c('healthchecks: [{ name: x, exec: [a], args: [b] }]'),
  'check action': c('healthchecks: [{ name: x, exec: [a], action: reboot }]'),
  'check expect_status without http': c('healthchecks: [{ name: x, exec: [a], expect_status: [200] }]'),
  'check tcp target': c("healthchecks: [{ name: x, tcp: 'nohost' }]"),
  'check dependency name': c("healthchecks: [{ name: x, tcp: 'h:1', dependency: RabbitMQ }]"),
  'dependency check that restarts': c(
    "healthchecks: [{ name: x, tcp: 'h:1', dependency: rabbitmq, action: restart }]",
  ),
  'config without container_path': c('command: [a]', 'config: [{ template: a.j2, dest: a }]'),
  'config mode a number': c(
    'command: [a]',
    'config: [{ template: a.j2, dest: a, container_path: /a, mode: 600 }]',
  ),
  'config template absolute': c('command: [a]', 'config: [{ template: /a.j2, dest: a, container_path: /a }]'),
  'permission without owner': c('command: [a]', 'permissions: [{ path: /x }]'),
  'bootstrap task without command or environment': c('bootstrap: [{ name: t }]'),
  'bootstrap exit code': c('bootstrap: [{ name: t, command: [a], accept_exit_codes: [256] }]'),
  'census without exec': c('role: hypervisor', 'census: { timeout: 10s }'),
};

/** What only the validator can refuse: rules across fields or files, and bounds on values written with units. */
const VALIDATOR_ONLY: Record<string, string> = {
  'sysctl outside a container namespace': c("sysctls: { vm.swappiness: '1' }"),
  'net sysctl with network host': c('network: host', "sysctls: { net.ipv4.ip_forward: '1' }"),
  'memory under 6m': c('memory: 1m'),
  'depends_on a container that is not there': c('depends_on: [ghost]'),
  'census on a service': c('census: { exec: [virsh, list] }'),
  'config without command': c('config: [{ template: a.j2, dest: a, container_path: /a }]'),
  'bind path with ..': c('binds: [/a/../b:/b]'),
};

describe('bad inputs', () => {
  for (const [name, text] of Object.entries(BOTH_REFUSE)) {
    it(`both refuse: ${name}`, async () => {
      const problems = await problemsOf(text, { checkLibraryFile: LIBRARY_FILE });
      expect(problems.length, 'the validator refuses it').toBeGreaterThan(0);
      expect(problems[0]!.where).toMatch(/^s\.yaml:\d+: /);
      expect(schemaErrors(text), 'the schema refuses it').not.toEqual([]);
    });
  }
  for (const [name, text] of Object.entries(VALIDATOR_ONLY)) {
    it(`the validator refuses, the schema cannot say: ${name}`, async () => {
      expect((await problemsOf(text, { checkLibraryFile: LIBRARY_FILE })).length).toBeGreaterThan(0);
      expect(schemaErrors(text)).toEqual([]);
    });
  }
});
