/**
 * The adoption variant of the OpenStack end-to-end test
 * (docs/explanation/openstack-proof.md, "Adopting a kolla-ansible host"):
 * on the same control plane, the compute host becomes one that
 * kolla-ansible built (openstack-kolla.ts), two VMs boot on it, and spcd
 * takes it over as an operator does (docs/how-to/adopt.md): the scan
 * reviewed and kept as the set, the plan read, the units retired, each
 * container adopted on the operator's word, spcd killed with SIGKILL twice
 * in the middle. Then its upgrades and a config change go through spcd.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import type { PlanView } from '../../agent/api/types.js';
import { runSpcctl } from '../support/cli-run.js';
import { docker } from '../support/docker.js';
import { DOCKER, run } from '../support/kolla-box.js';
import { waitFor } from '../support/wait.js';
import type { OpenStackE2eRun } from './openstack-e2e-run.js';
import { KOLLA_NAMES, kollaUnit, started, type KollaComputeHost, type Started } from './openstack-kolla.js';
import { OVS_COMPUTE_SET } from './openstack-ovs.js';
import type { Acted } from './openstack-steps.js';

export const ADOPT_SET = 'kolla';

type Entry = Record<string, unknown>;
type SetDoc = { containers?: Record<string, Entry>; sets?: Record<string, SetDoc> };

/** Every container entry of a set file, nested sets included. */
function entries(doc: SetDoc): Map<string, Entry> {
  const out = new Map<string, Entry>(Object.entries(doc.containers ?? {}));
  for (const s of Object.values(doc.sets ?? {})) for (const [k, v] of entries(s)) out.set(k, v);
  return out;
}

/** What the adoption variant counts (the summary line's adopt fields). */
export interface AdoptFigures {
  adopted: number;
  restarts: number;
  unitsRetired: number;
  /** Containers whose adoption spcd refused while their kolla-ansible unit was still active. */
  unitsRefused: number;
  adoptS: number;
}

export class Adoption {
  /** Each container as kolla-ansible started it: adoption keeps all of it. */
  readonly before = new Map<string, Started>();
  readonly figures: AdoptFigures = {
    adopted: 0,
    restarts: Number.NaN,
    unitsRetired: 0,
    unitsRefused: 0,
    adoptS: Number.NaN,
  };
  private hostOverrides: { containers?: Record<string, Entry>; values?: unknown } = {};

  constructor(
    private readonly e2e: OpenStackE2eRun,
    readonly host: KollaComputeHost,
  ) {}

  private get setsDir(): string {
    return this.e2e.sb!.setsDir;
  }

  private readonly cli = (...args: string[]): Promise<{ code: number; out: string; err: string }> =>
    runSpcctl(['--socket', this.e2e.sb!.socket, ...args], {});

  /**
   * spcd's compute set out (its containers removed with the set), the host
   * rebuilt by kolla-ansible's module with the config spcd rendered, Nova's
   * compute up on it.
   */
  async switchHost(): Promise<void> {
    const sb = this.e2e.sb!;
    this.host.copyConfig(join(sb.stateDir, 'config'));
    const overridesFile = join(sb.root, 'overrides.yaml');
    this.hostOverrides = yaml.load(readFileSync(overridesFile, 'utf8')) as typeof this.hostOverrides;
    // The network set's own overrides stay; the compute containers' go with their set.
    const keep = Object.entries(this.hostOverrides.containers ?? {}).filter(
      ([n]) => !KOLLA_NAMES.includes(n),
    );
    writeFileSync(
      overridesFile,
      yaml.dump({ containers: Object.fromEntries(keep), values: this.hostOverrides.values }),
    );
    rmSync(join(this.setsDir, 'compute.yaml'));
    await this.e2e.api.post('/v1/reload', {});
    await waitFor(
      "spcd's compute containers removed",
      async () => (await Promise.all(KOLLA_NAMES.map((n) => exists(n)))).every((e) => !e),
      { timeoutMs: 600_000, intervalMs: 1000 },
    );
    const tUp = Date.now();
    await this.host.up();
    console.log(`kolla host: units ${(await this.host.unitStates()).join(' ')}`);
    for (const n of KOLLA_NAMES) this.before.set(n, await started(n));
    await this.e2e.computeUp(tUp, 900_000);
    console.log(
      `kolla host: nova-compute up ${((Date.now() - tUp) / 1000).toFixed(1)} s after the first container`,
    );
  }

