/**
 * A small OpenStack REST client for the OpenStack end-to-end test
 * (test/integration/openstack-e2e.test.ts): a Keystone token and its catalog,
 * then Glance, Nova and Neutron over HTTP on 127.0.0.1. No `openstack` CLI: each CLI
 * call costs seconds of Python start-up on this machine.
 */
import { readFileSync } from 'node:fs';

export interface Credentials {
  readonly authUrl: string;
  readonly username: string;
  readonly password: string;
  readonly project: string;
}

export interface Server {
  id: string;
  name: string;
  status: string;
  'OS-EXT-STS:power_state'?: number;
  'OS-EXT-STS:task_state'?: string | null;
  'OS-EXT-SRV-ATTR:instance_name'?: string;
  'OS-EXT-SRV-ATTR:host'?: string;
  fault?: { message: string; details?: string };
}

export interface NetworkAgent {
  id: string;
  agent_type: string;
  binary: string;
  host: string;
  alive: boolean;
  admin_state_up: boolean;
}

export interface Port {
  id: string;
  network_id: string;
  device_id: string;
  device_owner: string;
  status: string;
  mac_address: string;
  fixed_ips: { subnet_id: string; ip_address: string }[];
  'binding:vif_type'?: string;
  'binding:host_id'?: string;
  /** Neutron's standard attribute: bumped on every change of the port (its status too). */
  revision_number?: number;
}

export interface ComputeService {
  id: number | string;
  binary: string;
  host: string;
  state: string;
  status: string;
  updated_at: string | null;
  disabled_reason: string | null;
}

const REQUEST_TIMEOUT_MS = 60_000;
/** Nova API microversion: 2.37 allows `networks: "none"`. */
export const NOVA_MICROVERSION = '2.37';

export class OpenStack {
  private token = '';
  private expires = 0;
  private endpoints: Record<string, string> = {};

  constructor(private readonly creds: Credentials) {}

