/**
 * `spcctl fleet status`: the rollout at a glance, read through the Kubernetes
 * API with a kubeconfig (any node or workstation; its cluster checked as spcd
 * checks it, agent/kube/kubeconfig.ts), or from the etcd cluster
 * of hosts without Kubernetes (fleet-etcd.ts), not through spcd's socket. One
 * view of both (agent/rollout/fleet-view.ts), rendered here.
 */
import type { FleetStatus } from '../rollout/fleet-view.js';
import { PHASES, type PhaseReport } from '../rollout/decide.js';
import { boolFlagValue, flagOrEnv, KUBE_FLAGS, type FlagValues } from '../model/flags.js';
import { escapeControl } from '../model/text.js';
import { formatMs } from '../model/units.js';
import type { CommandContext } from './commands.js';
import { readEtcdFleet, wantsEtcd } from './fleet-etcd.js';
import { CliError, EXIT, type ExitCode } from './exit.js';

const BAR = 30;

/** `[#########.....]`: done, then failed and rolled back (`x`), of every node in the rollout. */
export function progressBar(done: number, failed: number, total: number, width = BAR): string {
  if (total <= 0) return `[${'.'.repeat(width)}]`;
  const d = Math.floor((done / total) * width);
  const f = Math.min(width - d, Math.ceil((failed / total) * width));
  return `[${'#'.repeat(d)}${'x'.repeat(f)}${'.'.repeat(width - d - f)}]`;
}

const iso = (t: number): string => new Date(t).toISOString().replace(/\.\d+Z$/, 'Z');

function nodeLine(p: PhaseReport, now: number): string {
  const why = [p.reason, p.message].filter(Boolean).join(': ');
  const age = formatMs(Math.max(0, Math.round((now - p.since) / 1000)) * 1000);
  return `  ${p.node}  ${p.phase}${p.canary ? ' (canary)' : ''}${why ? `  ${why}` : ''}  for ${age}`;
}

export function formatFleetStatus(s: FleetStatus, allNodes = false): string {
  const out: string[] = [];
  if (!s.desired || !s.rollout || !s.summary) {
    const where =
      s.backend === 'etcd' ? `key ${s.desiredKey} in etcd` : `ConfigMap ${s.namespace}/${s.configMap}`;
    out.push(`no desired ${where}: nothing is being rolled out`);
    out.push(`${s.nodes.length} node(s) have reported a phase`);
    return out.map((l) => escapeControl(l)).join('\n') + '\n';
  }
  const r = s.rollout;
  const sum = s.summary;
  const c = sum.counts;
  const head = [
    `rollout ${r.id}`,
    sum.state + (sum.reason && sum.reason !== 'paused' ? ` (${sum.reason})` : ''),
    `N=${r.maxConcurrent ?? 'node default'}`,
  ];
  if (r.canary) {
    const passed = Object.values(sum.canaries).filter((x) => x === 'passed').length;
    head.push(`canary ${passed}/${r.canary.nodes} passed, soak ${formatMs(r.canary.soakMs)}`);
  }
  if (r.failureBudget) {
    const limits = [
      r.failureBudget.maxFailed !== undefined ? `${r.failureBudget.maxFailed}` : undefined,
      r.failureBudget.maxFailedPercent !== undefined ? `${r.failureBudget.maxFailedPercent}%` : undefined,
    ].filter(Boolean);
    head.push(`failed ${sum.failed.length} of budget ${limits.join(' / ')}`);
  }
  if (r.windows.count > 0)
    head.push(
      r.windows.open
        ? 'window open'
        : `window closed${r.windows.opensAt !== undefined ? `, opens ${iso(r.windows.opensAt)}` : ''}`,
    );
  out.push(head.join('  '));
  const failed = c.failed + c['rolled-back'];
  const pct = sum.nodes > 0 ? Math.floor((c.done * 100) / sum.nodes) : 0;
  out.push(`${progressBar(c.done, failed, sum.nodes)} ${c.done}/${sum.nodes} done (${pct}%)`);
  out.push(
    PHASES.filter((p) => c[p] > 0)
      .map((p) => `${p} ${c[p]}`)
      .join('  ') || 'no node has reported on this rollout yet',
  );
  const held = s.slots.filter((x) => x.holder);
  if (held.length > 0) out.push(`slots held: ${held.map((x) => x.holder).join(', ')}`);
  const mine = s.nodes.filter((p) => p.rollout === r.id);
  const shown = allNodes
    ? mine
    : mine.filter((p) => p.phase === 'failed' || p.phase === 'rolled-back' || p.phase === 'pull-failed');
  if (shown.length > 0) {
    out.push(allNodes ? 'nodes:' : 'needs attention:');
    for (const p of shown) out.push(nodeLine(p, s.at));
  }
  const elsewhere = s.nodes.length - mine.length;
  if (elsewhere > 0) out.push(`${elsewhere} node(s) last reported on another rollout`);
  return out.map((l) => escapeControl(l)).join('\n') + '\n';
}

