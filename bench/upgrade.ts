/**
 * bench:upgrade — spcd's window of unavailability for an upgrade against the
 * raw engine floor, in the same run, on the real engine.
 *
 *  raw:  stop + remove + create + start of the same container (same create
 *        body, from agent/engine/create-options) straight through dockerode,
 *        image already present; the window is stop call -> start returned.
 *  spcd: upgradeContainer() with the real DockerEngine, StateStore, Journal,
 *        HealthManager; the image is pulled from a real local registry
 *        (scripts/registry.sh) before the window; the window is the result's
 *        window.stopToRunningMs (stop call on the old -> new one running).
 *
 * The two are interleaved (raw, spcd, raw, spcd, ...) so they share the
 * machine's noise; medians are reported. pull_in_window is 1 when any pull
 * event of a repetition is at or after its stop began.
 * The last line is the contract:
 *   upgrade_window_ratio=<spcd window / raw engine floor> pull_in_window=<0|1>
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Dockerode from 'dockerode';
import { createBody } from '../agent/engine/create-options.js';
import { DockerEngine } from '../agent/engine/docker.js';
import { cleanupInstance, DOCKER_SOCKET } from '../test/support/docker.js';
import { MountPreparer, NO_CONFIG } from '../agent/config/preparer.js';
import { ProcVmProbe } from '../agent/host/vm-probe.js';
import { noFailpoint } from '../agent/executor/failpoint.js';
import type { PullPolicy } from '../agent/executor/image.js';
import type { ExecutorDeps } from '../agent/executor/ports.js';
import { createContainer } from '../agent/executor/simple.js';
import { upgradeContainer, type UpgradeResult } from '../agent/executor/upgrade.js';
import { HealthManager } from '../agent/health/manager.js';
import { HealthSync } from '../agent/reconciler/health-sync.js';
import { createLogger } from '../agent/log.js';
import { systemClock } from '../agent/model/clock.js';
import { EventBus, type SpcdEvent } from '../agent/model/events.js';
import { specHash } from '../agent/model/hash.js';
import { allContainers, type ContainerSpec } from '../agent/model/spec.js';
import { pickPrimary } from '../agent/planner/plan.js';
import { loadDesired } from '../agent/spec/load.js';
import { Journal } from '../agent/state/journal.js';
import { StateStore } from '../agent/state/store.js';
import { ALLOW_ALL } from '../agent/model/image-policy.js';

const REPS = Number(process.env.BENCH_REPS ?? 7);
const SOCKET = process.env.DOCKER_SOCKET ?? DOCKER_SOCKET;
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = [resolve(HERE, '..', '..'), resolve(HERE, '..'), process.cwd()].find((d) =>
  existsSync(join(d, 'scripts', 'registry.sh')),
)!;
const INSTANCE = `bench-upgrade-${process.pid}`;
const docker = new Dockerode({ socketPath: SOCKET });
const log = createLogger({ level: 'warn' });

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

function registry(args: string[]): string {
  return execFileSync('bash', [join(ROOT, 'scripts', 'registry.sh'), ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
}

async function loadSpec(dir: string, name: string, image: string): Promise<ContainerSpec> {
  const sets = join(dir, `sets-${name}`);
  mkdirSync(sets, { recursive: true });
  writeFileSync(
    join(sets, 'bench.yaml'),
    `set: bench\ncontainers:\n  ${name}:\n    image: ${image}\n    command: [demo-service, sleep]\n    network: none\n    stop_grace_period: 2s\n`,
  );
  const d = await loadDesired({ setsDir: sets });
  return allContainers(d.sets)[0]!;
}

function removeOurs(): Promise<void> {
  return cleanupInstance(INSTANCE);
}

/** One raw engine upgrade: stop + remove + create + start; the window is stop -> start returned. */
async function rawOnce(
  id: string,
  spec: ContainerSpec,
  generation: number,
): Promise<{ id: string; windowMs: number }> {
  const body = createBody({
    spec,
    identity: {
      instance: INSTANCE,
      set: spec.set,
      container: spec.name,
      generation,
      specHash: specHash(spec),
      configHash: 'none',
    },
  });
  const t0 = performance.now();
  await docker.getContainer(id).stop({ t: Math.ceil(spec.stopGraceMs / 1000) });
  await docker.getContainer(id).remove({ force: true });
  const created = await docker.createContainer(body as unknown as Dockerode.ContainerCreateOptions);
  await created.start();
  return { id: created.id, windowMs: performance.now() - t0 };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'spcd-bench-upgrade-'));
  const regDir = join(dir, 'registry');
  let regHost: string | undefined;
  try {
    const port = registry(['start', regDir]);
    registry(['push', regDir, '1', '2']);
    regHost = `127.0.0.1:${port}`;
  } catch (err) {
    console.log(`# no local registry (${(err as Error).message.split('\n')[0]}); spcd uses the local images`);
  }
  const image = (tag: string): string =>
    regHost ? `${regHost}/kolla/demo-service:${tag}` : `spcd-demo/service:${tag}`;
  const pull: PullPolicy = regHost ? 'always' : 'never';

  const events = new EventBus();
  const seen: SpcdEvent[] = [];
  events.subscribe((e) => seen.push(e));
  const engine = new DockerEngine({ socketPath: SOCKET, log });
  const state = new StateStore(join(dir, 'state'));
  await state.load();
  const journal = new Journal(join(dir, 'state'));
  await journal.init();
  const health = new HealthManager({ exec: engine, clock: systemClock, log });
  const deps: ExecutorDeps = {
    engine,
    state,
    journal,
    health: new HealthSync(health, systemClock),
    preparer: new MountPreparer(join(ROOT, 'healthchecks'), NO_CONFIG),
    vms: new ProcVmProbe(),
    events,
    log,
    clock: systemClock,
    failpoint: noFailpoint,
    instance: INSTANCE,
    gateDeadlineMs: 30_000,
    minReadyMs: 200,
    pullActivityTimeoutMs: 30_000,
    registryAuth: () => Promise.resolve(undefined),
    imagePolicy: ALLOW_ALL,
  };

  const rawName = `${INSTANCE}-raw`;
  const spcdName = `${INSTANCE}-spcd`;
  const raw: number[] = [];
  const spcdRun: number[] = [];
  const spcdHealthy: number[] = [];
  const pulls: number[] = [];
  let pullInWindow = 0;
  try {
    await removeOurs();
    // raw container, first generation, started the plain way
    const rawSpecs = [
      await loadSpec(dir, rawName, 'spcd-demo/service:1'),
      await loadSpec(dir, rawName, 'spcd-demo/service:2'),
    ];
    const first = createBody({
      spec: rawSpecs[0]!,
      identity: {
        instance: INSTANCE,
        set: 'bench',
        container: rawName,
        generation: 1,
        specHash: 'v1-raw',
        configHash: 'none',
      },
    });
    const c = await docker.createContainer(first as unknown as Dockerode.ContainerCreateOptions);
    await c.start();
    let rawId = c.id;
    // spcd container, first generation through the executor
    const spcdSpecs = [await loadSpec(dir, spcdName, image('1')), await loadSpec(dir, spcdName, image('2'))];
    await createContainer(
      deps,
      { spec: spcdSpecs[0]!, specHash: specHash(spcdSpecs[0]!), configHash: 'none' },
      'bench-0',
    );

    for (let i = 1; i <= REPS; i++) {
      const next = i % 2; // 1 -> :2, 0 -> :1
      const r = await rawOnce(rawId, rawSpecs[next]!, i + 1);
      rawId = r.id;
      raw.push(r.windowMs);

      const spec = spcdSpecs[next]!;
      if (regHost)
        await docker
          .getImage(spec.image)
          .remove()
          .catch(() => undefined); // a real pull each time
      const current = pickPrimary(
        spcdName,
        (await engine.listManaged(INSTANCE)).filter((o) => o.identity.container === spcdName),
      );
      const from = seen.length;
      const res: UpgradeResult = await upgradeContainer(deps, {
        operationId: `bench-${i}`,
        kind: 'upgrade',
        spec,
        specHash: specHash(spec),
        current,
        pull,
        reason: 'bench',
      });
      const mine = seen.slice(from);
      const stopAt = mine.find(
        (e) => e.type === 'upgrade-step' && e.step === 'stop-old' && e.outcome === 'begin',
      )?.at;
      const pullEvents = mine.filter(
        (e) => e.type === 'pull-progress' || (e.type === 'upgrade-step' && e.step === 'pull'),
      );
      const lastPull = Math.max(...pullEvents.map((e) => e.at));
      if (stopAt === undefined || !res.window) throw new Error('no window reported');
      const inWindow = pullEvents.some((e) => e.at >= stopAt);
      if (inWindow) pullInWindow = 1;
      spcdRun.push(res.window.stopToRunningMs);
      spcdHealthy.push(res.window.stopToHealthyMs);
      pulls.push(res.pullMs);
      console.log(
        `rep ${i}: raw ${r.windowMs.toFixed(0)} ms | spcd stop->running ${res.window.stopToRunningMs} ms, stop->healthy ${res.window.stopToHealthyMs} ms, pull ${res.pullMs} ms (${pullEvents.filter((e) => e.type === 'pull-progress').length} progress events, last ${stopAt - lastPull} ms before the stop) gen ${res.generation} ${res.imageDigest ?? ''}`,
      );
    }
  } finally {
    await health.close();
    await removeOurs();
    if (regHost) {
      for (const t of ['1', '2'])
        await docker
          .getImage(image(t))
          .remove()
          .catch(() => undefined);
      registry(['stop', regDir]);
    }
    rmSync(dir, { recursive: true, force: true });
  }
  const rawMed = median(raw);
  const spcdMed = median(spcdRun);
  console.log(
    `reps=${REPS} image_source=${regHost ? `registry ${regHost} (pull always, before the window)` : 'local'}`,
  );
  console.log(
    `raw_engine_floor_ms median=${rawMed.toFixed(0)} min=${Math.min(...raw).toFixed(0)} max=${Math.max(...raw).toFixed(0)} (stop+remove+create+start)`,
  );
  console.log(
    `spcd_window_ms median=${spcdMed.toFixed(0)} min=${Math.min(...spcdRun)} max=${Math.max(...spcdRun)} (stop->running)`,
  );
  console.log(`spcd_window_to_healthy_ms median=${median(spcdHealthy).toFixed(0)} (min-ready gate 200 ms)`);
  console.log(`spcd_pull_ms median=${median(pulls).toFixed(0)} (outside the window)`);
  console.log(`upgrade_window_ratio=${(spcdMed / rawMed).toFixed(3)} pull_in_window=${pullInWindow}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
