import { describe, expect, it } from 'vitest';
import { canonicalJson, sha256Hex, specHash } from '../../agent/model/hash.js';
import { specHashUnder } from '../../agent/model/hash-schemes.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { loadContainers, SHIPPED_LOADS } from '../support/shipped-sets.js';

/**
 * The hashes of every shipped and fixture container, pinned: a change to how
 * definitions are read, normalized or hashed that moves one of them would
 * recreate that container on an spcd upgrade. `form` pins the whole normalized
 * spec (minus `source`, which holds line numbers), so a reformatted set file or
 * a refactored loader must produce the very same ContainerSpec.
 * container-sets-e2e/openstack/ is left out: it is edited elsewhere.
 */
interface Pin {
  readonly v2: string;
  readonly v1: string | null | undefined;
  readonly form: string;
}

function pin(spec: ContainerSpec): Pin {
  const { source: _source, ...rest } = spec;
  return {
    v2: specHash(spec),
    v1: specHashUnder('v1', spec),
    form: sha256Hex(canonicalJson(rest)).slice(0, 32),
  };
}

async function pinsOf(opts: (typeof SHIPPED_LOADS)[string]): Promise<Record<string, Pin>> {
  return Object.fromEntries((await loadContainers(opts)).map((c) => [c.name, pin(c)]));
}

const PINS: Record<string, Record<string, Pin>> = {
  compute: {
    nova_libvirt: {
      v2: 'v2-3b92ffb90e145eaa131334e2944f7b3b',
      v1: 'v1-09bc241b86667e0a8be558634eed5376',
      form: '14921b001fec03f2574f61cb579223f0',
    },
    nova_compute: {
      v2: 'v2-04d8dc21fd761a82e5d6d8f8b577bdb0',
      v1: 'v1-dc2c0b354f010a6eb32655c87b1e0d61',
      form: '8e62ad66e265fd574ee168eeee579cd6',
    },
    openvswitch_db: {
      v2: 'v2-e89c0de8b9955430e937a4264502f3b4',
      v1: 'v1-435d3f5fbda035b7641aa2cbd45f7b8b',
      form: 'eb57ff94520210429eba0ff1e4ae5d85',
    },
    openvswitch_vswitchd: {
      v2: 'v2-50b062540f693649f07237c75bb808b8',
      v1: 'v1-f5f30f801e500ab09bd3fa85ad431772',
      form: '621e350ad33b9c0943d17b20c2bf92fe',
    },
    neutron_openvswitch_agent: {
      v2: 'v2-8d17a8353ea38e62a0d84d83d582a1d7',
      v1: 'v1-4a0f5a8d3756c81870842bbe3e7fa592',
      form: 'f7cc13f0eba52b9a9264c37b332d8177',
    },
  },
  linuxbridge: {
    nova_libvirt: {
      v2: 'v2-3b92ffb90e145eaa131334e2944f7b3b',
      v1: 'v1-09bc241b86667e0a8be558634eed5376',
      form: '14921b001fec03f2574f61cb579223f0',
    },
    nova_compute: {
      v2: 'v2-04d8dc21fd761a82e5d6d8f8b577bdb0',
      v1: 'v1-dc2c0b354f010a6eb32655c87b1e0d61',
      form: '8e62ad66e265fd574ee168eeee579cd6',
    },
    neutron_linuxbridge_agent: {
      v2: 'v2-ef85e5a4f16c15a64a7efbbce55408a4',
      v1: 'v1-a2dbd9c32646001423e3643bf3f4a1d0',
      form: 'b575d7c4d7963f94d9d3016327d46d7b',
    },
  },
  demo: {
    demo_libvirt: {
      v2: 'v2-269368c80002d63cd57abb05475d2d70',
      v1: 'v1-25e98188a92f666fee2440553443098f',
      form: '3663dad7533da256f19c379f2035d746',
    },
    demo_compute: {
      v2: 'v2-83013a787526273f89304307a53c4b33',
      v1: 'v1-6c295c14f0134b40ccc46b23bcad50c4',
      form: 'abb6c0f76deec1c002da4ed1f09ccd98',
    },
    demo_ovs_agent: {
      v2: 'v2-06e4254dd7eb414d4b31ba3abf569146',
      v1: 'v1-567933d3a9599f2f315204d587452b6c',
      form: 'dfd5b7b4be92f452ad828252273936e7',
    },
  },
  'demo+no-privileged': {
    demo_libvirt: {
      v2: 'v2-a3b337cff3290650e202e25821e7f907',
      v1: 'v1-3c218ccd748631e68cf5a8a47d3b1a34',
      form: '224c751359ce3c1e7f292f68c290361c',
    },
    demo_compute: {
      v2: 'v2-83013a787526273f89304307a53c4b33',
      v1: 'v1-6c295c14f0134b40ccc46b23bcad50c4',
      form: 'abb6c0f76deec1c002da4ed1f09ccd98',
    },
    demo_ovs_agent: {
      v2: 'v2-06e4254dd7eb414d4b31ba3abf569146',
      v1: 'v1-567933d3a9599f2f315204d587452b6c',
      form: 'dfd5b7b4be92f452ad828252273936e7',
    },
  },
  e2e: {
    spcd_e2e_libvirt: {
      v2: 'v2-8b9b90b4bd71829ddbe990182c745182',
      v1: 'v1-1c92dd37301a427d56f998f660f5ae1f',
      form: '389e8bbc0fc09e17a00bd66425cf1335',
    },
  },
  fixtures: {
    nova_libvirt: {
      v2: 'v2-95b9029c9492b0da41d70fe18d626cbb',
      v1: 'v1-737a99c7d4b9410e801800616df51344',
      form: '412a96ac1b1fdbad69761cf2f73d23fc',
    },
    nova_compute: {
      v2: 'v2-e6703cd5a8e42b0af0ee66c33aa1c7cb',
      v1: 'v1-1b8b976f5226704c10d65824cad7fe7a',
      form: 'dbd626cadff2157f633f8dd5730d1733',
    },
    neutron_ovs_agent: {
      v2: 'v2-53cbda3db0a205001f5fcf221a78ff36',
      v1: 'v1-7fb0f08784cdd4f1b31cd4bcde1b33e2',
      form: '4b634985f64c77f8984bd0b140458842',
    },
    demo_web: {
      v2: 'v2-c7427070b1c5843f59f14721823692aa',
      v1: 'v1-65128f9580e13d562f78829c08605ada',
      form: 'f2d8d1982cdb98aef42311fda4309491',
    },
  },
};

describe('the hashes of the shipped and fixture sets do not move', () => {
  for (const [name, opts] of Object.entries(SHIPPED_LOADS)) {
    it(name, async () => {
      expect(await pinsOf(opts)).toEqual(PINS[name]);
    });
  }
});
