/**
 * The domain census through the real daemon (issue 12), on the hypervisor
 * stand-in with two stand-in VMs. Its census command prints what the
 * stand-in "knows" about its domains from a file in the container's own
 * layer (not bound): a restart keeps the container and its memory, a new
 * generation starts from a fresh layer and has forgotten both domains while
 * their processes run on, which is what an older libvirt does with a status
 * XML it cannot read. spcd reports that (event, error log line, lastError,
 * metric) and does not roll the upgrade back; the VMs are untouched.
 */
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ContainerStatus } from '../../agent/api/types.js';
import { call } from '../support/api-http.js';
import { sandbox, SpcdProcess, writeSet, type Sandbox } from '../support/daemon.js';
import { cleanupInstance, inspect } from '../support/docker.js';
import { endVms, hypervisorBody, startVm, type StandInVm } from '../support/stand-in-vms.js';
import { waitFor } from '../support/wait.js';
import { EventTap } from '../e2e/libvirt-e2e-harness.js';

const sb: Sandbox = sandbox('census');
const hv = `${sb.instance}-libvirt`;
const tag = `${process.pid % 10000}${Math.floor(Math.random() * 1000)}`;
const vms: StandInVm[] = [];
let spcd: SpcdProcess;
let tap: EventTap;

const KNOWN = '/etc/spcd-demo-known-domains';
const HV_SET = `
set: hv
containers:
  ${hv}:
${hypervisorBody(sb.root, 'spcd-demo/service:1', 4)}
    census:
      exec: [sh, -c, 'cat ${KNOWN} 2>/dev/null || true']
      timeout: 3s
`;

async function status(): Promise<ContainerStatus> {
  const r = await call(sb.socket, 'GET', `/v1/containers/${hv}`);
  expect(r.status).toBe(200);
  return r.json() as ContainerStatus;
}

async function operate(verb: string, body: Record<string, unknown>): Promise<string> {
  const r = await call(sb.socket, 'POST', `/v1/containers/${hv}/${verb}`, body);
  expect(r.status, r.text).toBe(202);
  const op = (r.json() as { operationId: string }).operationId;
  const fin = await tap.finished(op, 60_000);
  expect(fin.phase, JSON.stringify(fin.error)).toBe('succeeded');
  return op;
}

function startTime(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[22 - 3]!;
}

beforeAll(async () => {
  mkdirSync(join(sb.root, 'run-libvirt'));
  mkdirSync(join(sb.root, 'lib-libvirt'));
  writeSet(sb, 'hv.yaml', HV_SET);
  spcd = SpcdProcess.start(sb);
  await spcd.ready();
  tap = await EventTap.open(sb.socket);
  await waitFor('hypervisor running', async () => (await inspect(hv))?.State.Running === true);
  for (const vm of [`a${tag}`, `b${tag}`]) vms.push(startVm(hv, vm));
  // What the stand-in "knows": in its own layer, gone with a new container.
  execFileSync('/usr/bin/docker', [
    'exec',
    hv,
    'sh',
    '-c',
    `printf '%s\\n' ${vms.map((v) => v.name).join(' ')} > ${KNOWN}`,
  ]);
}, 60_000);

afterAll(async () => {
  tap?.close();
  await spcd?.stop();
  await cleanupInstance(sb.instance);
  await endVms(vms);
  rmSync(sb.root, { recursive: true, force: true });
});

describe('the domain census of the hypervisor', () => {
  it('matches across a restart (the same container keeps its domains): census ok, no error', async () => {
    const gen = (await status()).generation;
    const op = await operate('restart', { expectedGeneration: gen });
    const e = tap.find((x) => x.type === 'census' && x.operationId === op);
    const names = vms.map((v) => v.name).sort();
    expect(e).toMatchObject({ outcome: 'ok', action: 'restart', before: names, after: names, missing: [] });
    const s = await status();
    expect(s.census).toMatchObject({ outcome: 'ok', before: 2, after: 2, vmProcesses: 2, mismatches: 0 });
    expect(s.lastError).toBeNull();
  }, 90_000);

  it('reports a new generation that lists fewer domains, without rolling back; the VMs run on', async () => {
    const before = await status();
    const starts = vms.map((v) => startTime(v.pid));
    const op = await operate('upgrade', {
      image: 'spcd-demo/service:2',
      expectedGeneration: before.generation,
    });
    const e = tap.find((x) => x.type === 'census' && x.operationId === op);
    expect(e).toMatchObject({
      outcome: 'mismatch',
      action: 'upgrade',
      after: [],
      missing: vms.map((v) => v.name).sort(),
      added: [],
    });
    // Reported, not rolled back: the new generation runs.
    const s = await status();
    expect(s.generation).toBe(before.generation + 1);
    expect(s.image).toBe('spcd-demo/service:2');
    expect(s.containerId).not.toBe(before.containerId);
    expect(s.lastError).toMatchObject({ code: 'DOMAIN_CENSUS_MISMATCH' });
    expect(s.lastError?.message).toBe(
      `domain census of ${hv} differs after upgrade: 2 domain(s) listed before the stop, 0 after; 2 missing (${vms
        .map((v) => v.name)
        .sort()
        .join(', ')})`,
    );
    expect(s.census).toMatchObject({
      outcome: 'mismatch',
      before: 2,
      after: 0,
      vmProcesses: 2,
      mismatches: 1,
    });
    // an error-level log line (pino level 50) naming the missing domains
    const line = spcd.output.find((l) => l.includes('"domain census of') && l.includes('"level":50'));
    expect(line, 'no error log line').toBeDefined();
    expect(line).toContain(vms[0]!.name);
    const metrics = (await call(sb.socket, 'GET', '/metrics')).text;
    expect(metrics).toContain(`spcd_domain_census_mismatches_total{container="${hv}",set="hv"} 1`);
    // the stand-in VMs were never touched
    expect(vms.map((v) => startTime(v.pid))).toEqual(starts);
  }, 90_000);
});