  private async authenticate(): Promise<void> {
    const body = {
      auth: {
        identity: {
          methods: ['password'],
          password: {
            user: { name: this.creds.username, domain: { name: 'Default' }, password: this.creds.password },
          },
        },
        scope: { project: { name: this.creds.project, domain: { name: 'Default' } } },
      },
    };
    const res = await fetch(`${this.creds.authUrl}/auth/tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    if (res.status !== 201)
      throw new Error(`keystone: POST /auth/tokens answered ${res.status}: ${await res.text()}`);
    const j = (await res.json()) as {
      token: {
        expires_at: string;
        catalog: { type: string; endpoints: { interface: string; url: string }[] }[];
      };
    };
    this.token = res.headers.get('x-subject-token') ?? '';
    this.expires = Date.parse(j.token.expires_at);
    this.endpoints = {};
    for (const s of j.token.catalog) {
      const e = s.endpoints.find((x) => x.interface === 'public') ?? s.endpoints[0];
      if (e) this.endpoints[s.type] = e.url.replace(/\/$/, '');
    }
  }

  /** The catalog's public URL of a service type (compute, image, placement, identity). */
  async endpoint(type: string): Promise<string> {
    if (!this.token || Date.now() > this.expires - 300_000) await this.authenticate();
    if (!this.endpoints[type]) await this.authenticate();
    const url = this.endpoints[type];
    if (!url) throw new Error(`no ${type} endpoint in Keystone's catalog: ${JSON.stringify(this.endpoints)}`);
    return url;
  }

  /** One request; throws on a status outside `ok`, naming the request and the answer. */
  async request(
    type: string,
    method: string,
    path: string,
    opts: { json?: unknown; body?: Buffer; contentType?: string; ok?: number[]; microversion?: string } = {},
  ): Promise<{ status: number; json: unknown; headers: Headers }> {
    const base = await this.endpoint(type);
    const headers: Record<string, string> = { 'x-auth-token': this.token, accept: 'application/json' };
    if (opts.microversion) headers['openstack-api-version'] = `compute ${opts.microversion}`;
    let body: string | Blob | undefined;
    if (opts.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.json);
    } else if (opts.body) {
      headers['content-type'] = opts.contentType ?? 'application/octet-stream';
      body = new Blob([new Uint8Array(opts.body)]);
    }
    const res = await fetch(`${base}${path}`, {
      method,
      headers,
      body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.text();
    const ok = opts.ok ?? [200, 201, 202, 204];
    if (!ok.includes(res.status))
      throw new Error(`${type}: ${method} ${path} answered ${res.status}: ${text.slice(0, 500)}`);
    let json: unknown = undefined;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = text;
    }
    return { status: res.status, json, headers: res.headers };
  }

  /** Creates a Glance image with `props` and uploads `file`; returns its id once active. */
  async uploadImage(props: Record<string, string>, file: string): Promise<string> {
    const created = await this.request('image', 'POST', '/v2/images', { json: props, ok: [201] });
    const id = (created.json as { id: string }).id;
    await this.request('image', 'PUT', `/v2/images/${id}/file`, { body: readFileSync(file), ok: [204] });
    const img = await this.request('image', 'GET', `/v2/images/${id}`);
    const status = (img.json as { status: string }).status;
    if (status !== 'active') throw new Error(`glance image ${props.name} is ${status} after its upload`);
    return id;
  }

  async createFlavor(name: string, ramMb: number, vcpus: number, diskGb: number): Promise<string> {
    const r = await this.request('compute', 'POST', '/flavors', {
      json: { flavor: { name, ram: ramMb, vcpus, disk: diskGb } },
    });
    return (r.json as { flavor: { id: string } }).flavor.id;
  }

  /**
   * Boots a server with a port on `nic.network` (Nova makes it), on the port
   * `nic.port` (made before), or with no network (microversion 2.37); returns its id.
   */
  async boot(
    name: string,
    imageRef: string,
    flavorRef: string,
    nic?: { network: string } | { port: string },
  ): Promise<string> {
    const networks = !nic ? 'none' : 'port' in nic ? [{ port: nic.port }] : [{ uuid: nic.network }];
    const r = await this.request('compute', 'POST', '/servers', {
      json: { server: { name, imageRef, flavorRef, networks } },
      microversion: NOVA_MICROVERSION,
    });
    return (r.json as { server: { id: string } }).server.id;
  }

  /** The server, or undefined once Nova no longer knows it. */
  async server(id: string): Promise<Server | undefined> {
    const r = await this.request('compute', 'GET', `/servers/${id}`, {
      ok: [200, 404],
      microversion: NOVA_MICROVERSION,
    });
    return r.status === 404 ? undefined : (r.json as { server: Server }).server;
  }

  async action(id: string, action: 'os-stop' | 'os-start'): Promise<void> {
    await this.request('compute', 'POST', `/servers/${id}/action`, { json: { [action]: null } });
  }

  async deleteServer(id: string): Promise<void> {
    await this.request('compute', 'DELETE', `/servers/${id}`, { ok: [204, 404] });
  }

  async computeServices(): Promise<ComputeService[]> {
    const r = await this.request('compute', 'GET', '/os-services?binary=nova-compute', {
      microversion: NOVA_MICROVERSION,
    });
    return (r.json as { services: ComputeService[] }).services;
  }

  /**
   * Neutron 21 (Zed) answers its first GET /v2.0/ports with a 500
   * ("type object 'Port' has no attribute 'port_forwardings'") until some
   * other query has configured its SQLAlchemy mappers; Nova's server views
   * list ports. One network list first (a token is fetched again when the
   * catalog had no network endpoint yet).
   */
  async warmNeutron(): Promise<void> {
    await this.request('network', 'GET', '/v2.0/networks');
  }

  async agents(): Promise<NetworkAgent[]> {
    const r = await this.request('network', 'GET', '/v2.0/agents');
    return (r.json as { agents: NetworkAgent[] }).agents;
  }

  /**
   * A network of `type` (flat on `physnet`, or local) with one IPv4 subnet that
   * hands out DHCP (from `pool` when given, else Neutron's whole range); returns the network's id.
   */
  async createNetwork(
    name: string,
    type: 'flat' | 'local',
    physnet: string | undefined,
    cidr: string,
    pool?: { start: string; end: string },
    gateway?: string,
  ): Promise<{ network: string; subnet: string }> {
    const net: Record<string, unknown> = { name, 'provider:network_type': type };
    if (physnet) net['provider:physical_network'] = physnet;
    const n = await this.request('network', 'POST', '/v2.0/networks', { json: { network: net }, ok: [201] });
    const network = (n.json as { network: { id: string } }).network.id;
    const sub = await this.request('network', 'POST', '/v2.0/subnets', {
      json: {
        subnet: {
          name,
          network_id: network,
          ip_version: 4,
          cidr,
          enable_dhcp: true,
          gateway_ip: gateway ?? null,
          ...(pool ? { allocation_pools: [pool] } : {}),
        },
      },
      ok: [201],
    });
    return { network, subnet: (sub.json as { subnet: { id: string } }).subnet.id };
  }

  async ports(query: string): Promise<Port[]> {
    const r = await this.request('network', 'GET', `/v2.0/ports?${query}`);
    return (r.json as { ports: Port[] }).ports;
  }

  /** A port on `network` with the fixed address `ip` of `subnet`; returns its id. */
  async createPort(name: string, network: string, subnet: string, ip: string): Promise<string> {
    const r = await this.request('network', 'POST', '/v2.0/ports', {
      json: { port: { name, network_id: network, fixed_ips: [{ subnet_id: subnet, ip_address: ip }] } },
      ok: [201],
    });
    return (r.json as { port: { id: string } }).port.id;
  }

  /** The security groups of port `id`. */
  async portSecurityGroups(id: string): Promise<string[]> {
    const r = await this.request('network', 'GET', `/v2.0/ports/${id}`);
    return (r.json as { port: { security_groups?: string[] } }).port.security_groups ?? [];
  }

  /**
   * An ingress rule on security group `sg`: ICMP over IPv4 from `cidr`. Returns
   * the rule's id, or undefined when the group has that rule already (409: not
   * this caller's to delete).
   */
  async allowIcmpFrom(sg: string, cidr: string): Promise<string | undefined> {
    const rule = {
      security_group_id: sg,
      direction: 'ingress',
      ethertype: 'IPv4',
      protocol: 'icmp',
      remote_ip_prefix: cidr,
    };
    const r = await this.request('network', 'POST', '/v2.0/security-group-rules', {
      json: { security_group_rule: rule },
      ok: [201, 409],
    });
    return r.status === 409
      ? undefined
      : (r.json as { security_group_rule: { id: string } }).security_group_rule.id;
  }

  async deleteSecurityGroupRule(id: string): Promise<void> {
    await this.request('network', 'DELETE', `/v2.0/security-group-rules/${id}`, { ok: [204, 404] });
  }

  async deletePort(id: string): Promise<void> {
    await this.request('network', 'DELETE', `/v2.0/ports/${id}`, { ok: [204, 404] });
  }

  async deleteNetwork(id: string): Promise<void> {
    await this.request('network', 'DELETE', `/v2.0/networks/${id}`, { ok: [204, 404] });
  }

  async deleteImage(id: string): Promise<void> {
    await this.request('image', 'DELETE', `/v2/images/${id}`, { ok: [204, 404] });
  }
}

/** Nova's updated_at ("2026-11-24T02:10:03.000000", UTC without a zone) in epoch ms. */
export function novaTime(s: string | null): number {
  if (!s) return 0;
  return Date.parse(/Z|[+-]\d\d:?\d\d$/.test(s) ? s : `${s}Z`);
}
