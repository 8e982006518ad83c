import { copyFileSync, cpSync, chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TemplateConfig } from '../../agent/config/template-config.js';
import { silentLogger } from '../../agent/log.js';
import { allContainers, type ContainerSpec } from '../../agent/model/spec.js';
import type { RenderedConfig } from '../../agent/render/renderer.js';
import { loadDesired } from '../../agent/spec/load.js';
import { REPO } from './daemon.js';
import { NETWORK_SET } from '../e2e/openstack-e2e-harness.js';
import { ovnNetworkSet } from '../e2e/openstack-ovn.js';

/** Each network variant's shipped compute set and this machine's overrides for it. */
const VARIANTS = {
  lb: { set: ['container-sets', 'linuxbridge', 'compute.yaml'], overrides: 'openstack-compute.yaml' },
  ovs: { set: ['container-sets', 'compute.yaml'], overrides: 'openstack-compute-ovs.yaml' },
  ovn: { set: ['container-sets', 'ovn', 'compute.yaml'], overrides: 'openstack-compute-ovn.yaml' },
} as const;

/**
 * The OpenStack end-to-end test's node as spcd loads it: the test's control
 * and network sets (container-sets-e2e/openstack/) beside the variant's
 * shipped compute set (Linux bridge, Open vSwitch or OVN), with this
 * machine's overrides for it (container-sets-e2e/hosts/) and the test's
 * secrets (copied with mode 0600); for OVN, the network set on ML2/OVN
 * (test/e2e/openstack-ovn.ts). Renders any of its containers.
 */
export async function e2eNode(variant: keyof typeof VARIANTS = 'lb'): Promise<{
  spec: (name: string) => ContainerSpec;
  render: (name: string) => RenderedConfig;
}> {
  const dir = mkdtempSync(join(tmpdir(), 'spcd-e2e-node-'));
  const sets = join(dir, 'sets');
  cpSync(join(REPO, 'container-sets-e2e', 'openstack'), sets, { recursive: true });
  copyFileSync(join(REPO, ...VARIANTS[variant].set), join(sets, 'compute.yaml'));
  if (variant === 'ovn')
    writeFileSync(
      join(sets, 'network.yaml'),
      ovnNetworkSet(readFileSync(NETWORK_SET, 'utf8'), 'spcd_e2e_os_'),
    );
  else rmSync(join(sets, 'ovn.yaml'));
  const secretsFile = join(dir, 'secrets.yaml');
  copyFileSync(join(REPO, 'container-sets-e2e', 'hosts', 'openstack-compute-secrets.yaml'), secretsFile);
  chmodSync(secretsFile, 0o600);
  const config = new TemplateConfig({
    templatesDir: join(REPO, 'templates'),
    configRoot: join(dir, 'config'),
    files: { globalsFile: undefined, secretsFile },
    log: silentLogger(),
  });
  const desired = await loadDesired({
    setsDir: sets,
    checkLibraryFile: join(REPO, 'healthchecks', 'library.yaml'),
    overridesFile: join(REPO, 'container-sets-e2e', 'hosts', VARIANTS[variant].overrides),
  });
  await config.load(desired);
  const spec = (name: string): ContainerSpec => {
    const s = allContainers(desired.sets).find((c) => c.name === name);
    if (!s) throw new Error(`no container ${name} on the end-to-end node`);
    return s;
  };
  return { spec, render: (name) => config.render(spec(name)) };
}
