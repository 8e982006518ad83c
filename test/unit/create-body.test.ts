import { describe, expect, it } from 'vitest';
import { createBody } from '../../agent/engine/create-options.js';
import { CONTAINER_FIELDS, FIELD_ROWS } from '../../agent/model/container-fields.js';
import { canonicalJson, sha256Hex, SPEC_HASH_FIELDS } from '../../agent/model/hash.js';
import { LABEL, type Identity } from '../../agent/model/labels.js';
import { loadContainers, SHIPPED_LOADS } from '../support/shipped-sets.js';
import { containerSpec, RICH } from '../support/spec.js';
import { problemsOf } from '../fixtures/spec/helpers.js';

const identity: Identity = {
  instance: 'i',
  set: 's',
  container: 'c',
  generation: 3,
  specHash: 'v2-x',
  configHash: 'none',
};
const digest = (v: unknown): string => sha256Hex(canonicalJson(v)).slice(0, 32);

/**
 * The body as BODIES recorded it, before the image reference was also kept
 * as a label (spcd.image, which Podman needs): that label is checked apart.
 */
function recorded(body: ReturnType<typeof createBody>): unknown {
  const { [LABEL.image]: image, ...labels } = body.Labels;
  expect(image).toBe(body.Image);
  return { ...body, Labels: labels };
}

/** createBody's output for every shipped container, as the hand-written createBody (before the field table) gave it. */
const BODIES: Record<string, Record<string, string>> = {
  compute: {
    nova_libvirt: 'b64eaa9cbda9bbd328799a0239084b63',
    nova_compute: '75073b806d0037ff675178d2b3c045ff',
    openvswitch_db: '9486591788de33b0ebf6190fc3b87595',
    openvswitch_vswitchd: '5bb8c8b6bf95b8031a999467d1596456',
    neutron_openvswitch_agent: 'be5eed18094b837e9f1aa7cbe304b988',
  },
  linuxbridge: {
    nova_libvirt: 'b64eaa9cbda9bbd328799a0239084b63',
    nova_compute: '75073b806d0037ff675178d2b3c045ff',
    neutron_linuxbridge_agent: '822896ac9db3b6b512f608e1ba07dfde',
  },
  demo: {
    demo_libvirt: 'b9f38703e5b79d2a0d684fc6a72a1c71',
    demo_compute: '0b30f11df61128013c00ff3c089f6669',
    demo_ovs_agent: 'ffab28036db0e2ccbe281f919adbb85a',
  },
  'demo+no-privileged': {
    demo_libvirt: 'bd195969f66ecdb1da5270d441ffa0c4',
    demo_compute: '0b30f11df61128013c00ff3c089f6669',
    demo_ovs_agent: 'ffab28036db0e2ccbe281f919adbb85a',
  },
  e2e: { spcd_e2e_libvirt: '5079b1eb2dd6c4572cd3daf0b0ef5d83' },
  fixtures: {
    nova_libvirt: 'fd8ab12661ce80fa7811574a64070c10',
    nova_compute: '7ff4f20bee5c22a50d3cff12d6aecc12',
    neutron_ovs_agent: 'c5af1269c5bb5e99152b125db96b9f24',
    demo_web: '0aec51a62e1d4cf2351dbd4811491ee3',
  },
};

