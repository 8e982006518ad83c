import { describe, expect, it } from 'vitest';
import { DockerEngine } from '../../agent/engine/docker.js';
import { silentLogger } from '../../agent/log.js';
import { encodeIdentity } from '../../agent/model/labels.js';
import { standInSockets } from '../support/engine-stand-in.js';
import { waitFor } from '../support/wait.js';

/**
 * The engine adapter's listing against a stand-in Docker API on a unix
 * socket (no Docker engine): an event that invalidates a cached inspect
 * while the listing waits for another inspect must not drop that container
 * from the listing (the reconciler would take it for missing).
 */
const labels = (container: string): Record<string, string> =>
  encodeIdentity({ instance: 'u', set: 's', container, generation: 1, specHash: 'h', configHash: 'none' });

interface Item {
  id: string;
  name: string;
  status: string;
}

const listen = standInSockets();

async function standIn(items: Item[], hold: Set<string>): Promise<{ socket: string; held: (() => void)[] }> {
  const held: (() => void)[] = [];
  const socket = await listen((req, res) => {
    const answer = (body: unknown): void => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const url = req.url ?? '';
    if (/\/containers\/json/.test(url))
      return answer(
        items.map((i) => ({
          Id: i.id,
          Names: [`/${i.name}`],
          Labels: labels(i.name),
          State: 'running',
          Status: i.status,
        })),
      );
    const m = /\/containers\/([^/]+)\/json/.exec(url);
    const item = items.find((i) => i.id === m?.[1]);
    if (!item) {
      res.writeHead(404).end('{"message":"no such container"}');
      return;
    }
    const body = {
      Id: item.id,
      Name: `/${item.name}`,
      Image: 'sha256:1',
      Config: { Image: 'img:1', Labels: labels(item.name) },
      State: {
        Status: 'running',
        Pid: 7,
        ExitCode: 0,
        StartedAt: '2026-01-01T00:00:00Z',
        FinishedAt: '0001-01-01T00:00:00Z',
      },
    };
    if (hold.has(item.id)) held.push(() => answer(body));
    else answer(body);
  });
  return { socket, held };
}

describe('DockerEngine.listManaged', () => {
  it('keeps a cached container whose cache entry an event drops while the listing inspects another', async () => {
    const items: Item[] = [
      { id: 'a'.repeat(64), name: 'a', status: 'Up 1 second' },
      { id: 'b'.repeat(64), name: 'b', status: 'Up 1 second' },
    ];
    const hold = new Set<string>();
    const { socket, held } = await standIn(items, hold);
    const engine = new DockerEngine({ socketPath: socket, log: silentLogger() });
    expect((await engine.listManaged('u')).map((o) => o.name)).toEqual(['a', 'b']);
    // b changed (a new inspect, held back); meanwhile an event about a drops a's cache entry.
    items[1]!.status = 'Exited (0) 1 second ago';
    hold.add(items[1]!.id);
    const listing = engine.listManaged('u');
    await waitFor('b inspected', () => held.length === 1, { timeoutMs: 5_000, intervalMs: 5 });
    engine.invalidate(items[0]!.id);
    held[0]!();
    expect((await listing).map((o) => o.name)).toEqual(['a', 'b']);
  });
});
