import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, cpSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { REPO, sandbox, SpcdProcess, type Sandbox } from '../support/daemon.js';
import { cleanupInstance } from '../support/docker.js';

/**
 * M3: the files and folders spcd reads as root decide what runs as root.
 * Each attack plants an input that someone other than root can change and
 * starts a real spcd on it (bin/spcd.js over dist/): spcd must refuse to read
 * it, keep what runs, and name the path and what is wrong in its status. `spcctl
 * validate` names the same refusal.
 */
const run = promisify(execFile);
let spcd: SpcdProcess | undefined;
let sb: Sandbox | undefined;

afterEach(async () => {
  await spcd?.stop();
  spcd = undefined;
  if (sb) await cleanupInstance(sb.instance);
});

interface DefinitionsStatus {
  loaded: boolean;
  error?: { code: string; message: string };
}

function definitions(s: Sandbox): DefinitionsStatus {
  const out = execFileSync('curl', ['-sf', '--unix-socket', s.socket, 'http://spcd/v1/status'], {
    encoding: 'utf8',
  });
  return (JSON.parse(out) as { definitions: DefinitionsStatus }).definitions;
}

const SET = (s: Sandbox): string =>
  `set: trust\ncontainers:\n  ${s.instance}-a:\n    image: spcd-demo/service:1\n    command: [demo-service, sleep]\n    network: none\n    stop_grace_period: 1s\n`;

async function startOn(s: Sandbox, extra: string[]): Promise<DefinitionsStatus> {
  spcd = SpcdProcess.start(s, extra);
  await spcd.ready();
  return definitions(s);
}

describe('trusted paths: inputs someone else can change are refused', () => {
  it('a --templates symlink to a tree in a folder others can write: refused on its resolved path', async () => {
    sb = sandbox('sec-tlink');
    writeFileSync(join(sb.setsDir, 'trust.yaml'), SET(sb));
    // The attacker's folder: mode 0777, not sticky. The templates look root-owned and 0755.
    const open = join(sb.root, 'shared');
    mkdirSync(open);
    chmodSync(open, 0o777);
    cpSync(join(REPO, 'templates'), join(open, 'templates'), { recursive: true });
    const link = join(sb.root, 'templates');
    symlinkSync(join(open, 'templates'), link);
    const d = await startOn(sb, ['--templates', link]);
    expect(d.loaded).toBe(false);
    expect(d.error?.code).toBe('UNTRUSTED_PATH');
    expect(d.error?.message).toBe(
      `templates directory ${link}: ${open} is a folder above it writable by its group or by others (mode 0777); spcd will not use it`,
    );
  });

  it('a sets directory inside a group-writable folder: refused by spcd and by spcctl validate', async () => {
    sb = sandbox('sec-gsets');
    // The sets live in a folder the admin group may write (0775): any member could swap a set.
    const group = join(sb.root, 'group');
    mkdirSync(group);
    chmodSync(group, 0o775);
    const sets = join(group, 'sets');
    mkdirSync(sets);
    writeFileSync(join(sets, 'trust.yaml'), SET(sb));
    const d = await startOn({ ...sb, setsDir: sets }, []);
    expect(d.loaded).toBe(false);
    expect(d.error?.code).toBe('UNTRUSTED_PATH');
    expect(d.error?.message).toBe(
      `sets directory ${sets}: ${group} is a folder above it writable by its group or by others (mode 0775); spcd will not use it`,
    );
    const v = await run(join(REPO, 'bin', 'spcctl.js'), ['validate', sets, '-o', 'json'], {
      encoding: 'utf8',
    }).catch((err: { stdout: string; code: number }) => err);
    const answer = JSON.parse(v.stdout) as { valid: boolean; problems: { code: string; message: string }[] };
    expect(answer.valid).toBe(false);
    expect(answer.problems[0]).toMatchObject({ code: 'UNTRUSTED_PATH', message: d.error?.message });
  });

  it('a secrets file mode 0600 but owned by another user: refused, naming the owner', async () => {
    sb = sandbox('sec-sown');
    writeFileSync(join(sb.setsDir, 'trust.yaml'), SET(sb));
    const secrets = join(sb.root, 'secrets.yaml');
    writeFileSync(secrets, 'pw: from-nobody\n', { mode: 0o600 });
    chownSync(secrets, 65534, 65534); // nobody may now rewrite the secrets spcd renders as root
    const d = await startOn(sb, ['--secrets', secrets]);
    expect(d.loaded).toBe(false);
    expect(d.error?.code).toBe('SECRETS_INSECURE');
    expect(d.error?.message).toBe(
      `secrets file ${secrets} is owned by uid 65534, not root; spcd will not use it`,
    );
  });
});
