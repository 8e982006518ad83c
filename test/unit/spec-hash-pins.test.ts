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
      form: 'f42fbe3ca76c5fecf69d95ee252402b6',
    },
    nova_compute: {
      v2: 'v2-04d8dc21fd761a82e5d6d8f8b577bdb0',
      v1: 'v1-dc2c0b354f010a6eb32655c87b1e0d61',
      form: 'c27c8b61ae4bde84f3149a74eb7f9e4c',
    },
    openvswitch_db: {
      v2: 'v2-e89c0de8b9955430e937a4264502f3b4',
      v1: 'v1-435d3f5fbda035b7641aa2cbd45f7b8b',
      form: '5d1592e346b0e5c5e1e963f33904e227',
    },
    openvswitch_vswitchd: {
      v2: 'v2-50b062540f693649f07237c75bb808b8',
      v1: 'v1-f5f30f801e500ab09bd3fa85ad431772',
      form: 'bea71d267b4071ef6cd3cb3503ac4c52',
    },
    neutron_openvswitch_agent: {
      v2: 'v2-8d17a8353ea38e62a0d84d83d582a1d7',
      v1: 'v1-4a0f5a8d3756c81870842bbe3e7fa592',
      form: '0c985541d3eab87a98f1d07728c57fd1',
    },
  },
  linuxbridge: {
    nova_libvirt: {
      v2: 'v2-3b92ffb90e145eaa131334e2944f7b3b',
      v1: 'v1-09bc241b86667e0a8be558634eed5376',
      form: 'f42fbe3ca76c5fecf69d95ee252402b6',
    },
    nova_compute: {
      v2: 'v2-04d8dc21fd761a82e5d6d8f8b577bdb0',
      v1: 'v1-dc2c0b354f010a6eb32655c87b1e0d61',
      form: 'c27c8b61ae4bde84f3149a74eb7f9e4c',
    },
    neutron_linuxbridge_agent: {
      v2: 'v2-ef85e5a4f16c15a64a7efbbce55408a4',
      v1: 'v1-a2dbd9c32646001423e3643bf3f4a1d0',
      form: 'ca29775ef34444cc49eb8562a28daeec',
    },
  },
  demo: {
    demo_libvirt: {
      v2: 'v2-269368c80002d63cd57abb05475d2d70',
      v1: 'v1-25e98188a92f666fee2440553443098f',
      form: 'bd9e2dab9c8b482b8df1c4051535fb1a',
    },
    demo_compute: {
      v2: 'v2-83013a787526273f89304307a53c4b33',
      v1: 'v1-6c295c14f0134b40ccc46b23bcad50c4',
      form: 'dd85768d486738200a07926252d26b48',
    },
    demo_ovs_agent: {
      v2: 'v2-06e4254dd7eb414d4b31ba3abf569146',
      v1: 'v1-567933d3a9599f2f315204d587452b6c',
      form: '4d437ff9c313c8ec8663060b3b7eca3a',
    },
  },
  'demo+no-privileged': {
    demo_libvirt: {
      v2: 'v2-a3b337cff3290650e202e25821e7f907',
      v1: 'v1-3c218ccd748631e68cf5a8a47d3b1a34',
      form: '7e0a0da472b3cb689297be3fb2192122',
    },
    demo_compute: {
      v2: 'v2-83013a787526273f89304307a53c4b33',
      v1: 'v1-6c295c14f0134b40ccc46b23bcad50c4',
      form: 'dd85768d486738200a07926252d26b48',
    },
    demo_ovs_agent: {
      v2: 'v2-06e4254dd7eb414d4b31ba3abf569146',
      v1: 'v1-567933d3a9599f2f315204d587452b6c',
      form: '4d437ff9c313c8ec8663060b3b7eca3a',
    },
  },
  e2e: {
    spcd_e2e_libvirt: {
      v2: 'v2-8b9b90b4bd71829ddbe990182c745182',
      v1: 'v1-1c92dd37301a427d56f998f660f5ae1f',
      form: 'd01fb65ba4d9c4362a528e78269a2e6c',
    },
  },
  fixtures: {
    nova_libvirt: {
      v2: 'v2-95b9029c9492b0da41d70fe18d626cbb',
      v1: 'v1-737a99c7d4b9410e801800616df51344',
      form: 'd1a51c679ac5e93acb9f11a42bc0b081',
    },
    nova_compute: {
      v2: 'v2-e6703cd5a8e42b0af0ee66c33aa1c7cb',
      v1: 'v1-1b8b976f5226704c10d65824cad7fe7a',
      form: '462c9a32ca3b85b44d03917c1fcd0086',
    },
    neutron_ovs_agent: {
      v2: 'v2-53cbda3db0a205001f5fcf221a78ff36',
      v1: 'v1-7fb0f08784cdd4f1b31cd4bcde1b33e2',
      form: '8728cd0111d0400594bb77179982e7a2',
    },
    demo_web: {
      v2: 'v2-c7427070b1c5843f59f14721823692aa',
      v1: 'v1-65128f9580e13d562f78829c08605ada',
      form: 'ba18b93447fb6419a829fa2d6e0765ea',
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
