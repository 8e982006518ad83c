import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHandler } from '../../agent/api/handler.js';
import { formatEvent, formatHealth, formatStatus } from '../../agent/cli/format.js';
import { SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import { demoContainer, FakeActions, FakeStatus } from '../support/api-fakes.js';
import { serveOnTempSocket } from '../support/api-http.js';
import { runSpcctl } from '../support/cli-run.js';

const status = new FakeStatus();
const actions = new FakeActions(status);
let sock: string;
let close: () => Promise<void>;

beforeAll(async () => {
  status.setList[1] = {
    ...status.setList[1]!,
    containers: [
      demoContainer('cron', 'infra', {
        state: 'crash-looping',
        health: 'unhealthy',
        restartCount: 7,
        lastError: {
          code: 'HEALTH_GATE_FAILED',
          message: 'not healthy in 60s',
          at: '2026-01-01T00:00:00.000Z',
        },
      }),
    ],
  };
  const s = await serveOnTempSocket(
    createApiHandler({
      status,
      actions,
      log: silentLogger(),
      version: '0.1.0-test',
      peerCred: () => null,
    }),
  );
  sock = s.socketPath;
  close = s.close;
});
afterAll(() => close());

/** spcctl against the fake daemon's socket (or `env`); `tty`: stdout is a terminal. */
const cli = (args: string[], opts: { tty?: boolean; env?: NodeJS.ProcessEnv } = {}) =>
  runSpcctl(args, opts.env ?? { SPCD_SOCKET: sock }, { tty: opts.tty ?? false });

describe('tables and JSON', () => {
  it('status: a tree of sets with containers', async () => {
    const r = await cli(['status']);
    expect(r.code).toBe(0);
    const lines = r.out.split('\n');
    expect(lines[0]).toBe('spcd 0.1.0-test  instance test  engine available (20.10.24)');
    expect(lines[1]).toMatch(/^SET\/CONTAINER\s+GEN\s+STATE\s+HEALTH\s+RESTARTS\s+IMAGE\s+LAST ERROR$/);
    expect(lines[2]).toBe('compute/');
    expect(lines[3]).toMatch(/^ {2}nova_compute\s+3\s+running\s+healthy\s+0\s+spcd-demo\/service:1\s+-$/);
    expect(lines[4]).toBe('  compute/neutron/');
    expect(lines[5]).toMatch(/^ {4}neutron_agent\s+3\s+running/);
    expect(r.out).toMatch(
      / {2}cron\s+3\s+crash-looping\s+unhealthy\s+7\s+\S+\s+HEALTH_GATE_FAILED: not healthy in 60s/,
    );
    const j = await cli(['status', '--json']);
    expect(JSON.parse(j.out)).toEqual(await status.status());
  });

  it('status: containers kept without a definition are listed apart', async () => {
    const doc = {
      ...(await status.status()),
      retained: [
        demoContainer('nova_libvirt', 'compute', {
          lastError: {
            code: 'VM_SAFETY_REFUSED',
            message: 'refusing to remove hypervisor',
            at: '2026-01-01T00:00:00.000Z',
          },
        }),
      ],
    };
    const lines = formatStatus(doc).trimEnd().split('\n');
    expect(lines.at(-2)).toBe('(definition deleted)');
    expect(lines.at(-1)).toMatch(
      /^ {2}nova_libvirt\s+3\s+running\s+healthy\s+0\s+\S+\s+VM_SAFETY_REFUSED: refusing/,
    );
    expect(formatStatus({ ...doc, retained: [] })).not.toContain('definition deleted');
  });

  it('status: a container left as it is (a newer spcd labelled it) says why', async () => {
    const doc = {
      ...(await status.status()),
      retained: [
        demoContainer('nova_libvirt', 'compute', {
          untouched: 'labelled by a newer spcd (spec hash scheme v9)',
        }),
      ],
    };
    expect(formatStatus(doc).trimEnd().split('\n').at(-1)).toMatch(
      /^ {2}nova_libvirt\s+3\s+running\s+healthy\s+0\s+\S+\s+left as it is: labelled by a newer spcd/,
    );
  });

  it('status: a container whose own checks pass and whose dependency is down reads healthy, with it down', async () => {
    const doc = {
      ...(await status.status()),
      retained: [
        demoContainer('nova_compute', 'compute', {
          dependencies: [
            { check: 'amqp', dependency: 'rabbitmq', status: 'down' },
            { check: 'amqp2', dependency: 'rabbitmq', status: 'down' },
            { check: 'db', dependency: 'database', status: 'up' },
          ],
        }),
      ],
    };
    expect(formatStatus(doc).trimEnd().split('\n').at(-1)).toMatch(
      /^ {2}nova_compute\s+3\s+running\s+healthy; rabbitmq down\s+0\s/,
    );
    const health = formatHealth({
      name: 'nova_compute',
      status: 'healthy',
      dockerHealth: null,
      checks: [
        { name: 'api', status: 'healthy', consecutiveFailures: 0, consecutiveSuccesses: 4, history: [] },
        {
          name: 'amqp',
          dependency: 'rabbitmq',
          status: 'unhealthy',
          consecutiveFailures: 5,
          consecutiveSuccesses: 0,
          history: [],
        },
      ],
    }).split('\n');
    expect(health[1]).toMatch(/^CHECK\s+DEPENDENCY\s+STATUS\s+FAILS/);
    expect(health[2]).toMatch(/^api\s+-\s+healthy\s+0\s+4/);
    expect(health[3]).toMatch(/^amqp\s+rabbitmq\s+unhealthy\s+5\s+0/);
    const event = { type: 'dependency', at: 0, container: 'nova_compute', check: 'amqp' } as const;
    expect(formatEvent({ ...event, dependency: 'rabbitmq', status: 'down', output: 'refused' })).toBe(
      '00:00:00.000 dependency nova_compute/amqp: rabbitmq down refused',
    );
  });

  it('status: a state file set aside at start-up is said on the second line', async () => {
    const doc = {
      ...(await status.status()),
      stateRecovery: {
        at: '2026-01-01T00:00:00.000Z',
        reason: '/var/lib/spcd/state.json is not valid JSON: Unexpected end of JSON input',
        movedTo: '/var/lib/spcd/state.json.corrupt-2026-01-01T00-00-00-000Z',
        rebuilt: ['nova_compute', 'cron'],
      },
    };
    const lines = formatStatus(doc).split('\n');
    expect(lines[1]).toBe(
      'STATE RECOVERED at 2026-01-01T00:00:00.000Z: /var/lib/spcd/state.json is not valid JSON: Unexpected end of JSON input; ' +
        'old file kept at /var/lib/spcd/state.json.corrupt-2026-01-01T00-00-00-000Z; rebuilt from labels: nova_compute, cron',
    );
    expect(lines[2]).toMatch(/^SET\/CONTAINER/);
    expect(formatStatus(await status.status())).not.toContain('STATE RECOVERED');
  });

  it('ps: one flat row per container', async () => {
    const r = await cli(['ps']);
    expect(r.out.trim().split('\n')).toHaveLength(4);
    expect(r.out).toMatch(/^NAME\s+SET\s+GEN\s+STATE\s+HEALTH\s+RESTARTS\s+IMAGE\n/);
    expect(r.out).toMatch(
      /neutron_agent\s+compute\/neutron\s+3\s+running\s+healthy\s+0\s+spcd-demo\/service:1/,
    );
    const j = JSON.parse((await cli(['--json', 'ps'])).out) as { name: string }[];
    expect(j.map((c) => c.name)).toEqual(['nova_compute', 'neutron_agent', 'cron']);
  });

  it('health NAME: one row per check; unhealthy exits 1', async () => {
    const r = await cli(['health', 'nova_compute']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^nova_compute: healthy\n/);
    expect(r.out).toMatch(/port\s+healthy\s+0\s+4\s+2026-01-01T00:00:10.000Z\s+ok\s+12ms\s+ok/);
    expect(r.out).toMatch(/rpc\s+unhealthy\s+2\s+0\s+\S+\s+timeout\s+5000ms\s+timed out/);
    expect((await cli(['health', 'cron'])).code).toBe(1);
    const j = JSON.parse((await cli(['health', 'nova_compute', '--json'])).out) as { checks: unknown[] };
    expect(j.checks).toHaveLength(2);
  });

  it('generations NAME', async () => {
    const r = await cli(['generations', 'cron']);
    expect(r.out).toMatch(/^GEN\s+OUTCOME\s+IMAGE\s+DIGEST\s+CREATED\s+REASON\n/);
    expect(r.out).toMatch(
      /3\s+current\s+spcd-demo\/service:2\s+sha256:cdcdcdcdcdcd\s+2026-01-03T00:00:00.000Z\s+-/,
    );
    expect(r.out).toMatch(/2\s+committed\s+spcd-demo\/service:1\s+-\s+/);
    const j = JSON.parse((await cli(['generations', 'cron', '--json'])).out) as { generations: unknown[] };
    expect(j.generations).toHaveLength(2);
  });

  it('plan, logs, version', async () => {
    expect((await cli(['plan'])).out).toMatch(/nova_compute\s+compute\s+recreate\s+image changed/);
    expect((await cli(['logs', '--tail', '1', 'cron'])).out).toBe('line 3\n');
    const v = await cli(['version'], { env: {} });
    expect(v).toMatchObject({ code: 0 });
    expect(v.out).toMatch(/^spcctl \d+\.\d+\.\d+ \(commit \S+, built \S+\)\n$/);
  });
});

describe('exit codes and messages', () => {
  it('2 for usage errors', async () => {
    expect((await cli([])).code).toBe(2);
    expect((await cli(['frobnicate'])).code).toBe(2);
    expect((await cli(['health'])).code).toBe(2);
    expect((await cli(['upgrade', 'cron'])).err).toContain('upgrade needs --image REF');
    expect((await cli(['rollback', 'cron', '--to', 'x'])).code).toBe(2);
    expect((await cli(['status', '--bogus'])).code).toBe(2);
    expect((await cli(['--help'])).code).toBe(0);
  });

  it('4 for not found, 5 for conflict, 2 for a 422', async () => {
    const nf = await cli(['health', 'ghost']);
    expect(nf).toMatchObject({ code: 4, err: 'spcctl: NOT_FOUND: no container named ghost\n' });
    const mismatch = await cli(['upgrade', 'cron', '--image', 'a/b:2', '--expect-generation', '9']);
    expect(mismatch.code).toBe(5);
    expect(mismatch.err).toContain('GENERATION_MISMATCH');
    expect((await cli(['upgrade', 'cron', '--image', 'bad ref'])).code).toBe(2);
  });

  it('3 with a clear message when the socket is missing', async () => {
    const r = await cli(['status', '--socket', '/nonexistent/spcd.sock']);
    expect(r).toEqual({
      code: 3,
      out: '',
      err: 'spcctl: spcd is not running or listens elsewhere: /nonexistent/spcd.sock\n',
    });
    const env = await cli(['ps'], { env: { SPCD_SOCKET: '/nonexistent/env.sock' } });
    expect(env.err).toContain('/nonexistent/env.sock');
  });

  it('an accepted operation prints its id; --json prints the ref', async () => {
    const r = await cli(['restart', 'neutron_agent']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^operation op-\d+: restart neutron_agent accepted/);
    actions.finish({ operationId: 'x', kind: 'restart', target: 'neutron_agent', acceptedAt: '' }, true);
  });
});

/** spcctl with the fake's operations finishing by themselves soon after they start, as `ok` says. */
async function finishing<T>(ok: boolean, run: () => Promise<T>): Promise<T> {
  const origFinish = actions.finish.bind(actions);
  actions.autoFinishMs = 20;
  actions.finish = (ref) => origFinish(ref, ok);
  try {
    return await run();
  } finally {
    actions.autoFinishMs = null;
    actions.finish = origFinish;
  }
}

describe('--wait progress', () => {
  it('not a TTY: plain lines, exit 0 when the operation succeeds', async () => {
    const r = await finishing(true, () =>
      cli(['upgrade', 'nova_compute', '--image', 'spcd-demo/service:2', '--wait']),
    );
    expect(r.code).toBe(0);
    expect(r.out).not.toContain('\r');
    const lines = r.out.trim().split('\n');
    expect(lines[0]).toMatch(/^operation op-\d+: upgrade nova_compute accepted$/);
    expect(lines[1]).toMatch(/operation\s+op-\d+ upgrade nova_compute: accepted$/);
    expect(lines[2]).toMatch(/pull\s+spcd-demo\/service:2: Downloading 50%/);
    expect(lines[3]).toMatch(/step\s+nova_compute gen 4: health-gate done$/);
    expect(lines[4]).toMatch(/operation\s+op-\d+ upgrade nova_compute: succeeded$/);
    expect(lines).toHaveLength(5); // no summary after an upgrade
  });

  it('a TTY: one redrawn line; a failed operation exits 1 with its error', async () => {
    const r = await finishing(false, () => cli(['rollback', 'nova_compute', '--wait'], { tty: true }));
    expect(r.code).toBe(1);
    expect(r.out).toContain('\r\x1b[2Kpulling spcd-demo/service:2: Downloading 50%');
    expect(r.err).toMatch(/operation op-\d+ failed: HEALTH_GATE_FAILED: not healthy in 60s/);
  });

  it('reload: after its events, what the reload did and each operation it caused', async () => {
    const r = await finishing(true, () => cli(['reload', '--wait']));
    expect(r.code).toBe(0);
    const lines = r.out.trim().split('\n');
    expect(lines[0]).toMatch(/^operation op-\d+: reload definitions accepted$/);
    expect(lines.at(-4)).toMatch(/operation\s+op-\d+ reload definitions: succeeded$/);
    expect(lines.slice(-3)).toEqual([
      'reload: 2 containers defined; 1 change planned (recover 1)',
      'operations caused by the reload:',
      '  recover cron: cleared (operation recover-1)',
    ]);
    const tty = await finishing(true, () => cli(['reload', '--wait'], { tty: true }));
    expect(tty.out).toMatch(/: succeeded\nreload: 2 containers defined; 1 change planned \(recover 1\)\n/);
    // --json: the ref, then each event of the operation, one JSON object a line (the result in the last)
    const json = await finishing(true, () => cli(['reload', '--wait', '--json']));
    expect(json.code).toBe(0);
    const objects = json.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(objects[0]).toMatchObject({ kind: 'reload', operationId: expect.stringMatching(/^op-\d+$/) });
    expect(objects.at(-1)).toMatchObject({
      type: 'operation',
      phase: 'succeeded',
      result: { operations: [{ kind: 'recover', container: 'cron', outcome: 'cleared' }] },
    });
    expect(json.out).not.toContain('caused by the reload');
  });

  it('a failed reload: its error, no summary', async () => {
    const r = await finishing(false, () => cli(['reload', '--wait']));
    expect(r.code).toBe(1);
    expect(r.out.trim().split('\n').at(-1)).toMatch(/operation\s+op-\d+ reload definitions: failed /);
    expect(r.err).toMatch(/^operation op-\d+ failed: HEALTH_GATE_FAILED: not healthy in 60s\n$/);
  });

  it('reload without --wait: only accepted, no result', async () => {
    const r = await cli(['reload']);
    expect(r.out).toMatch(/^operation op-\d+: reload definitions accepted \(follow with: spcctl events\)\n$/);
  });

  it('a refused operation never waits: CONFLICT exits 5', async () => {
    actions.failWith = new SpcdError('CONFLICT', 'svc is busy with operation op-9');
    try {
      const r = await cli(['stop', 'cron', '--wait']);
      expect(r.code).toBe(5);
      expect(r.err).toBe('spcctl: CONFLICT: svc is busy with operation op-9\n');
    } finally {
      actions.failWith = null;
    }
  });
});

describe('validate DIR (no daemon)', () => {
  it('exits 0 for the shipped sets and 1 with file:line problems for a broken one', async () => {
    const ok = await cli(['validate', 'container-sets'], { env: {} });
    expect(ok).toMatchObject({ code: 0, out: 'valid\n' });
    const dir = mkdtempSync(join(tmpdir(), 'spcctl-validate-'));
    try {
      writeFileSync(join(dir, 'bad.yaml'), 'name: bad\ncontainers:\n  x:\n    image: 5\n');
      const bad = await cli(['validate', dir], { env: {} });
      expect(bad.code).toBe(1);
      expect(bad.err).toMatch(
        new RegExp(`^${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/bad.yaml:\\d+: `, 'm'),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
