/** What each spcctl command does: ask the daemon, print a table or JSON. */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type {
  ContainerHealthView,
  GenerationView,
  OperationRef,
  PlanView,
  SetStatus,
  StatusDocument,
} from '../api/types.js';
import type { SpcdEvent } from '../model/events.js';
import { escapeControl } from '../model/text.js';
import type { DesiredState } from '../model/spec.js';
import { formatProblem, validateDir } from '../spec/load.js';
import type { SpecProblem } from '../spec/problems.js';
import { trustProblems, type NamedInput } from '../spec/trusted-paths.js';
import { containerSetSchema, overridesSchema, schemaText } from '../spec/schema.js';
import { intOption, type Parsed } from './args.js';
import { lineSplitter, type ApiClient } from './client.js';
import { CliError, EXIT, type ExitCode } from './exit.js';
import {
  allContainers,
  formatEvent,
  formatGenerations,
  formatHealth,
  formatPlan,
  formatPs,
  formatStatus,
} from './format.js';
import { generationDiff } from './gen-diff.js';
import { complete, completion } from './completion.js';
import { render, renderItem, type Tables } from './output.js';
import { fleet } from './fleet-status.js';
import { adopt } from './adopt.js';
import { runAndFollow } from './progress.js';
import { reloadResultLines } from './reload-result.js';
import { buildInfo, formatVersion } from '../version.js';

export interface CliIo {
  readonly stdout: { write(text: string): unknown; isTTY?: boolean };
  readonly stderr: { write(text: string): unknown };
}

export interface CommandContext {
  readonly args: Parsed;
  readonly io: CliIo;
  /** --json or -o json: the API's answer as it is, for scripts. */
  readonly json: boolean;
  /** Built on first use: commands that work without the daemon never touch it. */
  readonly client: () => ApiClient;
  /** spcctl's environment (the SPCD_* variables some commands read, as spcd does). */
  readonly env: NodeJS.ProcessEnv;
}

type Command = (ctx: CommandContext) => Promise<ExitCode>;

const enc = encodeURIComponent;
const print = (ctx: CommandContext, text: string): void => void ctx.io.stdout.write(text);
const printJson = (ctx: CommandContext, value: unknown): void =>
  print(ctx, JSON.stringify(value, null, 2) + '\n');
/** The answer in the form asked for with -o (the table when none). */
const show = (ctx: CommandContext, body: unknown, tables: Tables): void =>
  print(ctx, render(ctx.args.output, body, tables));

function name(ctx: CommandContext): string {
  return ctx.args.positionals[0] as string;
}

async function status(ctx: CommandContext): Promise<ExitCode> {
  const { body } = await ctx.client().call<StatusDocument>('GET', '/v1/status');
  show(ctx, body, { table: () => formatStatus(body), wide: () => formatStatus(body, true) });
  return EXIT.OK;
}

async function ps(ctx: CommandContext): Promise<ExitCode> {
  const { body } = await ctx.client().call<{ sets: SetStatus[] }>('GET', '/v1/sets');
  const list = allContainers(body.sets);
  show(ctx, list, { table: () => formatPs(list), wide: () => formatPs(list, true) });
  return EXIT.OK;
}

async function health(ctx: CommandContext): Promise<ExitCode> {
  const { body } = await ctx
    .client()
    .call<ContainerHealthView>('GET', `/v1/containers/${enc(name(ctx))}/health`);
  show(ctx, body, { table: () => formatHealth(body) });
  return body.status === 'unhealthy' ? EXIT.FAILED : EXIT.OK;
}

async function generations(ctx: CommandContext): Promise<ExitCode> {
  if (ctx.args.values.diff) return generationDiff(ctx);
  const { body } = await ctx
    .client()
    .call<{ name: string; generations: GenerationView[] }>(
      'GET',
      `/v1/containers/${enc(name(ctx))}/generations`,
    );
  show(ctx, body, {
    table: () => formatGenerations(body.name, body.generations),
    wide: () => formatGenerations(body.name, body.generations, true),
  });
  return EXIT.OK;
}

async function plan(ctx: CommandContext): Promise<ExitCode> {
  const { body } = await ctx.client().call<PlanView>('GET', '/v1/plan');
  show(ctx, body, { table: () => formatPlan(body) });
  return body.problems.length > 0 ? EXIT.FAILED : EXIT.OK;
}

/**
 * Starts a long operation: prints the accepted ref, or with --wait follows it
 * to its end; then, for a person (not --json), the lines `summary` makes of
 * its result when it succeeded.
 */
