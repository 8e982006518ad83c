/**
 * The engines spcd speaks to through Docker's API: Docker, and Podman's
 * Docker-compatible service. Where Podman's answers differ in a way spcd
 * reads, both shapes are read here, whichever engine answers, so a wrong
 * guess of the engine can never drop an event or a health status.
 * docs/decisions/0068-podman-engine.md lists each difference.
 */

export type EngineKind = 'docker' | 'podman';

/** Podman's names for container events whose Docker name spcd acts on. */
const EVENT_ALIASES: Readonly<Record<string, string>> = {
  // Podman 4 reports a removal as `remove`; Docker says `destroy`.
  remove: 'destroy',
  // Some Podman versions say `died` where Docker says `die` (podman #10168).
  died: 'die',
};

/** The Docker name of an event's action (`exec_start: sh -c ...` is `exec_start`). */
export function eventAction(raw: string | undefined): string {
  const action = (raw ?? '').split(':')[0] ?? '';
  return EVENT_ALIASES[action] ?? action;
}

/** A container's health status: Docker's `State.Health`, or `State.Healthcheck` of some Podman versions (#11645). */
export function healthStatus(state: {
  readonly Health?: { readonly Status?: string } | null;
  readonly Healthcheck?: { readonly Status?: string } | null;
}): string | undefined {
  return state.Health?.Status ?? state.Healthcheck?.Status ?? undefined;
}

/**
 * A ulimit's Docker name: Podman's inspect names it by its RLIMIT_ constant
 * (`RLIMIT_NOFILE`), Docker by the short name (`nofile`), which is also what
 * a set and both engines' create take.
 */
export function ulimitName(raw: string): string {
  return raw.replace(/^RLIMIT_/i, '').toLowerCase();
}

/** A mount as inspect lists it (`Mounts`). */
export interface InspectedMount {
  readonly Type?: string;
  readonly Source?: string;
  readonly Destination?: string;
}

/**
 * The container paths of a container's devpts mounts, sorted. Podman lists
 * one under its own type, or as a bind whose source is `devpts` (created
 * through the Docker-compatible API) or empty (through libpod, as
 * kolla-ansible's podman-py does). A named volume called `devpts` is a
 * volume, not one of these.
 */
export function devptsTargets(mounts: readonly InspectedMount[] | null | undefined): string[] {
  const devpts = (m: InspectedMount): boolean =>
    m.Type === 'devpts' || (m.Type === 'bind' && (m.Source === 'devpts' || m.Source === ''));
  return (mounts ?? [])
    .filter(devpts)
    .map((m) => m.Destination ?? '')
    .sort();
}

/** The Binds entries that are not those devpts mounts (Podman lists them among the binds too). */
export function bindsWithoutDevpts(binds: readonly string[], devpts: readonly string[]): string[] {
  return binds.filter((b) => {
    const [source = '', target = ''] = b.split(':');
    return !((source === '' || source === 'devpts') && devpts.includes(target));
  });
}

/** Which engine answers, from its /version: Podman names itself among the components. */
export function engineKind(version: {
  readonly Components?: readonly { readonly Name?: string }[];
}): EngineKind {
  return (version.Components ?? []).some((c) => c.Name === 'Podman Engine') ? 'podman' : 'docker';
}

/**
 * A create body as Podman must receive it to make what Docker makes from the
 * same body. Podman copies the image's content at a tmpfs's target into the
 * tmpfs (`tmpcopyup`, its default); Docker mounts it empty, and a tmpfs over
 * part of a bound /sys/fs/cgroup (the hypervisor containers) cannot be
 * copied at all. Each tmpfs gets `notmpcopyup` unless its options choose.
 */
export function forPodman<B extends { HostConfig: Record<string, unknown> }>(body: B): B {
  const tmpfs = body.HostConfig.Tmpfs as Record<string, string> | undefined;
  if (!tmpfs || Object.keys(tmpfs).length === 0) return body;
  const chosen = (opts: string): boolean => /(^|,)(no)?tmpcopyup(,|$)/.test(opts);
  const adjusted = Object.fromEntries(
    Object.entries(tmpfs).map(([target, opts]) => [
      target,
      chosen(opts) ? opts : [opts, 'notmpcopyup'].filter((o) => o !== '').join(','),
    ]),
  );
  return { ...body, HostConfig: { ...body.HostConfig, Tmpfs: adjusted } };
}

/** What spcd asks of a container that an engine refuses to run, and why. */
interface RefusalFacts {
  readonly name: string;
  readonly source: string;
  readonly init?: boolean;
  readonly pid?: string;
}

/**
 * Why Podman cannot create this container as defined, or undefined when it
 * can. Podman refuses an init process in a container that shares the host's
 * PID namespace ("cannot add init binary as PID 1"); Docker runs one there.
 * Said before the create, so the operator reads the field to change rather
 * than the engine's message, again at every backoff.
 */
export function podmanRefusal(spec: RefusalFacts): string | undefined {
  if (spec.init === true && spec.pid === 'host')
    return (
      `container ${spec.name} (${spec.source}): init: true with pid: host: Podman runs no init process ` +
      `in the host's PID namespace; set init: false for this host (an overrides file: containers.${spec.name}.init: false)`
    );
  return undefined;
}
