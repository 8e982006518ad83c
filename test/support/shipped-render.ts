import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TemplateConfig } from '../../agent/config/template-config.js';
import { silentLogger } from '../../agent/log.js';
import { allContainers } from '../../agent/model/spec.js';
import { renderedFileMap } from '../../agent/render/renderer.js';
import { loadDesired } from '../../agent/spec/load.js';
import { REPO } from './daemon.js';

/**
 * One container of a shipped compute set folder (container-sets/...)
 * rendered as spcd renders it, with a secrets file and a globals file of
 * the test's: its files by name.
 */
export async function rendered(
  setsDir: string,
  container: string,
  secrets?: string,
  globals?: string,
): Promise<Map<string, string>> {
  const dir = mkdtempSync(join(tmpdir(), 'spcd-oscompute-'));
  let secretsFile: string | undefined;
  if (secrets) {
    secretsFile = join(dir, 'secrets.yaml');
    writeFileSync(secretsFile, secrets, { mode: 0o600 });
  }
  let globalsFile: string | undefined;
  if (globals) {
    globalsFile = join(dir, 'globals.yaml');
    writeFileSync(globalsFile, globals);
  }
  const config = new TemplateConfig({
    templatesDir: join(REPO, 'templates'),
    configRoot: join(dir, 'config'),
    files: { globalsFile, secretsFile },
    log: silentLogger(),
  });
  const desired = await loadDesired({
    setsDir: join(REPO, setsDir),
    checkLibraryFile: join(REPO, 'healthchecks', 'library.yaml'),
  });
  await config.load(desired);
  const spec = allContainers(desired.sets).find((c) => c.name === container);
  if (!spec) throw new Error(`no container ${container} in ${setsDir}`);
  return renderedFileMap(config.render(spec));
}

/** The passwords the shipped sets need (their secrets file), as sample values. */
export const SHIPPED_SECRETS = [
  'rabbitmq: { password: r }',
  'nova: { keystone_password: n, placement_password: p, metadata_secret: m }',
  'neutron: { keystone_password: q }',
].join('\n');

/** The values a real host gives the shipped sets (they have no safe default). */
export const HOST_GLOBALS = [
  'keystone: { internal_url: "http://192.0.2.2:5000/v3" }',
  'rabbitmq: { hosts: [192.0.2.3] }',
  'my_ip: 192.0.2.10',
  'neutron: { linuxbridge: { local_ip: 198.51.100.10 }, ovs: { local_ip: 198.51.100.10 } }',
].join('\n');