describe('the create body comes from the field table', () => {
  for (const [name, opts] of Object.entries(SHIPPED_LOADS)) {
    it(`is what it was for the ${name} sets`, async () => {
      const specs = await loadContainers(opts);
      expect(
        Object.fromEntries(
          specs.map((spec) => [spec.name, digest(recorded(createBody({ spec, identity })))]),
        ),
      ).toEqual(BODIES[name]);
    });
  }

  it('is what it was for a spec that sets every option, with the request extras', () => {
    const body = createBody({
      spec: RICH,
      identity,
      extraEnv: { A: '1' },
      extraBinds: [{ source: '/a', target: '/b', readOnly: true }],
      extraLabels: { x: 'y' },
      name: 'other',
    });
    expect(digest(recorded(body))).toBe('d26bb513d858e1d540e9d147412aaad5');
    expect(body.HostConfig).toMatchObject({
      PidMode: 'host',
      UTSMode: 'host',
      IpcMode: 'host',
      Memory: 4294967296,
    });
  });

  it("runs a bootstrap task's command as it is: in place of any entrypoint, with no Cmd", () => {
    const kolla = containerSpec('x', {
      entrypoint: ['kolla_start'],
      command: ['libvirtd'],
      config: [
        { template: 't.j2', dest: 't', containerPath: '/etc/t', owner: 'root', mode: '0600', format: 'text' },
      ],
    });
    const service = createBody({ spec: kolla, identity });
    expect(service.Entrypoint).toEqual(['kolla_start']);
    expect(service).not.toHaveProperty('Cmd');
    const task = createBody({ spec: kolla, identity, command: ['/bin/bash', '/x/task'] });
    expect(task.Entrypoint).toEqual(['/bin/bash', '/x/task']);
    expect(task).not.toHaveProperty('Cmd');
    // Without kolla config the definition's command is the Cmd.
    const plain = createBody({ spec: containerSpec('y', { command: ['svc', '-v'] }), identity });
    expect(plain.Cmd).toEqual(['svc', '-v']);
  });

  it('leaves namespaces at their default out where docker wants them absent', () => {
    const body = createBody({ spec: containerSpec('x'), identity });
    expect(body.HostConfig).not.toHaveProperty('PidMode');
    expect(body.HostConfig).not.toHaveProperty('UTSMode');
    expect(body.HostConfig).not.toHaveProperty('PidsLimit');
    expect(body.HostConfig.IpcMode).toBe('private');
  });

  it('sends security_opt systempaths=unconfined as the docker CLI does: empty MaskedPaths and ReadonlyPaths', () => {
    const open = createBody({
      spec: containerSpec('x', { securityOpt: ['systempaths=unconfined', 'no-new-privileges'] }),
      identity,
    }).HostConfig;
    // The engine refuses systempaths=unconfined as a SecurityOpt.
    expect(open.SecurityOpt).toEqual(['no-new-privileges']);
    expect(open.MaskedPaths).toEqual([]);
    expect(open.ReadonlyPaths).toEqual([]);
    const plain = createBody({
      spec: containerSpec('x', { securityOpt: ['apparmor=unconfined'] }),
      identity,
    });
    expect(plain.HostConfig.SecurityOpt).toEqual(['apparmor=unconfined']);
    expect(plain.HostConfig).not.toHaveProperty('MaskedPaths');
    expect(plain.HostConfig).not.toHaveProperty('ReadonlyPaths');
  });

  it('maps pids_limit to HostConfig.PidsLimit, and the hash sees it only when set', async () => {
    expect(createBody({ spec: containerSpec('x', { pidsLimit: 64 }), identity }).HostConfig.PidsLimit).toBe(
      64,
    );
    const problems = await problemsOf(
      'set: s\ncontainers:\n  web:\n    image: img:1\n    pids_limit: 0\n  db:\n    image: img:1\n    pids_limit: many\n',
    );
    expect(problems.map((p) => `${p.line}: ${p.path}: ${p.message}`)).toEqual([
      '5: containers.web.pids_limit: must be between 1 and 4194304, not 0',
      '8: containers.db.pids_limit: must be an integer, not a string',
    ]);
  });

  it('every row that reaches the engine is hashed, and every hashed row reaches the engine', () => {
    for (const [field, def] of FIELD_ROWS) {
      expect(SPEC_HASH_FIELDS[field], field).toBe(def.engine !== 'none');
      // hash-neutral when unused: no default, or one the hash leaves out
      const neutral =
        !('default' in def) ||
        def.hash === 'unless-default' ||
        def.default === false ||
        (typeof def.default === 'object' && Object.keys(def.default as object).length === 0);
      if (def.hash === true && !neutral)
        expect(['network', 'stopSignal', 'stopGraceMs'], field).toContain(field);
    }
    expect(CONTAINER_FIELDS.pidsLimit.engine).toEqual({ host: 'PidsLimit' });
  });
});