  /**
   * The scan, reviewed: spcd's checks added to each entry (the shipped
   * set's, with this host's overrides of them), and nova_libvirt's role and
   * domain census, as the runbook says.
   */
  private async reviewedScan(): Promise<string> {
    const scan = await this.cli('adopt', 'scan', ADOPT_SET, '--only', KOLLA_NAMES.join(','));
    if (scan.code !== 0) throw new Error(`adopt scan: ${scan.err}`);
    const doc = yaml.load(scan.out) as SetDoc;
    const shipped = entries(yaml.load(readFileSync(OVS_COMPUTE_SET, 'utf8')) as SetDoc);
    for (const [name, entry] of Object.entries(doc.containers ?? {})) {
      const from = shipped.get(name) ?? {};
      const checks = this.hostOverrides.containers?.[name]?.healthchecks ?? from.healthchecks;
      if (checks) entry.healthchecks = checks;
      for (const k of ['role', 'census'] as const) if (from[k] !== undefined) entry[k] = from[k];
    }
    const header = scan.out.split('\n').filter((l) => l.startsWith('#'));
    return `${header.join('\n')}\n# Reviewed: spcd's checks added, with nova_libvirt's role and census.\n${yaml.dump(doc)}`;
  }

  /** The plan on the kept set: adopt for each, not blocked, and nothing else for them. */
  private async planSaysAdopt(): Promise<void> {
    const plan = await this.cli('plan', '-o', 'json');
    const view = JSON.parse(plan.out) as PlanView;
    const mine = view.items.filter((i) => KOLLA_NAMES.includes(i.container));
    const ok = mine.filter((i) => i.action === 'adopt' && !i.reason.startsWith('blocked'));
    if (ok.length !== KOLLA_NAMES.length || mine.length !== ok.length)
      throw new Error(`the plan does not adopt each container and nothing else:\n${plan.out}`);
  }

  /** One `spcctl adopt apply NAME --wait`. */
  /**
   * The operator's word given too early: spcd must refuse each adoption
   * while kolla-ansible's unit (asked through the box's systemd, the e2e's
   * --systemctl) could still stop or restart the container, naming the
   * unit. Returns how many it refused.
   */
  private async refusedWhileSupervised(): Promise<number> {
    let refused = 0;
    for (const name of KOLLA_NAMES) {
      const r = await this.cli('adopt', 'apply', name, '--wait');
      if (r.code === 0) throw new Error(`${name} adopted while its kolla-ansible unit was active`);
      if (!r.err.includes('ADOPT_BLOCKED') || !r.err.includes(`${kollaUnit(name)} is active`))
        throw new Error(`adopt apply ${name} refused, but not for its unit: ${r.err}`);
      refused++;
    }
    return refused;
  }

  private async apply(name: string): Promise<void> {
    const r = await this.cli('adopt', 'apply', name, '--wait');
    if (r.code !== 0) throw new Error(`adopt apply ${name}: ${r.err}${r.out}`);
  }

