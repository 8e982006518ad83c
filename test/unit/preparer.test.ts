import { describe, expect, it } from 'vitest';
import { MountPreparer, type ConfigPort } from '../../agent/config/preparer.js';
import type { ContainerSpec } from '../../agent/model/spec.js';
import { amqpCheck, containerSpec } from '../support/spec.js';

/** A config port that records what it was asked to write. */
function fakeConfig(): ConfigPort & { written: string[] } {
  const written: string[] = [];
  return {
    written,
    hash: () => 'v1-x',
    write: (spec) => {
      written.push(spec.name);
      return Promise.resolve({ hostDir: `/cfg/${spec.name}/current`, hash: 'v1-x' });
    },
    restore: () => Promise.resolve(false),
  };
}

const amqp = amqpCheck('nova-compute');

const targets = async (spec: ContainerSpec, config = fakeConfig()) =>
  (await new MountPreparer('/opt/spcd/healthchecks', config).prepare(spec)).extraBinds.map((b) => b.target);

describe('MountPreparer', () => {
  it('mounts the check scripts for an established check that runs through exec, not for one run from the host', async () => {
    expect(await targets(containerSpec('a', { healthchecks: [amqp], network: 'bridge' }))).toEqual([
      '/spcd/healthchecks',
    ]);
    expect(await targets(containerSpec('b', { healthchecks: [amqp], network: 'host' }))).toEqual([]);
    expect(await targets(containerSpec('c', { healthchecks: [amqp], pid: 'host' }))).toEqual([]);
  });

  it('writes config.json and sets KOLLA_CONFIG_STRATEGY for permissions alone', async () => {
    const config = fakeConfig();
    const spec = containerSpec('d', {
      command: ['nova-compute'],
      permissions: [{ path: '/var/lib/nova', owner: 'nova', recurse: true }],
    });
    const extras = await new MountPreparer('/opt/spcd/healthchecks', config).prepare(spec);
    expect(config.written).toEqual(['d']);
    expect(extras.extraBinds).toEqual([
      { source: '/cfg/d/current', target: '/var/lib/kolla/config_files', readOnly: true },
    ]);
    expect(extras.extraEnv).toEqual({ KOLLA_CONFIG_STRATEGY: 'COPY_ALWAYS' });
  });
});

describe('createBody with Kolla config', () => {
  const identity = {
    instance: 'i',
    set: 's',
    container: 'x',
    generation: 1,
    specHash: 'v1-a',
    configHash: 'v1-b',
  };
  it("leaves the image's kolla_start as the command when the container has permissions or config", async () => {
    const { createBody } = await import('../../agent/engine/create-options.js');
    const spec = containerSpec('x', {
      command: ['nova-compute'],
      permissions: [{ path: '/var/lib/nova', owner: 'nova', recurse: true }],
    });
    expect(createBody({ spec, identity }).Cmd).toBeUndefined();
    expect(createBody({ spec: containerSpec('y', { command: ['sleep', '1'] }), identity }).Cmd).toEqual([
      'sleep',
      '1',
    ]);
    // A bootstrap task with a command runs it in place of the entrypoint; one without keeps kolla_start.
    const task = createBody({ spec, identity, command: ['nova-manage', 'db', 'sync'] });
    expect(task.Entrypoint).toEqual(['nova-manage', 'db', 'sync']);
    expect(task.Cmd).toBeUndefined();
  });
});
