/**
 * The Linux bridge agent's MAC anti-spoofing rules on this host's
 * ebtables-nft (docs/explanation/openstack-network.md, "The agent's MAC rules on ebtables-nft
 * 1.8.9"). In a container of spcd-e2e/openstack:zed with the agent's
 * capabilities and its own network namespace (NetworkMode none), the agent's
 * files as spcd renders them from the shipped Linux bridge compute set with
 * the end-to-end host's overrides (container-sets-e2e/hosts/), copied by
 * Kolla's own kolla_set_configs; the image carries the ebtables wrapper
 * (templates/neutron/ebtables-among-delete.j2, installed by
 * scripts/openstack/build-images.sh). Then Debian's unmodified
 * Neutron code (arp_protect, through its privsep daemon started with `sudo
 * neutron-rootwrap`, as user neutron: the agent's own path) sets one port up
 * twice, as a restarted agent does, and once more with a second MAC.
 * Without the wrapper, on a kernel that refuses ebtables-nft 1.8.9's delete,
 * the second setup never returns (Neutron retries the delete for ever).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../e2e/libvirt-e2e-harness.js';
import { AMONG_DELETE_LOG } from '../e2e/openstack-vm-net.js';
import { execIn, removeById, startContainer, type ExecResult } from '../support/containers.js';
import { REPO, sandbox } from '../support/daemon.js';
import { cleanupInstance } from '../support/docker.js';
import { e2eNode } from '../support/e2e-compute.js';

const IMAGE = 'spcd-e2e/openstack:zed';
const AGENT = 'neutron_linuxbridge_agent';
const BUILD_TIMEOUT_MS = 45 * 60_000;
/** Bounds Neutron's endless retry; a working setup takes seconds (about 15 s under load). */
const SETUP_TIMEOUT_S = 150;
const MAC = 'fa:16:3e:11:22:33';
const PAIR_MAC = 'fa:16:3e:44:55:66';

/**
 * Neutron's arp_protect as the agent calls it for a port (tapA): twice with
 * the same details (the second is a restarted agent's), then twice with an
 * allowed address pair (a second MAC: one rule with both). Prints each step,
 * then `ebtables -L` of the nat table.
 */
const NEUTRON_SCRIPT = `
import sys
from oslo_privsep import priv_context
priv_context.init(root_helper=['sudo', 'neutron-rootwrap', '/etc/neutron/rootwrap.conf'])
from neutron.plugins.ml2.drivers.linuxbridge.agent import arp_protect
port = {'mac_address': '${MAC}', 'fixed_ips': [{'ip_address': '10.251.0.11'}],
        'device_owner': 'compute:nova', 'port_security_enabled': True}
pair = dict(port, allowed_address_pairs=[{'ip_address': '10.251.0.50', 'mac_address': '${PAIR_MAC}'}])
for i, details in enumerate([port, port, pair, pair]):
    arp_protect.setup_arp_spoofing_protection('tapA', details)
    print('setup', i + 1, 'done', flush=True)
print(arp_protect.ebtables(['-L']), flush=True)
`;

const sb = sandbox('lbebt');
const labels = { 'spcd.instance': sb.instance };
const ids: string[] = [];
let id = '';

/** The agent container's files and config.json, as spcd renders them, in a folder for /var/lib/kolla/config_files. */
async function agentConfigFolder(): Promise<string> {
  const r = (await e2eNode()).render(AGENT);
  const dir = join(sb.root, 'config_files');
  for (const f of r.files) {
    mkdirSync(dirname(join(dir, f.dest)), { recursive: true });
    writeFileSync(join(dir, f.dest), f.content, { mode: 0o644 });
  }
  writeFileSync(join(dir, 'config.json'), r.configJson, { mode: 0o644 });
  return dir;
}

const sh = (script: string, user = 'root', timeoutMs = 60_000): Promise<ExecResult> =>
  execIn(id, ['sh', '-c', script], { user, timeoutMs });

/** `ebtables ARGS` through the given program, with its exit code and both outputs. */
async function ebt(program: string, args: string): Promise<ExecResult> {
  return sh(`${program} ${args}`);
}

beforeAll(async () => {
  await run('bash', [join(REPO, 'scripts/openstack/build-images.sh')], BUILD_TIMEOUT_MS).catch(
    (err: Error) => {
      throw new Error(
        `cannot build ${IMAGE} (see /var/cache/spcd-e2e/logs/openstack-zed.log): ${err.message}`,
      );
    },
  );
  const configDir = await agentConfigFolder();
  id = await startContainer({
    name: `${sb.instance}-agent`,
    image: IMAGE,
    labels,
    user: 'root',
    env: ['KOLLA_CONFIG_STRATEGY=COPY_ALWAYS'],
    binds: [`${configDir}:/var/lib/kolla/config_files:ro`],
    networkMode: 'none',
    // The agent's set: NET_ADMIN for ebtables, the rest for neutron's privsep daemon.
    capAdd: ['NET_ADMIN', 'SYS_ADMIN', 'DAC_READ_SEARCH', 'SYS_PTRACE'],
    cmd: ['sleep', 'infinity'],
  });
  ids.push(id);
  // What kolla_start does before the agent starts: the config files, then
  // kolla_extend_start's log folder (owned by the agent's user).
  const set = await sh(
    'kolla_set_configs && mkdir -p /var/log/kolla/neutron && chown neutron:neutron /var/log/kolla/neutron',
  );
  expect(set.exitCode, set.stdout + set.stderr).toBe(0);
}, BUILD_TIMEOUT_MS + 120_000);

