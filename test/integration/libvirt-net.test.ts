/**
 * Two e2e guests on one network, no OpenStack (issue 15, part 2;
 * docs/how-to/boot-a-test-guest.md "Guest networking"). The test creates a bridge with no
 * uplink and no host address, and a DHCP server for it (dnsmasq in a network
 * namespace of its own, on a veth port of the bridge): test/e2e/libvirt-net.sh.
 * One libvirt container (spcd-e2e/libvirt:bookworm, the VM-survival flags plus
 * /dev/net/tun) runs two guests with a virtio NIC on that bridge and
 * `spcd.peer=A,B` on their kernel command line. Each takes its fixed address
 * by DHCP and pings the other every 200 ms, one console line per packet
 * (scripts/libvirt/guest/net), counted by test/e2e/ping-log.ts. From the
 * dnsmasq namespace, iputils ping counts both guests too, every 200 ms
 * (test/e2e/ns-ping.ts): four directions in all.
 *
 *   1. both guests get their addresses from the test's dnsmasq;
 *   2. for SPCD_NET_SECONDS (default 20) both directions ping with no loss,
 *      and so do the namespace's pings of both guests, and the console
 *      counter runs on without a gap;
 *   3. when br_netfilter sends bridged frames through iptables (Docker's
 *      FORWARD policy DROP), deleting the test's one FORWARD rule loses
 *      packets inside that window only, in the guests and in the namespace
 *      alike, and adding it back restores them:
 *      the rule docs/how-to/boot-a-test-guest.md names is the one needed, and the counts
 *      find losses and place them in time;
 *   4. everything the test created is gone afterwards, the namespace's
 *      pingers included (no ping process left).
 * Traffic never leaves the bridge and the namespace.
 *
 * SPCD_NET_LOGS=DIR keeps copies of the stamped consoles, the namespace's ping
 * output and dnsmasq's log there.
 * Last line: net_ping_sent=N net_ping_lost=L max_ping_gap_ms=G ns_ping_sent=N ns_ping_lost=L forward_rule=needed|not-needed
 * (the counts of the clean phase).
 */
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImagesAndGuest, IMAGE_9, kv, run, vmsh } from '../e2e/libvirt-e2e-harness.js';
import { NsPinger, parseNsPing, pingProcesses } from '../e2e/ns-ping.js';
import { formatPing, summarizePing, type PingDirection, type PingWindow } from '../e2e/ping-log.js';
import { REPO } from '../support/daemon.js';
import { waitFor } from '../support/wait.js';

