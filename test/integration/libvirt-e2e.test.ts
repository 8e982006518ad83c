import { describe, expect, it } from 'vitest';
import { startTime } from '../e2e/libvirt-e2e-harness.js';
import { IMAGE_11, IMAGE_9 } from '../e2e/libvirt-e2e-harness.js';
import {
  e2e,
  expectCensusOk,
  startSpcd,
  survive,
  upgradeVia,
  virsh,
  writeLibvirtSet,
  type StepResult,
} from '../e2e/libvirt-e2e-run.js';
import { libvirtE2eStand } from '../e2e/libvirt-e2e-stand.js';
import { inspect } from '../support/docker.js';
import { waitFor } from '../support/wait.js';

/**
 * VM continuity on a real libvirt and a real qemu guest, driven through
 * spcd's API (issue #8, docs/explanation/libvirt-proof.md). spcd runs the real-VM set
 * (container-sets-e2e/libvirt.yaml) with libvirt 9; the test starts a TCG
 * guest with virsh in that container, then through the API:
 *   1. upgrades libvirt 9 -> 11;
 *   2. restarts the container;
 *   3. upgrades to the same image again (a new generation);
 *   4. kills spcd with SIGKILL in the middle of an upgrade (right after the
 *      old libvirt was stopped) and starts it again: recovery undoes it.
 * After each: same qemu PID and start time, no console counter missing and no
 * console gap longer than spcd's window plus one tick, `virsh domstate`
 * running in the current container, suspend/resume through the new daemon.
 * Then the guard: a rollback to libvirt 9 is refused (VM_SAFETY_REFUSED), and
 * a definition without the /sys/fs/cgroup bind, loaded by SIGHUP, is refused
 * with the hypervisor left running (same container, same PID).
 *
 * SPCD_E2E_SUMMARY=FILE: the summary line is written there (npm run e2e:libvirt).
 */

libvirtE2eStand();

