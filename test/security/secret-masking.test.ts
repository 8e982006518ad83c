import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoContainerYaml, REPO, sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * M4: a secret must not reach the admin group through spcd's own output.
 * A real spcd renders a PEM private key from the secrets file into a text
 * file; the attacks read it back through `spcctl plan`, the generations
 * diff and a render error (a JSON template that does not parse), as anyone
 * in the admin group can.
 */
const run = promisify(execFile);
const sb: Sandbox = sandbox('sec-mask');
const name = `${sb.instance}-a`;
const templates = join(sb.root, 'templates');
const secrets = join(sb.root, 'secrets.yaml');
const PASSWORD = `pw-${randomBytes(12).toString('hex')}`;
let spcd: SpcdProcess;

/** A PEM-shaped key: random base64 lines between the markers, as a real key is laid out. */
function pemKey(): { text: string; body: string[] } {
  const b64 = randomBytes(150).toString('base64');
  const body = b64.match(/.{1,64}/g) ?? [];
  return { text: ['-----BEGIN PRIVATE KEY-----', ...body, '-----END PRIVATE KEY-----'].join('\n'), body };
}

const OLD = pemKey();
const NEW = pemKey();

function writeSecrets(key: string): void {
  const indented = key
    .split('\n')
    .map((l) => `  ${l}`)
    .join('\n');
  writeFileSync(secrets, `password: ${PASSWORD}\ntls_key: |\n${indented}\n`, { mode: 0o600 });
}

function set(extraConfig = ''): string {
  return `set: mask\ncontainers:\n${demoContainerYaml(name, ['stop_grace_period: 1s'])}    config:\n      - { template: key.pem.j2, dest: key.pem, container_path: /etc/a/key.pem, mode: '0600' }\n${extraConfig}`;
}

async function spcctl(args: string[]): Promise<string> {
  const r = await run(join(REPO, 'bin', 'spcctl.js'), ['--socket', sb.socket, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
  }).catch((err: { stdout: string; stderr: string }) => err);
  return `${r.stdout}${r.stderr}`;
}

/** Every piece of the secrets found in the text (nothing, when masking holds). */
function leaked(text: string): string[] {
  const pieces = [...OLD.body, ...NEW.body].filter((l) => text.includes(l));
  // Any 8 characters of the password, quoted whole or in part.
  for (let i = 0; i + 8 <= PASSWORD.length; i++) {
    if (text.includes(PASSWORD.slice(i, i + 8))) pieces.push(PASSWORD.slice(i, i + 8));
  }
  return pieces;
}

beforeAll(async () => {
  mkdirSync(templates);
  writeFileSync(join(templates, 'key.pem.j2'), '{{ tls_key }}');
  writeFileSync(join(templates, 'app.json.j2'), '{"user": "nova", "password": {{ password }}}\n');
  writeSecrets(OLD.text);
  writeSet(sb, 'mask.yaml', set());
  spcd = SpcdProcess.start(sb, ['--templates', templates, '--secrets', secrets]);
  await spcd.ready();
  await waitFor('a running', async () => (await inspect(name))?.State.Running);
});

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
});

describe('secret masking: whole values, every line, no parsed text in errors', () => {
  it('spcctl plan after a key rotation shows no line of the old or the new key', async () => {
    writeSecrets(NEW.text);
    const out = await spcctl(['plan', '-o', 'json']);
    expect(out).toContain('key.pem'); // the file's change is listed...
    expect(out).toContain('******'); // ...masked
    expect(leaked(out)).toEqual([]);
  });

  it('the generations diff after the rotation shows no line of either key', async () => {
    await spcctl(['reload', '--wait']);
    await waitFor(
      'generation 2',
      async () => (await inspect(name))?.Config.Labels['spcd.generation'] === '2',
      { timeoutMs: 60_000 },
    );
    const out = await spcctl(['generations', name, '--diff', '1', '2', '-o', 'json']);
    expect(out).toContain('key.pem');
    expect(out).toContain('******');
    expect(leaked(out)).toEqual([]);
  });

  it('a JSON template that does not parse: the error names line and column, and quotes no secret', async () => {
    // The password lands unquoted: the rendered text is not JSON.
    writeSet(
      sb,
      'mask.yaml',
      set(
        "      - { template: app.json.j2, dest: app.json, container_path: /etc/a/app.json, mode: '0600', format: json }\n",
      ),
    );
    const out = await spcctl(['plan', '-o', 'json']);
    expect(out).toContain('did not render valid JSON: line 1, column 30: expected a value');
    expect(leaked(out)).toEqual([]);
    const reload = await spcctl(['reload', '--wait', '-o', 'json']);
    expect(reload).toContain('TEMPLATE_INVALID');
    expect(leaked(reload)).toEqual([]);
  });

  it('a secrets file that is not valid YAML: the error names file and line, and quotes nothing of it', async () => {
    // A password that YAML reads as a tag: js-yaml's reason quotes the tag ("unknown tag !<!pw-...>").
    writeFileSync(secrets, `password: !${PASSWORD} x\n`, { mode: 0o600 });
    const reload = await spcctl(['reload', '--wait', '-o', 'json']);
    expect(reload).toContain(`${secrets}:1: unknown tag (…)`);
    expect(leaked(reload)).toEqual([]);
    const status = await spcctl(['status', '-o', 'json']);
    expect(leaked(status)).toEqual([]);
  });
});