function readOr(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

const NET_SH = join(REPO, 'test', 'e2e', 'libvirt-net.sh');
const SECONDS = Number(process.env.SPCD_NET_SECONDS ?? '20');
const SUBNET = '10.251.100';
const GUESTS = [
  { key: 'a', mac: '52:54:00:fb:64:0b', ip: `${SUBNET}.11` },
  { key: 'b', mac: '52:54:00:fb:64:0c', ip: `${SUBNET}.12` },
] as const;
/** A loss is placed by the guest's clock mapped to the host's: allow the console watcher's 0.1 s poll and some load. */
const PLACE_SLACK_S = 1.5;

/** br_netfilter sends bridged IPv4 frames through iptables (then Docker's FORWARD policy DROP applies). */
const BR_NF = readOr('/proc/sys/net/bridge/bridge-nf-call-iptables').trim() === '1';
const id = randomBytes(4).toString('hex').slice(0, 6);
const runId = `net-${id}`;
const container = `spcd-e2e-net-${id}-libvirt`;
let root = '';
let netUp = false;
const watchers: number[] = [];
const names = GUESTS.map((g) => `net-${id}-${g.key}`);
let clean: PingDirection[] = [];
/** The dnsmasq namespace's pingers of both guests, and their clean-phase counts. */
let nsPing: NsPinger | undefined;
let cleanNs: PingDirection[] = [];

async function net(args: (string | number)[], timeoutMs = 60_000): Promise<Record<string, string>> {
  return kv((await run('bash', [NET_SH, ...args.map(String)], timeoutMs)).stdout);
}

const consoleOf = (name: string): string => join(root, 'lv/var/lib/libvirt/spcd-e2e', `${name}.console.log`);
const stampsOf = (name: string): string => join(root, 'lv/probe', `${name}.stamps`);
const read = (file: string): string => readOr(file);

/** Each guest's one direction (to the other guest), from its host-stamped console. */
function directions(windowsOf: (i: number) => PingWindow[] = () => []): PingDirection[] {
  return names.map((n, i) => {
    const peer = GUESTS[1 - i]!.ip;
    const d = summarizePing(read(stampsOf(n)), windowsOf(i)).find((x) => x.peer === peer);
    if (!d) throw new Error(`no ping lines to ${peer} in ${stampsOf(n)}`);
    return d;
  });
}

/** The namespace's direction to each guest, in GUESTS order. */
const nsDirections = (windowsOf: (i: number) => PingWindow[] = () => []): PingDirection[] =>
  GUESTS.map((_, i) => nsPing!.directions(windowsOf(i))[i]!);

/** Host epoch seconds of the namespace's replies from each guest. */
const nsReplyStamps = (): number[][] =>
  GUESTS.map((g) =>
    parseNsPing(nsPing!.text(g.ip), g.ip)
      .filter((l) => l.ok)
      .map((l) => l.hostS!),
  );

/** Host epoch seconds of the replies each direction has logged. */
function replyStamps(): number[][] {
  return names.map((n) =>
    read(stampsOf(n))
      .split('\n')
      .filter((l) => / ok rtt_us=/.test(l))
      .map((l) => Number(l.split(' ')[0])),
  );
}

beforeAll(async () => {
  const build = await buildImagesAndGuest();
  const guestDir = build.lines.map((l) => kv(l).guest_dir).find(Boolean);
  if (!guestDir) throw new Error(`build-guest.sh printed no guest_dir: ${build.lines.join(' | ')}`);
  await run('bash', [join(REPO, 'scripts/ensure-dnsmasq.sh')], 5 * 60_000);
  await run('bash', [join(REPO, 'scripts/ensure-ping.sh')], 5 * 60_000);
  root = mkdtempSync('/var/tmp/spcd-e2e-net-');
  netUp = true; // before `up`: a half-made network is taken down too (`down` skips what is not there)
  const up = await net(['up', id, join(root, 'net'), SUBNET, ...GUESTS.map((g) => `${g.mac}=${g.ip}`)]);
  console.log(`network: ${JSON.stringify(up)}`);
  expect(up.forward_rule).toBe(BR_NF ? 'added' : 'not-needed');
  await vmsh('prepare-root', [join(root, 'lv')]);
  // Exactly the guest this checkout built (guest/ may be rebuilt meanwhile by a checkout with other inputs).
  for (const f of ['vmlinuz', 'initrd.img'])
    copyFileSync(join(guestDir, f), join(root, 'lv/var/lib/libvirt/spcd-e2e', f));
  await run(
    'bash',
    [join(REPO, 'test/e2e/libvirt-vm.sh'), 'run', join(root, 'lv'), container, IMAGE_9, runId],
    120_000,
    {
      SPCD_E2E_TUN: '1',
    },
  );
  await vmsh('wait-api', [container, 120], 150_000);
  const peers = `spcd.peer=${GUESTS.map((g) => g.ip).join(',')}`;
  for (const [i, g] of GUESTS.entries()) {
    await vmsh('start-guest', [join(root, 'lv'), container, names[i]!, up.bridge!, g.mac, peers], 180_000);
    watchers.push(Number((await vmsh('console-watch', [join(root, 'lv'), names[i]!])).watch_pgid));
  }
  // Counting starts at each guest's first reply (after its DHCP lease).
  nsPing = NsPinger.start(
    `/run/netns/${up.netns}`,
    GUESTS.map((g) => g.ip),
  );
}, 30 * 60_000);

afterAll(async () => {
  // The pingers go first: the namespace goes with the network.
  const nsStop = await nsPing?.stop();
  for (const pg of watchers) {
    try {
      process.kill(-pg, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  if (process.env.SPCD_E2E_KEEP === '1') {
    console.log(`kept: root ${root}, network id ${id}, containers labelled spcd-e2e.run=${runId}`);
    return;
  }
  // Both guests destroyed through libvirt first (cleanup of the first removes the container).
  for (const n of names)
    await run(
      '/usr/bin/docker',
      ['exec', container, 'virsh', '-q', '-c', 'qemu:///system', 'destroy', n],
      60_000,
    ).catch(() => undefined);
  for (const n of names)
    if (root)
      console.log(
        `cleanup ${n}: ${JSON.stringify(await vmsh('cleanup', [join(root, 'lv'), n, runId]).catch((e: Error) => e.message))}`,
      );
  let down: Record<string, string> = {};
  if (netUp) down = await net(['down', id, join(root, 'net')]);
  console.log(`network down: ${JSON.stringify(down)}`);
  const logs = process.env.SPCD_NET_LOGS;
  if (logs && root)
    for (const n of names) {
      for (const f of [stampsOf(n), join(root, 'net/dnsmasq.log')])
        if (readOr(f)) copyFileSync(f, join(logs, `${n}-${f.split('/').pop()}`));
    }
  if (logs && nsPing)
    for (const g of GUESTS) writeFileSync(join(logs, `net-${id}-ns-ping-${g.ip}.out`), nsPing.text(g.ip));
  if (root) rmSync(root, { recursive: true, force: true });
  const left = await run('/usr/bin/docker', ['ps', '-aq', '--filter', `label=spcd-e2e.run=${runId}`], 60_000);
  const sent = clean.reduce((s, d) => s + d.sent, 0);
  const lost = clean.reduce((s, d) => s + d.lost, 0);
  const gap = Math.max(0, ...clean.map((d) => d.maxGapMs));
  const nsSent = cleanNs.reduce((s, d) => s + d.sent, 0);
  const nsLost = cleanNs.reduce((s, d) => s + d.lost, 0);
  console.log(
    `net_ping_sent=${sent} net_ping_lost=${clean.length ? lost : 'nan'} max_ping_gap_ms=${gap} ` +
      `ns_ping_sent=${nsSent} ns_ping_lost=${cleanNs.length ? nsLost : 'nan'} forward_rule=${BR_NF ? 'needed' : 'not-needed'}`,
  );
  // Every namespace pinger ended (SIGINT, else SIGKILL) and none is left.
  if (nsStop) {
    console.log(`ns pingers stopped: ${JSON.stringify(nsStop)}`);
    expect(nsStop.left).toEqual([]);
    expect(pingProcesses(GUESTS.map((g) => g.ip))).toEqual([]);
  }
  // Nothing of this run stays: no container, no bridge, no namespace, no FORWARD rule.
  expect(left.stdout.trim()).toBe('');
  if (netUp)
    expect(down).toMatchObject({ net_down: 'ok', bridge_left: '0', netns_left: '0', rule_left: '0' });
}, 5 * 60_000);

describe('two guests on a test bridge get addresses by DHCP and ping each other', () => {
  it('both guests take their fixed addresses from the test dnsmasq', async () => {
    for (const [i, g] of GUESTS.entries())
      await waitFor(
        `${names[i]} to report its DHCP lease ${g.ip}`,
        () => read(consoleOf(names[i]!)).includes(`spcd-net dhcp bound ip=${g.ip}/24`),
        { timeoutMs: 180_000, intervalMs: 250 },
      );
    const leases = (await run('bash', [NET_SH, 'leases', join(root, 'net')], 30_000)).stdout;
    for (const g of GUESTS) expect(leases).toContain(`lease=${g.mac},${g.ip}`);
  }, 200_000);

  it(
    `both directions ping for ${SECONDS} s with no packet lost`,
    async () => {
      await waitFor(
        'both guests to start pinging (the peer answered once)',
        () => {
          if (
            !names.every((n, i) => read(consoleOf(n)).includes(`spcd-ping peer=${GUESTS[1 - i]!.ip} start`))
          )
            return false;
          try {
            // and the watcher stamped a reply of each, and the namespace has a reply from each guest
            return directions().every((d) => d.ok > 0) && nsDirections().every((d) => d.ok > 0);
          } catch {
            return false;
          }
        },
        { timeoutMs: 120_000, intervalMs: 250 },
      ).catch((e: Error) => {
        throw new Error([e.message, ...nsPing!.problems()].join('; '));
      });
      const t0 = Date.now() / 1000;
      const before = directions().map((d) => d.ok);
      // SECONDS of host time, and at least one reply per 400 ms in each direction (TCG under load).
      await waitFor(
        `${SECONDS} s of pings in both directions`,
        () =>
          Date.now() / 1000 >= t0 + SECONDS &&
          directions().every((d, i) => d.ok - before[i]! >= (SECONDS * 1000) / 400),
        { timeoutMs: (SECONDS + 120) * 1000, intervalMs: 500 },
      );
      // The namespace's pings: every probe up to the last reply answered.
      await nsPing!.waitReplyAfter(Date.now() / 1000, 60_000);
      clean = directions();
      cleanNs = nsDirections();
      for (const [i, d] of clean.entries()) console.log(formatPing(names[i]!, d));
      for (const d of cleanNs) console.log(formatPing(`ns:spcd-net-${id}`, d));
      expect(nsPing!.problems()).toEqual([]);
      for (const d of [...clean, ...cleanNs]) {
        expect(d.sent).toBeGreaterThan(0);
        expect(d).toMatchObject({ lost: 0, missing: 0, restarts: 0 });
        expect(d.sent).toBe(d.ok);
      }
      // The VM-survival tests' console counter is untouched by the network: no value missing.
      for (const n of names) {
        const cg = await vmsh('console-gap', [
          join(root, 'lv'),
          n,
          t0.toFixed(6),
          (Date.now() / 1000).toFixed(6),
        ]);
        expect(Number(cg.counter_lines)).toBeGreaterThan(1);
        expect(cg.counter_missing).toBe('0');
      }
    },
    (SECONDS + 200) * 1000,
  );

  it.runIf(BR_NF)(
    "without the test's FORWARD rule bridged pings are lost, inside that window only",
    async () => {
      const bridge = `spbr-${id}`;
      const tDel = Date.now() / 1000;
      expect((await net(['rule', 'del', id, bridge])).forward_rule).toBe('removed');
      // The outage is real: no reply logged in either direction for a second and a half.
      await waitFor(
        'both directions to go without replies',
        () => Date.now() / 1000 - Math.max(tDel, ...replyStamps().map((r) => r.at(-1) ?? 0)) >= 1.5,
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      const tAdd = Date.now() / 1000;
      expect((await net(['rule', 'add', id, bridge])).forward_rule).toBe('added');
      const firstAfter = (stamps: number[][]): number[] | false => {
        const firsts = stamps.map((r) => r.find((t) => t > tAdd));
        return firsts.every((t) => t !== undefined) && (firsts as number[]);
      };
      const back = await waitFor('replies again in both directions', () => firstAfter(replyStamps()), {
        timeoutMs: 60_000,
        intervalMs: 200,
      });
      const backNs = await waitFor(
        'replies again from both guests in the namespace',
        () => firstAfter(nsReplyStamps()),
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      // A loss's time is estimated between the last reply before the outage and the
      // first after it (a starved guest reads that one late): the window ends there.
      const ds = directions((i) => [
        { name: 'rule-removed', from: tDel - PLACE_SLACK_S, to: back[i]! + PLACE_SLACK_S },
      ]);
      for (const [i, d] of ds.entries()) {
        console.log(
          `${formatPing(names[i]!, d)} rule_removed_s=${(tAdd - tDel).toFixed(2)} first_reply_after_s=${(back[i]! - tAdd).toFixed(2)}`,
        );
        expect(d.lossesByWindow['rule-removed']).toBeGreaterThan(0);
        expect(d.lossesByWindow.outside).toBe(0);
        expect(d.missing).toBe(0);
      }
      // The namespace saw the same outage, in the same window only (its stamps are the host's own).
      const ns = nsDirections((i) => [
        { name: 'rule-removed', from: tDel - PLACE_SLACK_S, to: backNs[i]! + PLACE_SLACK_S },
      ]);
      for (const [i, d] of ns.entries()) {
        console.log(
          `${formatPing(`ns:spcd-net-${id}`, d)} first_reply_after_s=${(backNs[i]! - tAdd).toFixed(2)}`,
        );
        expect(d.lossesByWindow['rule-removed']).toBeGreaterThan(0);
        expect(d.lossesByWindow.outside).toBe(0);
        expect(d.missing).toBe(0);
        expect(d.restarts).toBe(0);
      }
      expect(nsPing!.problems()).toEqual([]);
    },
    180_000,
  );
});