async function operation(
  ctx: CommandContext,
  path: string,
  body: Record<string, unknown>,
  summary?: (result: unknown) => string[],
): Promise<ExitCode> {
  const client = ctx.client();
  const start = async (): Promise<OperationRef> => (await client.call<OperationRef>('POST', path, body)).body;
  if (!ctx.args.values.wait) {
    const ref = await start();
    if (ctx.json) printJson(ctx, ref);
    else
      print(
        ctx,
        `operation ${ref.operationId}: ${ref.kind} ${ref.target} accepted (follow with: spcctl events)\n`,
      );
    return EXIT.OK;
  }
  const timeoutS = intOption(ctx.args.values, 'timeout', 1) ?? 900;
  if (ctx.json) {
    // scripts get the events of the operation as JSON lines
    return runAndFollow(
      client,
      start,
      { write: (t) => ctx.io.stdout.write(t), isTTY: false, json: true },
      ctx.io.stderr,
      timeoutS * 1000,
    );
  }
  const onSucceeded = summary && ((result: unknown) => print(ctx, summary(result).join('\n') + '\n'));
  return runAndFollow(client, start, ctx.io.stdout, ctx.io.stderr, timeoutS * 1000, { onSucceeded });
}

function expectGeneration(ctx: CommandContext): Record<string, unknown> {
  const n = intOption(ctx.args.values, 'expect-generation', 0);
  return n === undefined ? {} : { expectedGeneration: n };
}

async function upgrade(ctx: CommandContext): Promise<ExitCode> {
  const image = ctx.args.values.image;
  if (typeof image !== 'string' || image === '') throw new CliError('upgrade needs --image REF', EXIT.USAGE);
  return operation(ctx, `/v1/containers/${enc(name(ctx))}/upgrade`, { image, ...expectGeneration(ctx) });
}

async function rollback(ctx: CommandContext): Promise<ExitCode> {
  const to = intOption(ctx.args.values, 'to', 1);
  const body: Record<string, unknown> = {};
  if (to !== undefined) body.toGeneration = to;
  if (ctx.args.values.force) body.force = true;
  return operation(ctx, `/v1/containers/${enc(name(ctx))}/rollback`, body);
}

function lifecycle(kind: 'restart' | 'stop' | 'start'): Command {
  return (ctx) => operation(ctx, `/v1/containers/${enc(name(ctx))}/${kind}`, expectGeneration(ctx));
}

async function reload(ctx: CommandContext): Promise<ExitCode> {
  return operation(ctx, '/v1/reload', {}, reloadResultLines);
}

/**
 * A container's output is its own bytes: on a terminal its control
 * characters and escape sequences are shown escaped (\x1b, \r...), lines and
 * tabs kept, so a container cannot repaint the operator's terminal or set its
 * title. Piped, or with --raw, the bytes go out as they came.
 */
async function logs(ctx: CommandContext): Promise<ExitCode> {
  const tail = intOption(ctx.args.values, 'tail', 0) ?? 100;
  const follow = ctx.args.values.follow ? '&follow=1' : '';
  const escape = ctx.io.stdout.isTTY === true && ctx.args.values.raw !== true;
  const s = await ctx.client().stream(`/v1/containers/${enc(name(ctx))}/logs?tail=${tail}${follow}`, (t) => {
    ctx.io.stdout.write(escape ? escapeControl(t.replace(/\r\n/g, '\n'), { keepLines: true }) : t);
  });
  await s.done;
  return EXIT.OK;
}

async function events(ctx: CommandContext): Promise<ExitCode> {
  const s = await ctx.client().stream(
    '/v1/events',
    lineSplitter((line) => {
      if (line.trim() === '') return;
      const form = ctx.args.output;
      if (form === 'json') {
        print(ctx, line + '\n');
        return;
      }
      try {
        const e = JSON.parse(line) as SpcdEvent | { type: 'heartbeat' };
        if (form === 'yaml') print(ctx, renderItem('yaml', line, e));
        else if (e.type !== 'heartbeat') print(ctx, formatEvent(e) + '\n');
      } catch {
        print(ctx, line + '\n');
      }
    }),
  );
  await s.done;
  return EXIT.OK;
}