afterAll(async () => {
  await removeById(ids);
  await cleanupInstance(sb.instance);
  rmSync(sb.root, { recursive: true, force: true });
});

describe("the Linux bridge agent's MAC rules on this host's ebtables-nft", () => {
  it("the agent finds the wrapper first: root-owned, 0755, ahead of /usr/sbin in sudo's PATH", async () => {
    const r = await sh('stat -c "%U %a" /usr/local/sbin/ebtables && sudo sh -c "command -v ebtables"');
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.split('\n').slice(0, 2)).toEqual(['root 755', '/usr/local/sbin/ebtables']);
  });

  it('calls other than a failed --among delete get what ebtables itself gives', async () => {
    const setup = await ebt(
      '/usr/sbin/ebtables',
      `-t nat -N chainB && /usr/sbin/ebtables -t nat -A chainB -i tapB -s ${MAC} -j RETURN`,
    );
    expect(setup.exitCode, setup.stderr).toBe(0);
    for (const args of [
      '-t nat -L',
      '-t nat -L chainB --Ln',
      // No such rule, with and without an among match: the same failure.
      `-t nat --concurrent -D chainB -i tapB --among-src ${PAIR_MAC} -j RETURN`,
      `-t nat --concurrent -D chainB -i tapB -s ${PAIR_MAC} -j RETURN`,
      '-t nat -L nochain',
    ]) {
      const real = await ebt('/usr/sbin/ebtables', args);
      const wrapped = await ebt('/usr/local/sbin/ebtables', args);
      expect({ args, ...wrapped }).toEqual({ args, ...real });
    }
    const del = await ebt('/usr/local/sbin/ebtables', `-t nat -D chainB -i tapB -s ${MAC} -j RETURN`);
    expect(del.exitCode, del.stderr).toBe(0);
    expect((await ebt('/usr/sbin/ebtables', '-t nat -L chainB')).stdout).not.toContain('tapB');
    expect((await sh(`cat ${AMONG_DELETE_LOG} 2>/dev/null || true`)).stdout).toBe('');
  });

  it(
    "Neutron's own code sets a port up again and again (a restarted agent): each MAC rule replaced",
    async () => {
      // This host's plain ebtables-nft, for the record: can it delete an among rule by specification?
      const probe = await ebt(
        '/usr/sbin/ebtables',
        `-t nat -N probe && /usr/sbin/ebtables -t nat -A probe -i tapP --among-src ${MAC} -j RETURN && ` +
          `/usr/sbin/ebtables -t nat --concurrent -D probe -i tapP --among-src ${MAC} -j RETURN`,
      );
      const version = (await ebt('/usr/sbin/ebtables', '--version')).stdout.trim();
      console.log(
        `${version}: delete of an --among-src rule by specification exit=${probe.exitCode} ${probe.stderr.trim()}`,
      );
      await ebt('/usr/sbin/ebtables', '-t nat -F probe; /usr/sbin/ebtables -t nat -X probe');

      const t0 = Date.now();
      const r = await execIn(id, ['timeout', String(SETUP_TIMEOUT_S), 'python3', '-c', NEUTRON_SCRIPT], {
        user: 'neutron',
        timeoutMs: (SETUP_TIMEOUT_S + 60) * 1000,
      });
      console.log(`neutron arp_protect: exit=${r.exitCode} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      expect(r.exitCode, `${r.stdout}\n${r.stderr.slice(-2000)}`).toBe(0);
      expect(r.stdout).toMatch(/setup 4 done/);
      const macChain = r.stdout.split('Bridge chain: neutronMAC-tapA')[1]?.split('Bridge chain:')[0] ?? '';
      const rules = macChain
        .split('\n')
        .slice(1)
        .map((l) => l.trim())
        .filter(Boolean);
      expect(rules).toEqual([`-i tapA --among-src ${MAC},${PAIR_MAC} -j RETURN`, '-j DROP']);
      expect(r.stdout).toMatch(/-i tapA -j neutronMAC-tapA/);
      expect(r.stdout).toMatch(/--arp-ip-src 10\.251\.0\.11 -j ACCEPT/);

      const log = (await sh(`cat ${AMONG_DELETE_LOG} 2>/dev/null || true`)).stdout
        .split('\n')
        .filter(Boolean);
      console.log(log.join('\n'));
      // Setups 2, 3 and 4 each insert the new rule first (number 1), then the
      // wrapper deletes the one before (number 2): the port always had a MAC rule.
      const old = `-i tapA --among-src ${MAC} -j RETURN`;
      const both = `-i tapA --among-src ${MAC},${PAIR_MAC} -j RETURN`;
      expect(log.map((l) => l.replace(/^\S+ /, ''))).toEqual([
        `table=nat chain=neutronMAC-tapA rule_number=2 rc=0 after_insert_of: ${old} deleted: ${old}`,
        `table=nat chain=neutronMAC-tapA rule_number=2 rc=0 after_insert_of: ${both} deleted: ${old}`,
        `table=nat chain=neutronMAC-tapA rule_number=2 rc=0 after_insert_of: ${both} deleted: ${both}`,
      ]);
      expect((await sh('ls -A /run/ebtables-among-delete')).stdout).toBe('');
    },
    (SETUP_TIMEOUT_S + 120) * 1000,
  );
});
