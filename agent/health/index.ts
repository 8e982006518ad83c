export { HealthManager, type HealthManagerDeps } from './manager.js';
export { realHostProbes, tcpProbe, httpProbe, processProbe, findProcess } from './host-probes.js';
export { aggregateStatus } from './status.js';
export { IntervalSchedule, CronSchedule, nextCronMatch, type Schedule } from './schedule.js';
export { CheckWorker, PROBE_GRACE_MS } from './worker.js';
export type * from './types.js';
