import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../agent/log.js';
import { isSpcdError } from '../../agent/errors.js';
import { buildDaemon } from '../../agent/daemon/daemon.js';
import { Components } from '../../agent/daemon/lifecycle.js';
import { parseSettings, type Settings } from '../../agent/daemon/settings.js';

const log = createLogger({ level: 'silent' });
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function settingsIn(root: string, socketPath: string): Settings {
  for (const d of ['sets', 'templates', 'checks']) mkdirSync(join(root, d), { recursive: true });
  return parseSettings(
    [
      '--sets',
      join(root, 'sets'),
      '--templates',
      join(root, 'templates'),
      '--healthchecks',
      join(root, 'checks'),
      '--state-dir',
      join(root, 'state'),
      '--socket',
      socketPath,
      '--docker-socket',
      join(root, 'no-docker.sock'),
      '--instance',
      'unit-components',
    ],
    {},
  ) as Settings;
}

describe('buildDaemon', () => {
  it('opens nothing: the components, in start-up order, do the I/O', () => {
    const root = mkdtempSync(join(tmpdir(), 'spcd-components-'));
    dirs.push(root);
    const daemon = buildDaemon(settingsIn(root, join(root, 'api.sock')), log);
    expect(daemon.components.map((c) => c.name)).toEqual([
      'state',
      'journal',
      'health',
      'definitions',
      'api',
      'converge',
      'kube',
      'etcd',
    ]);
    expect(existsSync(join(root, 'state'))).toBe(false);
  });

  it('a start-up failure at the API closes what was opened before it (the health workers among them)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'spcd-components-'));
    dirs.push(root);
    // The socket's directory is a regular file: listening fails.
    writeFileSync(join(root, 'not-a-dir'), '');
    const daemon = buildDaemon(settingsIn(root, join(root, 'not-a-dir', 'api.sock')), log);
    const components = new Components(daemon.components, log);
    const out = await components.start();
    expect(out).toMatchObject({ kind: 'failed', component: 'api' });
    expect(existsSync(join(root, 'state', 'journal'))).toBe(true);
    const closed = await daemon.health.waitHealthy('x', 'id', 0).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isSpcdError(closed, 'SHUTTING_DOWN')).toBe(true);
  });
});
