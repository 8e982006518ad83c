import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { Renderer, renderedFileMap } from '../../agent/render/renderer.js';
import { REPO } from '../support/daemon.js';
import { sampleValues, shippedCompute } from '../support/sample-values.js';

/**
 * The values the shipped compute sets have no safe default for: rendering
 * without one fails and names it; the host's name is left to the service.
 */

const templatesDir = join(REPO, 'templates');
const { containers } = await shippedCompute();
const byName = (n: string): ContainerSpec => {
  const c = containers.find((s) => s.name === n);
  if (!c) throw new Error(`no ${n} in the shipped compute set`);
  return c;
};

let values: Record<string, unknown>;
let secretValues: Set<string>;
beforeAll(async () => {
  ({ values, secretValues } = await sampleValues());
});

/** A copy of the sample values with one dotted path removed. */
function without(path: string): Record<string, unknown> {
  const copy = structuredClone(values);
  const keys = path.split('.');
  let cur = copy as Record<string, unknown>;
  for (const k of keys.slice(0, -1)) cur = cur[k] as Record<string, unknown>;
  delete cur[keys[keys.length - 1] as string];
  return copy;
}

function renderError(container: string, v: Record<string, unknown>): SpcdError {
  try {
    new Renderer({ templatesDir, log: silentLogger() }).renderContainer(byName(container), v, secretValues);
  } catch (err) {
    if (err instanceof SpcdError) return err;
    throw err;
  }
  throw new Error(`${container} rendered without an error`);
}

describe('required template values', () => {
  for (const [path, container, template] of [
    ['my_ip', 'nova_compute', 'nova/nova.conf.j2'],
    ['rabbitmq.hosts', 'nova_compute', 'common/transport_url.j2'],
    ['keystone.internal_url', 'nova_compute', 'nova/nova.conf.j2'],
    ['libvirt.listen_addr', 'nova_libvirt', 'libvirt/libvirtd.conf.j2'],
    ['neutron.ovs.local_ip', 'neutron_openvswitch_agent', 'neutron/openvswitch_agent.ini.j2'],
  ] as const) {
    it(`a missing ${path} fails ${container}'s render, naming the value and the template`, () => {
      const err = renderError(container, without(path));
      expect(err.code).toBe('TEMPLATE_INVALID');
      expect(err.message).toContain(`template ${template}`);
      expect(err.message).toContain(path);
    });
  }

  it('an empty list of RabbitMQ hosts is refused too (a loop would render rabbit:///)', () => {
    const v = structuredClone(values);
    (v.rabbitmq as Record<string, unknown>).hosts = [];
    expect(renderError('nova_compute', v).message).toContain('rabbitmq.hosts is required');
  });

  it("no tunnel types: the agent's local_ip is not needed", () => {
    const v = without('neutron.ovs.local_ip');
    ((v.neutron as Record<string, unknown>).agent as Record<string, unknown>).tunnel_types = [];
    const r = new Renderer({ templatesDir, log: silentLogger() });
    const ini = renderedFileMap(r.renderContainer(byName('neutron_openvswitch_agent'), v, secretValues));
    expect(ini.get('openvswitch_agent.ini')).not.toContain('local_ip');
  });

  it('without host_name, nova and neutron take the machine hostname (no host line)', () => {
    const v = without('host_name');
    const r = new Renderer({ templatesDir, log: silentLogger() });
    const nova = renderedFileMap(r.renderContainer(byName('nova_compute'), v, secretValues));
    const neutron = renderedFileMap(r.renderContainer(byName('neutron_openvswitch_agent'), v, secretValues));
    expect(nova.get('nova.conf')).not.toMatch(/^host\s*=/m);
    expect(neutron.get('neutron.conf')).not.toMatch(/^host\s*=/m);
    expect(nova.get('nova.conf')).toMatch(/^my_ip = 10\.0\.1\.17$/m);
  });

  it('the shipped defaults name no loopback address or localhost for the host itself', async () => {
    const { defaults } = await shippedCompute();
    const text = JSON.stringify(defaults);
    expect(text).not.toMatch(/localhost/);
    const loopbackLeaves = Object.entries(flatten(defaults ?? {})).filter(([, v]) =>
      /(^|[^0-9])127\.\d+\.\d+\.\d+/.test(String(v)),
    );
    // Not even OVSDB: the agent reaches it on its unix socket.
    expect(loopbackLeaves.map(([k]) => k)).toEqual([]);
  });
});

function flatten(v: unknown, prefix = '', out: Record<string, unknown> = {}): Record<string, unknown> {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) flatten(x, prefix ? `${prefix}.${k}` : k, out);
  } else out[prefix] = v;
  return out;
}
