/**
 * Through the real daemon: the definition of the hypervisor stand-in is
 * deleted (its file removed, SIGHUP) while two stand-in VMs run. spcd keeps
 * the container running and retries the removal with backoff; once the VMs
 * are gone, the next retry removes it.
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StatusDocument } from '../../agent/api/types.js';
import { call } from '../support/api-http.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { endVms, hypervisorBody, startVm, type StandInVm } from '../support/stand-in-vms.js';
import { waitFor } from '../support/wait.js';

const sb: Sandbox = sandbox('hvrm');
const hv = `${sb.instance}-libvirt`;
const other = `${sb.instance}-other`;
const tag = `${process.pid % 10000}${Math.floor(Math.random() * 1000)}`;
const vms: StandInVm[] = [];
let spcd: SpcdProcess;

const HV_SET = `
set: hv
containers:
  ${hv}:
${hypervisorBody(sb.root, 'spcd-demo/service:1', 4)}
`;

const OTHER_SET = `
set: other
containers:
  ${other}:
    image: spcd-demo/service:1
    command: [demo-service, sleep]
    network: none
    stop_grace_period: 1s
`;

const refusalLines = (): string[] =>
  spcd.output.filter((l) => l.includes('"step failed"') && l.includes('VM_SAFETY_REFUSED') && l.includes(hv));
const refusals = (): number => refusalLines().length;

beforeAll(async () => {
  mkdirSync(join(sb.root, 'run-libvirt'));
  mkdirSync(join(sb.root, 'lib-libvirt'));
  writeSet(sb, 'hv.yaml', HV_SET);
  writeSet(sb, 'other.yaml', OTHER_SET);
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
  await waitFor('hypervisor running', async () => (await inspect(hv))?.State.Running === true);
  for (const vm of [`a${tag}`, `b${tag}`]) vms.push(startVm(hv, vm));
}, 60_000);

afterAll(async () => {
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  await endVms(vms);
  rmSync(sb.root, { recursive: true, force: true });
});

describe('deleting the hypervisor definition while VMs run', () => {
  it('keeps the hypervisor, retries with backoff, and removes it once no VM runs', async () => {
    const before = (await inspect(hv))!;
    for (const vm of vms)
      expect(readFileSync(`/proc/${vm.pid}/cgroup`, 'utf8')).toContain(`/machine/spcd-demo-${vm.name}`);

    rmSync(join(sb.setsDir, 'hv.yaml'));
    spcd.child.kill('SIGHUP');
    // Refused, then refused again after the first backoff step: retried, not given up.
    await waitFor('two refusals', () => refusals() >= 2, { timeoutMs: 20_000 });
    const said = `refusing to remove hypervisor ${hv} (definition deleted) while 2 VM(s) run`;
    await waitFor('the refusal naming both VMs', () => spcd.logged(said), { timeoutMs: 20_000 }).catch(() => {
      throw new Error(`no log line says "${said}"; the refusals were:\n${refusalLines().join('\n')}`);
    });
    const kept = (await inspect(hv))!;
    expect(kept.Id).toBe(before.Id);
    expect(kept.State.StartedAt).toBe(before.State.StartedAt);
    expect(kept.State.Running).toBe(true);
    for (const vm of vms) expect(existsSync(`/proc/${vm.pid}`), vm.name).toBe(true);
    expect((await inspect(other))?.State.Running).toBe(true);
    // The status tree lists it apart, with the refusal as its last error.
    const status = (await call(sb.socket, 'GET', '/v1/status')).json() as StatusDocument;
    expect(status.retained).toMatchObject([
      { name: hv, set: 'hv', state: 'running', lastError: { code: 'VM_SAFETY_REFUSED' } },
    ]);
    expect(status.sets.map((x) => x.name)).toEqual(['other']);

    for (const vm of vms) process.kill(vm.pid, 'SIGKILL');
    await waitFor('hypervisor removed', async () => (await inspect(hv)) === undefined, {
      timeoutMs: 90_000,
    });
    // The engine's removal answers before spcd's log line reaches the pipe: wait for it.
    await waitFor('spcd logged the removal', () => spcd.logged('"container removed"'), { timeoutMs: 10_000 });
    await waitFor('status without it', async () => {
      const doc = (await call(sb.socket, 'GET', '/v1/status')).json() as StatusDocument;
      return doc.retained?.length === 0;
    });
    expect((await inspect(other))?.State.Running).toBe(true);
  }, 120_000);
});