describe('a real qemu guest survives libvirt container changes made through spcd', () => {
  const expectSurvived = (r: StepResult): void => {
    expect(r.failures, r.failures.join('; ')).toEqual([]);
    expect(r.ok).toBe(true);
  };

  it('1: upgrade libvirt 9 -> 11', async () => {
    expectSurvived(await survive('upgrade-9-to-11', () => upgradeVia(IMAGE_11)));
  }, 600_000);

  it('2: restart the libvirt container', async () => {
    const r = await survive('restart', async () => {
      const before = await e2e.api.container(e2e.container);
      const op = await e2e.api.post(`/v1/containers/${e2e.container}/restart`, {
        expectedGeneration: before.generation,
      });
      const fin = await e2e.tap!.finished(op, 240_000);
      if (fin.phase !== 'succeeded') throw new Error(`restart failed: ${JSON.stringify(fin.error)}`);
      const windowMs = Number(fin.result?.windowMs);
      const after = await e2e.api.container(e2e.container);
      await expectCensusOk(op, 'restart');
      expect(after.containerId).toBe(before.containerId);
      expect(after.startedAt).not.toBe(before.startedAt);
      // The restart reports stop+start only, and when its stop began (the census after the start comes later).
      const tStop = Date.parse(String(fin.result?.stoppedAt)) / 1000;
      expect(tStop).toBeGreaterThan(0);
      return {
        tStop,
        spcdWindowS: windowMs / 1000,
        spcdWindow: 'stopToRunning',
        ids: { old: before.containerId!, new: before.containerId! },
      };
    });
    expectSurvived(r);
  }, 600_000);

  it('3: upgrade to the same version, a new generation', async () => {
    expectSurvived(await survive('same-version-new-generation', () => upgradeVia(IMAGE_11)));
  }, 600_000);

  it('4: spcd killed with SIGKILL mid-upgrade (after the old libvirt stopped), then restarted', async () => {
    const r = await survive('sigkill-mid-upgrade', async () => {
      const before = await e2e.api.container(e2e.container);
      e2e.tap?.close();
      await e2e.spcd!.stop();
      await startSpcd({ SPCD_FAILPOINT: 'upgrade.after-stop-old' });
      const op = await e2e.api.post(`/v1/containers/${e2e.container}/upgrade`, {
        image: IMAGE_11,
        expectedGeneration: before.generation,
      });
      if ((await e2e.spcd!.exitWithin(240_000)) === 'still running')
        throw new Error('spcd did not reach the failpoint');
      expect(e2e.spcd!.child.signalCode).toBe('SIGKILL');
      const stop = e2e.tap!.find(
        (e) =>
          e.type === 'upgrade-step' && e.operationId === op && e.step === 'stop-old' && e.outcome === 'begin',
      );
      if (!stop) throw new Error('no stop-old event before the crash');
      e2e.tap!.close();
      // While spcd is dead, the old libvirt is stopped: the guest runs with no daemon at all. spcd
      // passes this failpoint once the old one's processes are gone; the engine may still be
      // recording the stop (agent/executor/stop-old.ts).
      await waitFor(
        'the engine to report the old libvirt stopped',
        async () => (await inspect(before.containerId!))?.State.Running === false,
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      await startSpcd();
      const after = await waitFor(
        'recovery to put the previous generation back',
        async () => {
          const c = await e2e.api.container(e2e.container);
          return (
            c.state === 'running' &&
            c.containerId === before.containerId &&
            c.startedAt !== before.startedAt &&
            c
          );
        },
        { timeoutMs: 120_000, intervalMs: 100 },
      );
      expect(after.generation).toBe(before.generation);
      const gens = await e2e.api.generations(e2e.container);
      const undone = gens.find((g) => g.generation > before.generation);
      expect(undone?.outcome).toBe('rolled-back');
      expect(undone?.reason).toMatch(/interrupted at step stopping-old/);
      // spcd's own account: the stop-old event, and the start time it reports for the recovered container.
      const windowS = Date.parse(after.startedAt!) / 1000 - stop.at / 1000;
      return {
        tStop: stop.at / 1000,
        spcdWindowS: windowS,
        spcdWindow: 'stopToRecoveredStart',
        ids: { old: before.containerId!, new: before.containerId! },
        operationId: op,
      };
    });
    expectSurvived(r);
  }, 600_000);

  it('refuses a rollback to libvirt 9 while the guest runs (VM_SAFETY_REFUSED, with its reason)', async () => {
    const before = await e2e.api.container(e2e.container);
    const pidBefore = (await inspect(e2e.container))!.State.Pid;
    const gens = await e2e.api.generations(e2e.container);
    const v9 = gens.find((g) => g.image === IMAGE_9 && g.outcome !== 'rolled-back' && g.outcome !== 'failed');
    expect(v9, JSON.stringify(gens)).toBeDefined();
    const op = await e2e.api.post(`/v1/containers/${e2e.container}/rollback`, {
      toGeneration: v9!.generation,
    });
    const fin = await e2e.tap!.finished(op, 120_000);
    console.log(`downgrade refusal: ${JSON.stringify(fin.error)}`);
    e2e.downgradeRefused = fin.phase === 'failed' && fin.error?.code === 'VM_SAFETY_REFUSED' ? 1 : 0;
    expect(fin.phase).toBe('failed');
    expect(fin.error?.code).toBe('VM_SAFETY_REFUSED');
    expect(fin.error?.message).toMatch(/downgrade .* from 11\.3\.0 to 9\.0\.0/);
    expect(fin.error?.message).toContain(e2e.guest);
    const after = await e2e.api.container(e2e.container);
    expect(after.containerId).toBe(before.containerId);
    expect(after.startedAt).toBe(before.startedAt);
    expect(after.generation).toBe(before.generation);
    expect((await inspect(e2e.container))!.State.Pid).toBe(pidBefore);
    expect(startTime(e2e.qemuPid)).toBe(e2e.qemuStart);
    expect(await virsh('domstate', e2e.guest)).toBe('running');
  }, 300_000);

  it('refuses to stop the libvirt container for a definition without the /sys/fs/cgroup bind (SIGHUP reload)', async () => {
    const before = await e2e.api.container(e2e.container);
    const pidBefore = (await inspect(e2e.container))!.State.Pid;
    writeLibvirtSet({ image: IMAGE_11, dropCgroupBind: true });
    const hupAt = Date.now();
    e2e.spcd!.child.kill('SIGHUP');
    await e2e.tap!.wait('the reload', (e) => e.type === 'reload' && e.ok === true, 60_000);
    const refused = await waitFor(
      'the reload-triggered recreate to be refused',
      async () => {
        const c = await e2e.api.container(e2e.container);
        // lastError may still hold the downgrade refusal: wait for this one.
        return (
          c.lastError?.code === 'VM_SAFETY_REFUSED' &&
          c.lastError.message.includes('cgroup-bind') &&
          Date.parse(c.lastError.at) >= hupAt - 1000 &&
          c
        );
      },
      { timeoutMs: 120_000, intervalMs: 200 },
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}; container: ${JSON.stringify(await e2e.api.container(e2e.container))}`);
    });
    console.log(`definition refusal: ${JSON.stringify(refused.lastError)}`);
    expect(refused.lastError?.message).toContain('cgroup-bind');
    const c = await inspect(e2e.container);
    expect(c!.Id).toBe(before.containerId);
    expect(c!.State.Running).toBe(true);
    expect(c!.State.Pid).toBe(pidBefore);
    expect(c!.State.StartedAt).toBe(before.startedAt);
    expect(startTime(e2e.qemuPid)).toBe(e2e.qemuStart);
    expect(await virsh('domstate', e2e.guest)).toBe('running');
  }, 300_000);
});