  /**
   * spcd started with a failpoint of the adoption, `name` adopted until it
   * kills itself there, spcd started again; returns whether it is adopted.
   */
  private async killedAt(
    point: 'adopt.before-record' | 'adopt.after-record',
    name: string,
  ): Promise<boolean> {
    const ctl = this.e2e.ctl;
    ctl.tap().close();
    await ctl.spcd().stop();
    await ctl.startSpcd({ SPCD_FAILPOINT: point });
    await this.cli('adopt', 'apply', name);
    if ((await ctl.spcd().exitWithin(120_000)) === 'still running')
      throw new Error(`spcd did not reach ${point}`);
    ctl.tap().close();
    await ctl.startSpcd();
    const c = await this.e2e.api.container(name);
    console.log(`adopt: killed at ${point} adopting ${name}; after the restart generation ${c.generation}`);
    return adoptedAs(c, this.before.get(name));
  }

  /**
   * The takeover, as one checked step: scan, review, plan, reload, units
   * retired, each container adopted (spcd killed before the record of one
   * and after the record of another), and every container the same one,
   * never restarted.
   */
  readonly adoptHost = async (): Promise<Acted> => {
    const t0 = Date.now();
    writeFileSync(join(this.setsDir, `${ADOPT_SET}.yaml`), await this.reviewedScan());
    await this.planSaysAdopt();
    const reload = await this.cli('reload', '--wait');
    if (reload.code !== 0) throw new Error(`reload: ${reload.err}`);
    this.figures.unitsRefused = await this.refusedWhileSupervised();
    this.figures.unitsRetired = await this.host.retire();
    const [db, vswitchd, agent, libvirt, compute] = KOLLA_NAMES as [string, string, string, string, string];
    await this.apply(db);
    await this.apply(vswitchd);
    if (await this.killedAt('adopt.before-record', agent))
      throw new Error(`${agent} adopted though spcd died before the record`);
    await this.apply(agent);
    if (!(await this.killedAt('adopt.after-record', libvirt)))
      throw new Error(`${libvirt} not adopted though spcd died after the record`);
    await this.apply(compute);
    this.figures.adoptS = (Date.now() - t0) / 1000;
    let restarts = 0;
    for (const n of KOLLA_NAMES) {
      const now = await started(n);
      const was = this.before.get(n)!;
      if (now.id !== was.id || now.startedAt !== was.startedAt || now.restartCount !== was.restartCount)
        restarts++;
      // The API's view follows the first listing after the operation ended: wait for it.
      const c = await this.shownAdopted(n, was);
      if (adoptedAs(c, was) && c.containerId === now.id) this.figures.adopted++;
      else
        console.log(
          `adopt: ${n} not counted as adopted: generation ${c.generation}, spcd's container ${c.containerId ?? 'none'}, ` +
            `kolla-ansible's ${was.id}, running now ${now.id}`,
        );
    }
    this.figures.restarts = restarts;
    return {
      stopAt: t0,
      libvirtStopped: false,
      spcd: `adopted=${this.figures.adopted}/${KOLLA_NAMES.length} adopt_restarts=${restarts} units_retired=${this.figures.unitsRetired} units_refused=${this.figures.unitsRefused} adopt_s=${this.figures.adoptS.toFixed(1)}`,
    };
  };

  /** The API's view of `name` once it shows the adoption of `was` (30 s), or as it stands then. */
  private async shownAdopted(
    name: string,
    was: Started,
  ): Promise<{ generation: number; containerId: string | null }> {
    const shown = async () => {
      const c = await this.e2e.api.container(name);
      return adoptedAs(c, was) ? c : undefined;
    };
    const c = await waitFor(`${name} shown adopted`, shown, { timeoutMs: 30_000, intervalMs: 250 }).catch(
      () => undefined,
    );
    return c ?? this.e2e.api.container(name);
  }