export async function fleet(ctx: CommandContext): Promise<ExitCode> {
  const sub = ctx.args.positionals[0];
  if (sub !== 'status') throw new CliError(`unknown fleet command: ${sub}; try: fleet status`, EXIT.USAGE);
  const v = ctx.args.values;
  const warn = (line: string): void => void ctx.io.stderr.write(`spcctl: ${line}\n`);
  const status = wantsEtcd(v, ctx.env)
    ? await readEtcdFleet(v, ctx.env, Date.now(), warn)
    : await readKubeFleet(v, ctx.env, Date.now(), warn);
  ctx.io.stdout.write(
    ctx.json ? JSON.stringify(status, null, 2) + '\n' : formatFleetStatus(status, v.nodes === true),
  );
  return EXIT.OK;
}

/** The kubeconfig, or where to find one, refused before anything is sent: the operator's to fix (exit 2). */
const REFUSED_BEFORE_SENDING = new Set([
  'KUBECONFIG_INSECURE',
  'SETTINGS_INVALID',
  'UNTRUSTED_PATH',
  'SECRETS_INSECURE',
  'SPEC_IO',
]);

/** --kube-insecure, else SPCD_KUBE_INSECURE, as spcd reads it; a bad value exits 2. */
function kubeInsecure(v: FlagValues, env: NodeJS.ProcessEnv): boolean {
  const raw = flagOrEnv(v, env, KUBE_FLAGS)('kube-insecure');
  const insecure = boolFlagValue(raw);
  if (insecure === undefined)
    throw new CliError(`--kube-insecure: '${raw}' is not true or false`, EXIT.USAGE);
  return insecure;
}

async function readKubeFleet(
  v: FlagValues,
  env: NodeJS.ProcessEnv,
  now: number,
  warn: (line: string) => void,
): Promise<FleetStatus> {
  const str = (k: string): string | undefined => (typeof v[k] === 'string' ? v[k] : undefined);
  const insecure = kubeInsecure(v, env);
  // Loaded on use: the other commands never load the Kubernetes client.
  const { readFleetStatus } = await import('../kube/fleet-status.js');
  const kubeconfig = str('kubeconfig');
  const namespace = str('namespace');
  try {
    return await readFleetStatus({
      ...(kubeconfig ? { kubeconfig } : {}),
      ...(namespace ? { namespace } : {}),
      configMap: str('configmap') ?? 'spcd-desired',
      now,
      env,
      insecure,
      warn,
    });
  } catch (err) {
    const code = (err as { code?: string }).code;
    const msg = (err as Error).message;
    if (code === 'KUBE_UNAVAILABLE')
      throw new CliError(`the Kubernetes API does not answer: ${msg}`, EXIT.UNREACHABLE);
    if (code !== undefined && REFUSED_BEFORE_SENDING.has(code))
      throw new CliError(`${msg} (${code})`, EXIT.USAGE);
    throw new CliError(msg, EXIT.FAILED);
  }
}
