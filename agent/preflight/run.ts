/** runPreflight: every check, in a fixed order, into one report. */
import {
  DISK_LIMITS,
  checkCgroups,
  checkClockSync,
  checkDisk,
  checkDockerEngine,
  checkHostLibvirtd,
  checkKernelModules,
  checkLiveRestore,
  checkVirtualization,
} from './checks.js';
import { freeBytesAt } from './host-scan.js';
import { checkSignatureTools } from './signature-tools.js';
import type { PreflightCheck, PreflightDeps, PreflightReport } from './types.js';

async function defaultHostInfo(): Promise<PreflightReport['host']> {
  try {
    // Only systeminformation's osinfo part, loaded on first use: preflight runs once.
    const { osInfo } = await import('systeminformation/lib/osinfo.js');
    const os = await osInfo();
    return { kernel: os.kernel, distro: `${os.distro} ${os.release}`.trim(), hostname: os.hostname };
  } catch {
    return {};
  }
}

export async function runPreflight(deps: PreflightDeps): Promise<PreflightReport> {
  const procRoot = deps.procRoot ?? '/proc';
  const sysRoot = deps.sysRoot ?? '/sys';
  const devRoot = deps.devRoot ?? '/dev';
  const runRoot = deps.runRoot ?? '/run';
  const freeBytes = deps.freeBytes ?? freeBytesAt;
  const docker = await deps.engine.info().catch(() => undefined);
  const imagesDir = docker?.rootDir ?? '/var/lib/docker';

  const [virt, mods, libvirtd, cgroups, clock, host, imagesFree, stateFree, signing] = await Promise.all([
    checkVirtualization(procRoot, devRoot),
    checkKernelModules(procRoot, sysRoot),
    checkHostLibvirtd(procRoot, deps.hypervisorSet ?? true),
    checkCgroups(procRoot, docker),
    checkClockSync(procRoot, runRoot),
    (deps.hostInfo ?? defaultHostInfo)().catch(() => ({})),
    freeBytes(imagesDir).catch(() => undefined),
    freeBytes(deps.stateDir).catch(() => undefined),
    checkSignatureTools(deps.signedPrefixes ?? [], deps.onPath),
  ]);
  const checks: PreflightCheck[] = [
    checkDockerEngine(docker, deps.expectedEngine),
    checkLiveRestore(docker),
    cgroups,
    libvirtd,
    virt,
    mods,
    checkDisk('disk-images', imagesDir, imagesFree, DISK_LIMITS.images.warn, DISK_LIMITS.images.block),
    checkDisk('disk-state', deps.stateDir, stateFree, DISK_LIMITS.state.warn, DISK_LIMITS.state.block),
    clock,
    signing,
  ];
  const blocking = checks.filter((c) => !c.ok && c.severity === 'block').map((c) => c.name);
  return { at: new Date(deps.now()).toISOString(), ok: blocking.length === 0, blocking, checks, host };
}

/** A plain-text table for `spcctl preflight` and logs. */
export function formatPreflight(report: PreflightReport): string {
  const width = Math.max(...report.checks.map((c) => c.name.length));
  const lines = report.checks.map((c) => {
    const mark = c.ok ? 'ok  ' : c.severity === 'block' ? 'FAIL' : 'warn';
    return `${mark}  ${c.name.padEnd(width)}  ${c.detail}`;
  });
  const host = [
    report.host.hostname,
    report.host.distro,
    report.host.kernel && `kernel ${report.host.kernel}`,
  ]
    .filter(Boolean)
    .join(', ');
  const warns = report.checks.filter((c) => !c.ok && c.severity === 'warn').length;
  const summary = report.ok
    ? `preflight passed${warns ? ` with ${warns} warning(s)` : ''}`
    : `preflight FAILED: ${report.blocking.join(', ')} block the start`;
  return [`preflight ${report.at}${host ? ` on ${host}` : ''}`, ...lines, summary].join('\n') + '\n';
}