  /**
   * An operator's change of one entry of the kept set, then a reload: spcd
   * replaces the container through its upgrade road (a labelled generation
   * 2). The step's stop is the old container's.
   */
  readonly changeEntry = async (name: string, change: (e: Entry) => void): Promise<Acted> => {
    const file = join(this.setsDir, `${ADOPT_SET}.yaml`);
    const doc = yaml.load(readFileSync(file, 'utf8')) as SetDoc;
    change(doc.containers![name]!);
    const before = await this.e2e.api.container(name);
    const t0 = Date.now();
    writeFileSync(file, yaml.dump(doc));
    await this.e2e.api.post('/v1/reload', {});
    const tap = this.e2e.ctl.tap();
    const stop = await tap.wait(
      `${name}'s stop-old after the reload`,
      (e) => e.type === 'upgrade-step' && e.container === name && e.step === 'stop-old' && e.at >= t0,
      600_000,
    );
    // A pass's replacement (no operator operation): its commit, or a failed step, ends it.
    const end = await tap.wait(
      `${name}'s replacement to commit`,
      (e) =>
        e.type === 'upgrade-step' &&
        e.operationId === stop.operationId &&
        ((e.step === 'commit' && e.outcome === 'done') || e.outcome === 'failed'),
      900_000,
    );
    if (end.outcome === 'failed')
      throw new Error(`${name}'s replacement failed at ${end.step}: ${end.detail}`);
    const after = await this.e2e.api.container(name);
    if (after.generation !== before.generation + 1)
      throw new Error(`${name} at generation ${after.generation}`);
    return { stopAt: stop.at, libvirtStopped: false, spcd: `entry changed, generation ${after.generation}` };
  };

  /**
   * A config value changed in the host's /etc/kolla/nova-compute/nova.conf
   * (the adopted containers keep their config there), and nova_compute
   * restarted through spcd: Kolla's start copies it in. Checked in the
   * running container.
   */
  readonly changeConfig = async (key: string, value: string): Promise<Acted> => {
    const file = join(this.host.etcKolla, 'nova-compute', 'nova.conf');
    const text = readFileSync(file, 'utf8');
    const line = new RegExp(`^${key} = .*$`, 'm');
    if (!line.test(text)) throw new Error(`${file}: no ${key}`);
    writeFileSync(file, text.replace(line, `${key} = ${value}`));
    const acted = await this.e2e.actions.restart('nova_compute');
    // Kolla's start copies the file in before it runs nova-compute: the restart's end can come first.
    await waitFor(
      `nova_compute's nova.conf with ${key} = ${value}`,
      async () =>
        (
          await run(DOCKER, ['exec', 'nova_compute', 'cat', '/etc/nova/nova.conf'], { encoding: 'utf8' })
        ).stdout.includes(`${key} = ${value}`),
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    return { ...acted, spcd: `${acted.spcd} ${key}=${value}` };
  };
}

async function exists(name: string): Promise<boolean> {
  return docker()
    .getContainer(name)
    .inspect()
    .then(
      () => true,
      () => false,
    );
}

/**
 * spcd records the container kolla-ansible started as a generation of its
 * own (the first one on a host spcd never ran; here the next number after
 * the generations of spcd's own compute set, which the history keeps).
 */
function adoptedAs(c: { generation: number; containerId: string | null }, was: Started | undefined): boolean {
  return c.generation > 0 && c.containerId === was?.id;
}

/**
 * What the agent logged in a step's window (its ports, flows, resyncs): read
 * where the VMs lost packets, to place the loss (docs/explanation/adoption-proof.md).
 */
export async function agentLogIn(w: { name: string; from: number; to: number }): Promise<string[]> {
  const out = await run(
    DOCKER,
    [
      'logs',
      '--timestamps',
      '--since',
      String(Math.floor(w.from - 2)),
      '--until',
      String(Math.ceil(w.to + 2)),
      'neutron_openvswitch_agent',
    ],
    { encoding: 'utf8', maxBuffer: 64 << 20 },
  ).catch((e: Error) => ({ stdout: '', stderr: e.message }));
  return `${out.stdout}${out.stderr}`
    .split('\n')
    .filter((l) => /port|flow|sync|rpc_loop|spoof|devices|iptables|firewall|error|warn/i.test(l))
    .slice(0, 60);
}
