import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isSpcdError, type SpcdError } from '../../agent/errors.js';
import { silentLogger } from '../../agent/log.js';
import type { ConfigFileSpec } from '../../agent/model/spec.js';
import { Renderer } from '../../agent/render/renderer.js';
import { containerSpec, file } from '../fixtures/render/compute-specs.js';

let root: string;
let templatesDir: string;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'spcd-render-safety-'));
  templatesDir = join(root, 'templates');
  await mkdir(join(templatesDir, 'sub'), { recursive: true });
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

async function template(name: string, text: string): Promise<void> {
  await writeFile(join(templatesDir, name), text);
}

function render(config: ConfigFileSpec[], values: Record<string, unknown>, secrets: string[] = []) {
  const renderer = new Renderer({ templatesDir, log: silentLogger() });
  return renderer.renderContainer(containerSpec('svc', ['svc-daemon'], config), values, new Set(secrets));
}

function renderError(
  config: ConfigFileSpec[],
  values: Record<string, unknown>,
  secrets: string[] = [],
): SpcdError {
  try {
    render(config, values, secrets);
  } catch (err) {
    if (isSpcdError(err)) return err;
    throw err;
  }
  throw new Error('expected the render to fail');
}

describe('template paths', () => {
  it('refuses template names with "..", absolute names and backslashes', async () => {
    await template('ok.j2', 'x\n');
    for (const name of ['../outside.j2', 'sub/../../outside.j2', '/etc/passwd', 'sub\\ok.j2', '']) {
      const err = renderError([file(name, 'a.conf', '/etc/a.conf')], {});
      expect(err.code, name).toBe('TEMPLATE_PATH');
    }
  });

  it('refuses a symlink that leads out of the templates directory', async () => {
    await writeFile(join(root, 'secret.txt'), 'not a template\n');
    await symlink(join(root, 'secret.txt'), join(templatesDir, 'escape.j2'));
    await symlink(root, join(templatesDir, 'dirlink'));
    for (const name of ['escape.j2', 'dirlink/secret.txt']) {
      const err = renderError([file(name, 'a.conf', '/etc/a.conf')], {});
      expect(err.code, name).toBe('TEMPLATE_PATH');
      expect(err.message).toMatch(/outside the templates directory/);
    }
  });

  it('follows a symlink that stays inside the templates directory', async () => {
    await template('real.j2', 'v = {{ v }}\n');
    await symlink('real.j2', join(templatesDir, 'alias.j2'));
    expect(render([file('alias.j2', 'a.conf', '/etc/a.conf')], { v: 1 }).files[0]?.content).toBe('v = 1\n');
  });

  it('refuses an include that climbs out, even through a relative name', async () => {
    await writeFile(join(root, 'outside.j2'), 'outside\n');
    await template('sub/inc.j2', '{% include "../../outside.j2" %}\n');
    await template('abs.j2', '{% include "/etc/hostname" %}\n');
    expect(renderError([file('sub/inc.j2', 'a.conf', '/etc/a.conf')], {}).code).toBe('TEMPLATE_PATH');
    expect(renderError([file('abs.j2', 'a.conf', '/etc/a.conf')], {}).code).toBe('TEMPLATE_PATH');
  });

  it('resolves a relative include next to its parent', async () => {
    await template('sub/part.j2', 'part {{ v }}\n');
    await template('sub/main.j2', 'main\n{% include "./part.j2" %}');
    expect(render([file('sub/main.j2', 'a.conf', '/etc/a.conf', 'text')], { v: 2 }).files[0]?.content).toBe(
      'main\npart 2\n',
    );
  });

  it('refuses destination paths that leave the config directory or collide', async () => {
    await template('t.j2', 'x\n');
    for (const dest of [
      '../a.conf',
      'a/../../b.conf',
      '/etc/a.conf',
      'a//b.conf',
      './a.conf',
      'config.json',
    ]) {
      const err = renderError([file('t.j2', dest, '/etc/a.conf')], {});
      expect(err.code, dest).toBe('TEMPLATE_PATH');
    }
    const dup = renderError(
      [file('t.j2', 'a.conf', '/etc/a.conf'), file('t.j2', 'a.conf', '/etc/b.conf')],
      {},
    );
    expect(dup.code).toBe('TEMPLATE_PATH');
    const rel = renderError([file('t.j2', 'a.conf', 'etc/a.conf')], {});
    expect(rel.code).toBe('TEMPLATE_PATH');
  });
});

