import { describe, expect, it } from 'vitest';
import { DockerEngine } from '../../agent/engine/docker.js';
import { silentLogger } from '../../agent/log.js';
import { standInSockets } from '../support/engine-stand-in.js';

/**
 * The engine adapter's volume calls and its container removal against a
 * stand-in Docker API on a unix socket (no Docker engine): what each sends.
 */
const listen = standInSockets();

interface Seen {
  method: string;
  url: string;
  body: string;
}

/** A stand-in that knows the volumes in `volumes` (name -> labels) and records every request. */
async function standIn(
  volumes: Map<string, Record<string, string>>,
): Promise<{ engine: DockerEngine; seen: Seen[] }> {
  const seen: Seen[] = [];
  const socket = await listen((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const url = (req.url ?? '').replace(/^\/v[0-9.]+/, '');
      seen.push({ method: req.method ?? '', url, body });
      const json = (status: number, value: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      if (req.method === 'DELETE') return json(204, {});
      // dockerode sends a volume's create options as the body and again in the query.
      if (url.startsWith('/volumes/create?')) {
        const b = JSON.parse(body) as { Name: string; Labels: Record<string, string> };
        if (!volumes.has(b.Name)) volumes.set(b.Name, b.Labels);
        return json(201, { Name: b.Name, Driver: 'local', Labels: volumes.get(b.Name) });
      }
      const name = /^\/volumes\/([^/?]+)$/.exec(url)?.[1];
      const labels = name === undefined ? undefined : volumes.get(name);
      if (!labels) return json(404, { message: 'no such volume' });
      json(200, { Name: name, Driver: 'local', Labels: labels });
    });
  });
  return { engine: new DockerEngine({ socketPath: socket, log: silentLogger() }), seen };
}

describe('DockerEngine and volumes', () => {
  it('removes a container with v=false: its volumes stay', async () => {
    const { engine, seen } = await standIn(new Map());
    await engine.remove('c'.repeat(64));
    expect(seen).toHaveLength(1);
    const url = new URL(`http://x${seen[0]!.url}`);
    expect(seen[0]!.method).toBe('DELETE');
    expect(url.searchParams.get('v')).toBe('false');
    expect(url.searchParams.get('force')).toBe('true');
  });

  it('answers undefined for a missing volume, and its labels for one that is there', async () => {
    const { engine } = await standIn(new Map([['kolla_logs', { by: 'kolla' }]]));
    expect(await engine.volumeInfo('nova_compute')).toBeUndefined();
    expect(await engine.volumeInfo('kolla_logs')).toEqual({
      name: 'kolla_logs',
      driver: 'local',
      labels: { by: 'kolla' },
    });
  });

  it('creates a local volume with its labels and answers what the engine then holds', async () => {
    const volumes = new Map([['old', { by: 'kolla' }]]);
    const { engine, seen } = await standIn(volumes);
    const made = await engine.createVolume({ name: 'fresh', labels: { 'spcd.volume.created-by': 'spcd' } });
    expect(made.labels).toEqual({ 'spcd.volume.created-by': 'spcd' });
    expect(JSON.parse(seen[0]!.body)).toMatchObject({
      Name: 'fresh',
      Driver: 'local',
      Labels: { 'spcd.volume.created-by': 'spcd' },
    });
    // One made meanwhile by someone else: answered with its own labels, as the engine keeps them.
    expect((await engine.createVolume({ name: 'old', labels: { mine: 'x' } })).labels).toEqual({
      by: 'kolla',
    });
  });
});
