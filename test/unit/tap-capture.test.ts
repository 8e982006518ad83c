import { describe, expect, it } from 'vitest';
import { wireLine, wireTally } from '../../test/e2e/tap-capture.js';

/** tcpdump -r -n -tt -e lines of a Linux cooked v2 capture, as the e2e reads them. */
const line = (t: number, dir: string, ifi: number, src: string, dst: string, kind: string, seq: number) =>
  `${t.toFixed(6)} ?     ${dir} ifindex ${ifi} fa:16:3e:ec:ac:dc ethertype IPv4 (0x0800), length 104: ` +
  `${src} > ${dst}: ICMP echo ${kind}, id 135, seq ${seq}, length 64`;
const A = '10.251.0.11';
const B = '10.251.0.12';
/** VM A's tap is device 47, B's 51; the path between them 50, 49, 45, 46. */
const TAPS = new Map([
  [A, 47],
  [B, 51],
]);
const carried = (t: number, seq: number): string[] => [
  line(t, 'P', 51, B, A, 'request', seq),
  line(t, 'Out', 50, B, A, 'request', seq),
  line(t, 'Out', 45, B, A, 'request', seq),
  line(t, 'Out', 47, B, A, 'request', seq),
  line(t + 0.001, 'P', 47, A, B, 'reply', seq),
  line(t + 0.001, 'Out', 46, A, B, 'reply', seq),
  line(t + 0.001, 'Out', 51, A, B, 'reply', seq),
];
const WINDOWS = [
  { name: 'upgrade', from: 100, to: 110 },
  { name: 'config', from: 120, to: 130 },
];

describe('wireTally', () => {
  it('counts an echo as carried once it went out on the destination VM tap', () => {
    const t = wireTally([...carried(101, 1), ...carried(121, 2)], TAPS, WINDOWS);
    expect(t).toEqual({ seen: 4, lost: 0, lostByWindow: {} });
    expect(wireLine(t, 0)).toBe('wire echoes_seen=4 lost=0 capture_dropped=0 losses=none');
  });

  it('places an echo that never reached the other tap in the window it was first seen in', () => {
    const dropped = carried(102, 3).slice(0, 3); // the request went no further than the path's device 45
    const between = carried(115, 4).filter((l) => !(l.includes('Out ifindex 51') && l.includes('reply')));
    const t = wireTally([...carried(101, 1), ...dropped, ...between], TAPS, WINDOWS);
    expect(t.lost).toBe(2);
    expect(t.lostByWindow).toEqual({ upgrade: 1, outside: 1 });
    expect(wireLine(t, 2)).toBe('wire echoes_seen=5 lost=2 capture_dropped=2 losses=upgrade:1,outside:1');
  });

  it('leaves out echoes before the first step and after the last, and traffic of other addresses', () => {
    const other = line(105, 'P', 60, '10.251.0.100', A, 'request', 9);
    const t = wireTally(
      [...carried(90, 1).slice(0, 2), ...carried(140, 2).slice(0, 2), other],
      TAPS,
      WINDOWS,
    );
    expect(t).toEqual({ seen: 0, lost: 0, lostByWindow: {} });
  });
});
