import { containersOf } from '../docker.js';
import type { ChaosWorld } from './world.js';

interface StatusContainer {
  name: string;
  state: string;
  generation: number;
  operation: string | null;
}
interface StatusDoc {
  sets: { containers: StatusContainer[]; sets: StatusDoc['sets'] }[];
}

function flatten(sets: StatusDoc['sets']): StatusContainer[] {
  return sets.flatMap((s) => [...s.containers, ...flatten(s.sets)]);
}

/**
 * What must hold once spcd has converged: spcd up; each container exactly
 * one instance, under its own name, running, at its last known good
 * generation; nothing staged, parked or orphaned (no task container); an
 * empty journal. Returns the reasons it does not hold yet (empty: converged).
 */
export async function notConverged(world: ChaosWorld): Promise<string[]> {
  const why: string[] = [];
  if (!world.alive()) return [`spcd is not running`];
  const answer = await world.api('GET', '/v1/status').catch((e: Error) => ({ status: 0, text: e.message }));
  if (answer.status !== 200)
    return [`GET /v1/status answered ${answer.status}: ${answer.text.slice(0, 200)}`];
  const status = JSON.parse(answer.text) as StatusDoc;
  const byName = new Map(flatten(status.sets).map((c) => [c.name, c]));
  // The definitions on disk are applied: the plan spcd would make from them now is empty.
  const plan = await world.api('GET', '/v1/plan').catch(() => undefined);
  if (plan?.status !== 200) why.push(`GET /v1/plan answered ${plan?.status ?? 'nothing'}`);
  else {
    const items = (
      JSON.parse(plan.text) as { items: { container: string; action: string; reason: string }[] }
    ).items;
    for (const i of items.filter((x) => x.action !== 'none'))
      why.push(`${i.container}: plan ${i.action} (${i.reason})`);
  }
  const journal = world.journalEntries();
  if (journal.length > 0) why.push(`journal not empty: ${journal.join(', ')}`);
  const lkg = world.lastKnownGood();
  const list = await containersOf(world.sb.instance);
  const tasks = list.filter((c) => c.Labels['spcd.task'] !== undefined);
  if (tasks.length > 0) why.push(`task containers left: ${tasks.map((t) => t.Names[0]).join(', ')}`);
  for (const c of world.containers) {
    const s = byName.get(c.name);
    if (!s) {
      why.push(`${c.name}: not in status`);
      continue;
    }
    if (s.state !== 'running') why.push(`${c.name}: state ${s.state}`);
    if (s.operation !== null) why.push(`${c.name}: operation ${s.operation} in flight`);
    const instances = list.filter(
      (x) => x.Labels['spcd.container'] === c.name && x.Labels['spcd.task'] === undefined,
    );
    if (instances.length !== 1) {
      why.push(`${c.name}: ${instances.length} instances (${instances.map((x) => x.Names[0]).join(', ')})`);
      continue;
    }
    const only = instances[0]!;
    if (only.Names[0] !== `/${c.name}`) why.push(`${c.name}: its instance is named ${only.Names[0]}`);
    if (only.State !== 'running') why.push(`${c.name}: engine says ${only.State}`);
    const gen = Number(only.Labels['spcd.generation']);
    const good = lkg.get(c.name);
    if (good !== gen) why.push(`${c.name}: running generation ${gen}, last known good ${String(good)}`);
  }
  const strangers = list.filter(
    (x) =>
      x.Labels['spcd.task'] === undefined &&
      !world.containers.some((c) => c.name === x.Labels['spcd.container']),
  );
  if (strangers.length > 0) why.push(`unknown containers: ${strangers.map((x) => x.Names[0]).join(', ')}`);
  return why;
}
