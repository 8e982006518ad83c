/**
 * A deadline per kind of engine call (nomad's habit: a stop or a pull is not a
 * ping). There is no client-wide timeout: it would silently cap long calls
 * (nomad#28496). Values are milliseconds.
 */
export const DEADLINES = {
  ping: 2_000,
  info: 5_000,
  list: 10_000,
  inspect: 5_000,
  create: 30_000,
  start: 30_000,
  /** Added to the container's own grace period. */
  stopSlack: 15_000,
  kill: 10_000,
  remove: 30_000,
  rename: 10_000,
  imageInspect: 10_000,
  volumeInspect: 5_000,
  /** The local driver makes a folder; an image's content is copied when a container is created, not here. */
  volumeCreate: 30_000,
  logsOpen: 10_000,
  /** Added to the caller's wait timeout. */
  waitSlack: 5_000,
} as const;

export type DeadlineKind = keyof typeof DEADLINES;
