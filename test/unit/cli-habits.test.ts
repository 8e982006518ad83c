import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHandler } from '../../agent/api/handler.js';
import type { GenerationDiffView } from '../../agent/api/types.js';
import { parse } from '../../agent/cli/args.js';
import { runCli } from '../../agent/cli/main.js';
import { SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { FakeActions, FakeStatus } from '../support/api-fakes.js';
import { call, serveOnTempSocket } from '../support/api-http.js';
import { Capture, runSpcctl } from '../support/cli-run.js';
import { waitFor } from '../support/wait.js';

/** The fake daemon, answering generation diffs of `cron` 2 -> 3. */
class DiffStatus extends FakeStatus {
  asked: [string, number, number][] = [];
  override async generationDiff(
    name: string,
    from: number,
    to: number,
  ): Promise<GenerationDiffView | undefined> {
    this.asked.push([name, from, to]);
    if (!this.container(name)) return undefined;
    const [g3, g2] = this.generations(name) ?? [];
    const gens = new Map([
      [2, g2!],
      [3, g3!],
    ]);
    const a = gens.get(from);
    const b = gens.get(to);
    if (!a || !b)
      throw new SpcdError('NOT_FOUND', `container ${name} has no generation ${a ? to : from} (kept: 2, 3)`);
    return {
      name,
      from: a,
      to: b,
      image: { from: a.image, to: b.image },
      spec: [{ path: 'environment.DEBUG', to: '1' }],
      config: { changed: true, filesKnown: true, files: [] },
    };
  }
}

const status = new DiffStatus();
let sock: string;
let close: () => Promise<void>;

beforeAll(async () => {
  const s = await serveOnTempSocket(
    createApiHandler({
      status,
      actions: new FakeActions(status),
      log: silentLogger(),
      version: '0.1.0-test',
      peerCred: () => null,
    }),
  );
  sock = s.socketPath;
  close = s.close;
});
afterAll(() => close());

/** spcctl against the fake daemon's socket. */
const cli = (args: string[]) => runSpcctl(args, { SPCD_SOCKET: sock });

describe('--output / -o', () => {
  it('parses -o, -oFORM, --output=FORM and --json as the same thing, before or after the command', () => {
    const form = (argv: string[]): string => {
      const p = parse(argv);
      if (p === 'help') throw new Error('help');
      return p.output;
    };
    expect(form(['status'])).toBe('table');
    expect(form(['-o', 'yaml', 'status'])).toBe('yaml');
    expect(form(['status', '-owide'])).toBe('wide');
    expect(form(['status', '--output=json'])).toBe('json');
    expect(form(['--json', 'status'])).toBe('json');
    expect(form(['--json', 'status', '-o', 'json'])).toBe('json');
    // commands that only printed --json before take -o json too
    expect(form(['version', '-o', 'json'])).toBe('json');
  });

  it('a bad value or a form the command does not print is a usage error naming the flag', async () => {
    const bad = await cli(['status', '-o', 'xml']);
    expect(bad).toMatchObject({
      code: 2,
      err: 'spcctl: --output: unknown format "xml" (expected one of: json, yaml, wide)\n',
      out: '',
    });
    const notWide = await cli(['health', 'cron', '--output', 'wide']);
    expect(notWide).toMatchObject({
      code: 2,
      err: 'spcctl: --output: health does not print wide (it prints: json, yaml)\n',
    });
    expect((await cli(['logs', 'cron', '-o', 'json'])).err).toBe(
      'spcctl: --output: logs has no other output form\n',
    );
    expect((await cli(['status', '--json', '-o', 'yaml'])).err).toBe(
      'spcctl: --json and --output yaml disagree\n',
    );
    expect((await cli(['status', '-o'])).code).toBe(2);
  });

  it('json is the API answer; yaml is the same answer through js-yaml', async () => {
    const json = JSON.parse((await cli(['status', '-o', 'json'])).out) as unknown;
    expect(json).toEqual(await status.status());
    const yaml = await cli(['-o', 'yaml', 'status']);
    expect(yaml.code).toBe(0);
    expect(load(yaml.out)).toEqual(json);
    expect(yaml.out).toMatch(/^version: 0\.1\.0-test\n/);
    const gens = await cli(['generations', 'cron', '-o', 'yaml']);
    expect(load(gens.out)).toEqual({ name: 'cron', generations: status.generations('cron') });
    expect(load((await cli(['ps', '-oyaml'])).out)).toEqual(JSON.parse((await cli(['ps', '--json'])).out));
  });

  it('wide adds columns: digest, container id, start (ps: and operation; generations: the hashes)', async () => {
    const ps = (await cli(['ps', '-o', 'wide'])).out.split('\n');
    expect(ps[0]).toMatch(
      /^NAME\s+SET\s+GEN\s+STATE\s+HEALTH\s+RESTARTS\s+IMAGE\s+DIGEST\s+CONTAINER ID\s+STARTED\s+OPERATION$/,
    );
    expect(ps[1]).toMatch(
      /^nova_compute\s+compute\s+3\s+running\s+healthy\s+0\s+spcd-demo\/service:1\s+sha256:abababababab\s+c0ffee000c\s+2026-01-01T00:00:00.000Z\s+-$/,
    );
    const st = (await cli(['status', '-o', 'wide'])).out.split('\n');
    expect(st[1]).toMatch(
      /^SET\/CONTAINER\s+GEN\s+STATE\s+HEALTH\s+RESTARTS\s+IMAGE\s+DIGEST\s+CONTAINER ID\s+STARTED\s+LAST ERROR$/,
    );
    expect(st[3]).toMatch(
      /^ {2}nova_compute\s+3\s+running\s+healthy\s+0\s+\S+\s+sha256:abababababab\s+c0ffee000c\s+\S+\s+-$/,
    );
    const gens = (await cli(['generations', 'cron', '-o', 'wide'])).out.split('\n');
    expect(gens[0]).toMatch(/^GEN\s+OUTCOME\s+IMAGE\s+DIGEST\s+CREATED\s+SPEC HASH\s+CONFIG HASH\s+REASON$/);
    expect(gens[1]).toMatch(
      new RegExp(
        `^3\\s+current\\s+spcd-demo/service:2\\s+sha256:${'cd'.repeat(32)}\\s+\\S+\\s+s3\\s+c3\\s+-$`,
      ),
    );
    // the narrow table is as it was
    expect((await cli(['ps'])).out.split('\n')[0]).toMatch(
      /^NAME\s+SET\s+GEN\s+STATE\s+HEALTH\s+RESTARTS\s+IMAGE$/,
    );
  });

  it('events: yaml is one document per event (json: the lines as sent)', async () => {
    const own = new FakeStatus();
    const srv = await serveOnTempSocket(
      createApiHandler({
        status: own,
        actions: new FakeActions(own),
        log: silentLogger(),
        version: '0.1.0-test',
        peerCred: () => null,
      }),
    );
    const follow = (form: string) => {
      const stdout = new Capture();
      const done = runCli(['events', '-o', form], {
        stdout,
        stderr: new Capture(),
        env: { SPCD_SOCKET: srv.socketPath },
      });
      return { stdout, done };
    };
    const y = follow('yaml');
    const j = follow('json');
    // publish until both followers printed it (their subscriptions open at their own pace)
    await waitFor('both followers print the event', () => {
      own.bus.publish({ type: 'reload', at: 0, ok: true });
      return y.stdout.text.includes('reload') && j.stdout.text.includes('reload');
    });
    await srv.close();
    expect(await y.done).toBe(0);
    expect(await j.done).toBe(0);
    const doc = y.stdout.text.split('---\n').find((d) => d.includes('reload'));
    expect(y.stdout.text.startsWith('---\n')).toBe(true);
    expect(load(doc!)).toEqual({ type: 'reload', at: 0, ok: true });
    expect(j.stdout.text.split('\n')[0]).toBe('{"type":"reload","at":0,"ok":true}');
  });
});

describe('generations NAME --diff A B', () => {
  it('asks the diff route and prints what changed', async () => {
    const r = await cli(['generations', 'cron', '--diff', '2', '3']);
    expect(r).toMatchObject({ code: 0, err: '' });
    expect(status.asked.at(-1)).toEqual(['cron', 2, 3]);
    expect(r.out).toBe(
      'cron: generation 2 -> 3\n' +
        'image:   spcd-demo/service:1 -> spcd-demo/service:2\n' +
        'spec:\n' +
        '  environment.DEBUG: (absent) -> "1"\n' +
        'config:  c2 -> c3\n',
    );
    const y = await cli(['generations', '--diff', 'cron', '2', '3', '-o', 'yaml']);
    expect(load(y.out)).toEqual(await status.generationDiff('cron', 2, 3));
  });

  it('bad arguments are usage errors; a generation not kept is not found (exit 4)', async () => {
    expect((await cli(['generations', 'cron', '--diff', '2'])).err).toBe(
      'spcctl: usage: spcctl generations NAME [--diff A B] [-o json|yaml|wide]\n',
    );
    expect((await cli(['generations', 'cron', '2', '3'])).code).toBe(2);
    const bad = await cli(['generations', 'cron', '--diff', 'two', '3']);
    expect(bad).toMatchObject({ code: 2, err: 'spcctl: --diff A must be an integer >= 1, not "two"\n' });
    expect((await cli(['generations', 'cron', '--diff', '2', '0'])).err).toBe(
      'spcctl: --diff B must be an integer >= 1, not "0"\n',
    );
    expect(await cli(['generations', 'cron', '--diff', '2', '9'])).toMatchObject({
      code: 4,
      err: 'spcctl: NOT_FOUND: container cron has no generation 9 (kept: 2, 3)\n',
    });
    expect((await cli(['generations', 'ghost', '--diff', '1', '2'])).code).toBe(4);
  });

  it('the route wants both numbers and names the one missing or bad', async () => {
    const missing = await call(sock, 'GET', '/v1/containers/cron/generations/diff?from=2');
    expect(missing.status).toBe(422);
    expect(missing.json()).toMatchObject({
      code: 'UNPROCESSABLE',
      message: 'to: is required: a generation number',
    });
    const bad = await call(sock, 'GET', '/v1/containers/cron/generations/diff?from=x&to=3');
    expect(bad.json()).toMatchObject({ code: 'UNPROCESSABLE', details: { field: 'from', value: 'x' } });
    const ok = await call(sock, 'GET', '/v1/containers/cron/generations/diff?from=3&to=2');
    expect(ok.status).toBe(200);
    expect((ok.json() as GenerationDiffView).from.generation).toBe(3);
  });
});