describe('undefined variables', () => {
  it('names the template, the line and the source line', async () => {
    await template('nova.conf.j2', '[DEFAULT]\nhost = {{ host }}\ntransport_url = {{ rabbit.url }}\n');
    const err = renderError([file('nova.conf.j2', 'nova.conf', '/etc/nova/nova.conf')], {
      host: 'h1',
      rabbit: {},
    });
    expect(err.code).toBe('TEMPLATE_INVALID');
    expect(err.details).toMatchObject({ template: 'nova.conf.j2', line: 3 });
    expect(err.message).toContain('template nova.conf.j2, line 3');
    expect(err.message).toContain('transport_url = {{ rabbit.url }}');
  });

  it('names the included template and its line when the include fails', async () => {
    await template('sub/part.j2', 'a\nb\nc = {{ missing }}\n');
    await template('main.j2', 'x = 1\n{% include "sub/part.j2" %}\n');
    const err = renderError([file('main.j2', 'a.conf', '/etc/a.conf')], {});
    expect(err.details).toMatchObject({ template: 'sub/part.j2', renderedTemplate: 'main.j2', line: 3 });
    expect(err.message).toContain('sub/part.j2 (included from main.j2), line 3');
  });

  it('reports a syntax error with its line', async () => {
    await template('bad.j2', 'a\n{% if x %}\nb\n');
    const err = renderError([file('bad.j2', 'a.conf', '/etc/a.conf')], { x: true });
    expect(err.code).toBe('TEMPLATE_INVALID');
    expect(err.details.template).toBe('bad.j2');
  });
});