/** Works without the daemon: the same validation the daemon runs on reload. */
async function validate(ctx: CommandContext): Promise<ExitCode> {
  const overrides = ctx.args.values.overrides;
  const setsDir = ctx.args.positionals[0] as string;
  // The check library: --checks, DIR/../healthchecks,
  // else the one shipped with spcd.
  const candidates = [
    join(dirname(resolve(setsDir)), 'healthchecks', 'library.yaml'),
    new URL('../../healthchecks/library.yaml', import.meta.url).pathname,
  ];
  const checks = ctx.args.values.checks ?? candidates.find((c) => c !== undefined && existsSync(c));
  const render = wantsRender(ctx) ? renderInputs(ctx, setsDir) : undefined;
  // What the daemon would refuse to read as root (docs/explanation/security.md, "Trusted paths").
  const untrusted = await trustProblems([
    { path: setsDir, what: 'sets directory', kind: 'tree' },
    ...(typeof overrides === 'string'
      ? [{ path: overrides, what: 'overrides file', kind: 'file' as const }]
      : []),
    ...(typeof checks === 'string' ? [{ path: checks, what: 'check library', kind: 'file' as const }] : []),
    ...(render ? render.trust : []),
  ]);
  const { problems, desired } = await validateDir({
    setsDir,
    ...(typeof overrides === 'string' ? { overridesFile: overrides } : {}),
    ...(typeof checks === 'string' ? { checkLibraryFile: checks } : {}),
  });
  problems.unshift(...untrusted);
  // Templates are code: they are not run from a place the daemon would refuse.
  if (problems.length === 0 && desired && render) problems.push(...(await renderCheck(render, desired)));
  if (ctx.json) printJson(ctx, { valid: problems.length === 0, problems });
  for (const p of problems) ctx.io.stderr.write(formatProblem(p) + '\n');
  if (problems.length > 0) return EXIT.FAILED;
  if (!ctx.json) print(ctx, 'valid\n');
  return EXIT.OK;
}

/** Rendering is asked for by naming the values or the templates: a host's values are not in the sets. */
function wantsRender(ctx: CommandContext): boolean {
  const v = ctx.args.values;
  return [v.templates, v.globals, v.secrets].some((x) => typeof x === 'string');
}

interface RenderInputs {
  readonly templatesDir: string;
  readonly globalsFile: string | undefined;
  readonly secretsFile: string | undefined;
  readonly trust: NamedInput[];
}

/** The templates and value files `validate` renders with, and their trust checks. */
function renderInputs(ctx: CommandContext, setsDir: string): RenderInputs {
  const v = ctx.args.values;
  const templatesDir =
    (typeof v.templates === 'string'
      ? v.templates
      : [
          join(dirname(resolve(setsDir)), 'templates'),
          new URL('../../templates', import.meta.url).pathname,
        ].find((c) => existsSync(c))) ?? 'templates';
  const globalsFile = typeof v.globals === 'string' ? v.globals : undefined;
  const secretsFile = typeof v.secrets === 'string' ? v.secrets : undefined;
  const trust: NamedInput[] = [{ path: templatesDir, what: 'templates directory', kind: 'tree' }];
  if (globalsFile) trust.push({ path: globalsFile, what: 'globals file', kind: 'file' });
  if (secretsFile) trust.push({ path: secretsFile, what: 'secrets file', kind: 'secret' });
  return { templatesDir, globalsFile, secretsFile, trust };
}

/** Renders every container's config with the given values (config/render-check.ts): what is missing is named. */
async function renderCheck(inputs: RenderInputs, desired: DesiredState): Promise<SpecProblem[]> {
  const { renderProblems } = await import('../config/render-check.js');
  return renderProblems(desired, inputs);
}

/** The JSON Schema of set files (or, with --overrides, of the override file), as the validator defines them. */
async function schema(ctx: CommandContext): Promise<ExitCode> {
  print(ctx, schemaText(ctx.args.values.overrides ? overridesSchema() : containerSetSchema()));
  return EXIT.OK;
}

async function version(ctx: CommandContext): Promise<ExitCode> {
  const info = buildInfo();
  if (ctx.json) printJson(ctx, { version: info.version, commit: info.commit, date: info.date });
  else print(ctx, `${formatVersion('spcctl', info)}\n`);
  return EXIT.OK;
}

export const COMMAND_TABLE: Record<string, Command> = {
  status,
  ps,
  health,
  generations,
  upgrade,
  rollback,
  restart: lifecycle('restart'),
  stop: lifecycle('stop'),
  start: lifecycle('start'),
  adopt: (ctx) =>
    adopt({
      ...ctx,
      print: (t) => print(ctx, t),
      operation: (path, body) => operation(ctx, path, body),
    }),
  logs,
  events,
  plan,
  reload,
  validate,
  schema,
  version,
  completion,
  __complete: complete,
  fleet,
};
