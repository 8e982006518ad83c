/**
 * The OpenStack e2e's pings from Neutron's side (issue #15: "each direction
 * counted in-guest, and from the DHCP namespace"; docs/explanation/openstack-network.md "The
 * ping phase"): iputils ping in the DHCP agent's qdhcp-<network> namespace
 * (a file in the test's netns folder, HostNet.netnsDir), one per VM
 * (test/e2e/ns-ping.ts); in the OVN variant, which has no DHCP agent, a
 * namespace of the test's on the physnet (openstack-ovn.ts). The namespace's
 * address is in the subnet; the VMs' ports are in the project's default security group,
 * which takes ingress only from its own members, so the run adds one rule to
 * each of their groups (ICMP over IPv4 from the subnet) and deletes it when
 * the pingers stop.
 */
import { basename } from 'node:path';
import type { OpenStack } from './openstack-client.js';
import { NsPinger, type NsPingStop } from './ns-ping.js';
import type { CountedDirection } from './openstack-ping.js';
import type { PingWindow } from './ping-log.js';

export class NetnsPing {
  private constructor(
    private readonly os: OpenStack,
    /** The qdhcp-<network> namespace, as named in `from` of each direction. */
    readonly namespace: string,
    private readonly pinger: NsPinger,
    private readonly rules: readonly string[],
  ) {}

  /**
   * Lets the VMs' ports take ICMP from `cidr` (a rule per security group
   * they are in), starts pinging `ips` from the namespace whose file is
   * `netns` (qdhcp-<network> in the run's folder, or the OVN variant's
   * physnet namespace), and waits until each VM answered once (the agent or
   * ovn-controller applies the rule within seconds).
   */
  static async start(o: {
    os: OpenStack;
    netns: string;
    ports: readonly string[];
    ips: readonly string[];
    cidr: string;
    timeoutMs: number;
  }): Promise<NetnsPing> {
    const groups = new Set<string>();
    for (const p of o.ports) for (const sg of await o.os.portSecurityGroups(p)) groups.add(sg);
    const rules: string[] = [];
    for (const sg of groups) {
      const id = await o.os.allowIcmpFrom(sg, o.cidr);
      if (id) rules.push(id);
    }
    const namespace = basename(o.netns);
    let pinger: NsPinger;
    try {
      pinger = NsPinger.start(o.netns, o.ips);
    } catch (e) {
      for (const id of rules) await o.os.deleteSecurityGroupRule(id).catch(() => undefined);
      throw e;
    }
    const run = new NetnsPing(o.os, namespace, pinger, rules);
    try {
      await pinger.waitReplyAfter(0, o.timeoutMs);
    } catch (e) {
      await run.stop();
      throw e;
    }
    return run;
  }

  /** Each VM's direction from the namespace, its losses placed in `windows`. */
  directions(windows: readonly PingWindow[]): CountedDirection[] {
    return this.pinger.directions(windows).map((d) => ({ from: this.namespace, d }));
  }

  /** Pingers that ended before stop() (a namespace deleted under them, ...). */
  problems(): string[] {
    return this.pinger.problems();
  }

  /** Waits until each VM answered after `afterS` (epoch s): every loss before it is counted then. */
  waitReplyAfter(afterS: number, timeoutMs: number): Promise<void> {
    return this.pinger.waitReplyAfter(afterS, timeoutMs);
  }

  /** Stops the pingers (none left: `left`) and deletes the rules the run added. Idempotent. */
  async stop(): Promise<NsPingStop> {
    const s = await this.pinger.stop();
    for (const id of this.rules) await this.os.deleteSecurityGroupRule(id).catch(() => undefined);
    return s;
  }
}