describe('format safety', () => {
  it('rejects a value with a newline in an INI file, naming the value path and the template', async () => {
    await template('a.conf.j2', '[DEFAULT]\nname = {{ svc.name }}\n');
    for (const bad of ['x\n[evil]\nadmin = true', 'x\ry', 'x\u0000y']) {
      const err = renderError([file('a.conf.j2', 'a.conf', '/etc/a.conf')], { svc: { name: bad } });
      expect(err.code).toBe('TEMPLATE_INVALID');
      expect(err.details).toMatchObject({ template: 'a.conf.j2', path: 'svc.name' });
      expect(err.message).toContain('svc.name');
      expect(err.message).not.toContain('evil');
    }
  });

  it('catches a line-breaking value inside a list and a line-breaking mapping key', async () => {
    await template('l.conf.j2', 'servers = {{ servers | join(",") }}\n');
    await template('k.conf.j2', '{% for k, v in opts %}{{ k }} = {{ v }}\n{% endfor %}');
    const e1 = renderError([file('l.conf.j2', 'l.conf', '/etc/l.conf')], { servers: ['a', 'b\nc = d'] });
    expect(e1.details.path).toBe('servers[1]');
    const e2 = renderError([file('k.conf.j2', 'k.conf', '/etc/k.conf')], { opts: { 'a\nb': 1 } });
    expect(e2.details.path).toBe('opts.a\nb');
  });

  it('lets a multi-line value the INI template does not print through (a certificate in the globals)', async () => {
    await template('a.conf.j2', 'name = {{ name }}\n');
    const out = render([file('a.conf.j2', 'a.conf', '/etc/a.conf')], {
      name: 'ok',
      ca_cert: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
    });
    expect(out.files[0]?.content).toBe('name = ok\n');
  });

  it('does not check text files for line breaks', async () => {
    await template('ca.pem.j2', '{{ ca_cert }}');
    const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    expect(
      render([file('ca.pem.j2', 'ca.pem', '/etc/ca.pem', 'text')], { ca_cert: pem }).files[0]?.content,
    ).toBe(pem);
  });

  it('produces YAML and JSON through the to_yaml and to_json filters, whatever the values hold', async () => {
    await template('p.yaml.j2', 'name: {{ name | to_json }}\nextra:\n  {{ extra | to_yaml | indent(2) }}\n');
    await template('p.json.j2', '{"name": {{ name | to_json }}, "extra": {{ extra | to_json }}}\n');
    const values = { name: 'a: b\n- "c" # d', extra: { list: [1, 'two: 2'], nested: { k: 'v\nw' } } };
    const [y, j] = render(
      [
        file('p.yaml.j2', 'p.yaml', '/etc/p.yaml', 'yaml'),
        file('p.json.j2', 'p.json', '/etc/p.json', 'json'),
      ],
      values,
    ).files;
    const yaml = await import('js-yaml');
    expect(yaml.load(y?.content ?? '')).toEqual(values);
    expect(JSON.parse(j?.content ?? '')).toEqual(values);
  });

  it('rejects YAML or JSON output that does not parse, masking secrets in the message', async () => {
    await template('bad.yaml.j2', 'a: {{ pw }}\n b: [\n');
    await template('bad.json.j2', '{"pw": "{{ pw }}", }\n');
    const e1 = renderError([file('bad.yaml.j2', 'b.yaml', '/etc/b.yaml', 'yaml')], { pw: 'hunter2' }, [
      'hunter2',
    ]);
    expect(e1.code).toBe('TEMPLATE_INVALID');
    expect(e1.message).toMatch(/valid YAML/);
    expect(e1.message).not.toContain('hunter2');
    const e2 = renderError([file('bad.json.j2', 'b.json', '/etc/b.json', 'json')], { pw: 'hunter2' }, [
      'hunter2',
    ]);
    expect(e2.code).toBe('TEMPLATE_INVALID');
    expect(e2.message).toMatch(/valid JSON/);
    expect(e2.message).not.toContain('hunter2');
  });

  it('conf_string refuses a double quote', async () => {
    await template('l.conf.j2', 'listen_addr = {{ addr | conf_string }}\n');
    expect(render([file('l.conf.j2', 'l.conf', '/etc/l.conf')], { addr: '10.0.0.1' }).files[0]?.content).toBe(
      'listen_addr = "10.0.0.1"\n',
    );
    const err = renderError([file('l.conf.j2', 'l.conf', '/etc/l.conf')], { addr: '1" evil = "x' });
    expect(err.code).toBe('TEMPLATE_INVALID');
    expect(err.details).toMatchObject({ template: 'l.conf.j2', line: 1 });
  });

  it('one_line passes a value as it is and refuses a line break (a heredoc line of a script)', async () => {
    await template('p.j2', "cat <<'END'\n{{ pw | one_line }}\nEND\n");
    const cfg = [file('p.j2', 'p', '/etc/p')];
    expect(render(cfg, { pw: `a'"$(x)\\` }).files[0]?.content).toBe(`cat <<'END'\na'"$(x)\\\nEND\n`);
    const err = renderError(cfg, { pw: 'a\nEND\nrm -rf /' }, ['a\nEND\nrm -rf /']);
    expect(err.code).toBe('TEMPLATE_INVALID');
    expect(err.message).toMatch(/line break/);
    expect(err.message).not.toContain('rm -rf');
  });
});

describe('kolla config.json', () => {
  it('refuses a command argument kolla_start would split or expand, and a missing command', async () => {
    await template('t.j2', 'x\n');
    const renderer = new Renderer({ templatesDir, log: silentLogger() });
    const cfg = [file('t.j2', 'a.conf', '/etc/a.conf')];
    for (const command of [['svc', 'two words'], ['svc', '*.conf'], ['svc', ''], undefined]) {
      let err: unknown;
      try {
        renderer.renderContainer(containerSpec('svc', command, cfg), {}, new Set());
      } catch (e) {
        err = e;
      }
      expect(isSpcdError(err, 'TEMPLATE_INVALID'), JSON.stringify(command)).toBe(true);
    }
  });

  it('gives hash "none" and no files for a container without config', () => {
    const renderer = new Renderer({ templatesDir, log: silentLogger() });
    expect(renderer.renderContainer(containerSpec('svc', undefined, []), {}, new Set())).toEqual({
      files: [],
      configJson: '',
      hash: 'none',
    });
  });

  it('pads a three-digit mode to the four digits set_configs parses as octal', async () => {
    await template('t.j2', 'x\n');
    const out = render([file('t.j2', 'a.conf', '/etc/a.conf', 'ini', 'nova:nova', '640')], {});
    expect(out.files[0]?.mode).toBe('0640');
    expect(JSON.parse(out.configJson).config_files[0]).toMatchObject({ owner: 'nova:nova', perm: '0640' });
  });
});
