import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The walls between rooms, from the room table in docs/architecture.md.
// Each room lists the rooms it may import; `types` ones only with
// `import type`. errors.ts and log.ts are rooms of one file each. main.ts
// composes everything; daemon/ is its wiring: it reads YAML and templates
// only through config/, and never imports cli/.
const ROOMS = {
  model: { may: [], types: [] },
  planner: { may: ['model'], types: [] },
  spec: { may: ['model', 'errors'], types: [] },
  render: { may: ['model', 'errors', 'log'], types: [] },
  engine: { may: ['model', 'errors', 'log'], types: [] },
  state: { may: ['model', 'errors'], types: [] },
  health: { may: ['model', 'errors', 'log'], types: ['engine'] },
  executor: { may: ['model', 'planner', 'state', 'errors', 'log'], types: ['engine'] },
  reconciler: {
    may: ['model', 'planner', 'executor', 'state', 'errors', 'log'],
    types: ['engine', 'health'],
  },
  api: { may: ['model', 'errors', 'log'], types: [] },
  rollout: { may: ['model', 'errors', 'log'], types: [] },
  // cli/ loads kube/ and etcd/ with a dynamic import() for `fleet status` only, and
  // config/ (render-check.ts) for `validate` with values only.
  cli: { may: ['model', 'spec', 'rollout', 'errors', 'log'], types: ['api', 'kube', 'etcd', 'config'] },
  // kube/ and etcd/ parse the fleet's desired document with spec/yaml.ts (its YAML budget).
  kube: { may: ['model', 'spec', 'render', 'rollout', 'errors', 'log'], types: ['api'] },
  // etcd/ takes the desired document's parser from kube/ (desired-watcher.ts: no client-node at run time).
  // etcd/ and host/ check the key and credential files they read with spec/trusted-paths.ts.
  etcd: { may: ['model', 'spec', 'render', 'rollout', 'kube', 'errors', 'log'], types: [] },
  preflight: { may: ['errors', 'log'], types: [] },
  config: {
    may: ['model', 'spec', 'render', 'state', 'errors', 'log'],
    types: ['executor', 'planner'],
  },
  host: { may: ['model', 'spec', 'errors', 'log'], types: ['executor', 'engine'] },
  status: {
    may: ['model', 'render', 'config', 'reconciler', 'errors', 'log'],
    types: ['api', 'engine', 'health', 'planner', 'state'],
  },
  daemon: {
    may: [
      'model',
      'planner',
      'engine',
      'state',
      'health',
      'executor',
      'reconciler',
      'api',
      'rollout',
      'kube',
      'etcd',
      'preflight',
      'config',
      'host',
      'status',
      'errors',
      'log',
    ],
    types: [],
  },
};
const ALL = [...Object.keys(ROOMS), 'errors', 'log'];

// Each package may be imported by exactly one room.
const OWNED = {
  dockerode: 'engine',
  nunjucks: 'render',
  '@kubernetes/client-node': 'kube',
  etcd3: 'etcd',
  koffi: 'api',
};

const IO = [
  'node:fs',
  'node:fs/*',
  'node:net',
  'node:http',
  'node:child_process',
  'fs',
  'net',
  'http',
  'child_process',
];
const PURE = new Set(['model', 'planner']);
// The rollout's decisions are pure too (not its runner or backend interface).
const PURE_FILES = ['agent/rollout/spec.ts', 'agent/rollout/windows.ts', 'agent/rollout/decide.ts'];

/** How a room's files (at depth 1 and 2 below it) name another room's modules. */
function importsOf(room) {
  const file = room === 'errors' || room === 'log';
  return file ? [`../${room}.js`, `../../${room}.js`] : [`../${room}/*`, `../../${room}/*`];
}

function wallsOf(room) {
  const { may, types } = ROOMS[room];
  const closed = ALL.filter((r) => r !== room && !may.includes(r) && !types.includes(r));
  const patterns = [];
  if (closed.length > 0)
    patterns.push({
      group: closed.flatMap(importsOf),
      message:
        may.length + types.length === 0
          ? `${room}/ imports nothing in agent/ (docs/architecture.md)`
          : `${room}/ may import only ${[...may, ...types.map((t) => `${t} (types)`)].join(', ')} (docs/architecture.md)`,
    });
  if (types.length > 0)
    patterns.push({
      group: types.flatMap(importsOf),
      allowTypeImports: true,
      message: `${room}/ may import only types from ${types.join(', ')} (docs/architecture.md)`,
    });
  if (PURE.has(room)) patterns.push({ group: IO, message: `${room}/ is pure: no I/O` });
  return patterns;
}

function packagesFor(room) {
  return Object.entries(OWNED)
    .filter(([, owner]) => owner !== room)
    .map(([name, owner]) => ({ name, message: `only agent/${owner}/ may import ${name}` }));
}

export default tseslint.config(
  { ignores: ['dist/', 'dist-bench/', 'node_modules/', '.cache/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // Type-aware rules: a promise nobody awaits or catches is a defect.
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: { '@typescript-eslint/no-floating-promises': 'error' },
  },
  {
    files: ['agent/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { paths: packagesFor('') }] },
  },
  ...Object.keys(ROOMS).map((room) => ({
    files: [`agent/${room}/**/*.ts`],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { paths: packagesFor(room), patterns: wallsOf(room) },
      ],
    },
  })),
  {
    // daemon/ gets only what it uses: its files take the engine through narrow
    // ports (the unlabeled scan, the image puller, preflight's engine facts),
    // and only the composition root, daemon.ts, builds the engine.
    files: ['agent/daemon/**/*.ts'],
    ignores: ['agent/daemon/daemon.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: packagesFor('daemon'),
          patterns: [
            ...wallsOf('daemon'),
            {
              group: importsOf('engine'),
              message:
                'only daemon/daemon.ts imports engine/; other daemon/ files get a narrow port (docs/architecture.md)',
            },
          ],
        },
      ],
    },
  },
  {
    files: PURE_FILES,
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: packagesFor('rollout'),
          patterns: [...wallsOf('rollout'), { group: IO, message: 'the rollout decisions are pure: no I/O' }],
        },
      ],
    },
  },
  {
    // Small functions with one job, in small files: a function that reads
    // top to bottom on one screen, a file that holds one idea.
    files: ['agent/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
      'max-lines': ['error', { max: 400, skipBlankLines: false, skipComments: false }],
    },
  },
  {
    files: ['bin/**/*.js', 'scripts/**/*.js', 'test/support/**/*.mjs', 'eslint.config.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
  // Tests. A test file stays short enough to read: one topic a file, shared
  // set-up in test/support/. Unit tests do not sleep on the real clock: a test
  // that waits N ms and then asserts that nothing happened proves nothing on a
  // slow machine. Time moves on the fake clock (test/support/fake-clock.ts); a
  // real condition is waited for with test/support/wait.ts. Settling the event
  // loop (setImmediate, setTimeout 0) is fine; a deadline for an event says so
  // where it is set.
  {
    files: ['test/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 400 }] },
  },
  {
    files: ['test/unit/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.name='setTimeout'][arguments.length>1]:not([arguments.1.value=0])",
          message: 'no real-clock sleeps in unit tests: use the fake clock or test/support/wait.ts',
        },
        {
          selector: 'CallExpression[callee.name=/^(sleep|delay)$/]',
          message: 'no real-clock sleeps in unit tests: use the fake clock or test/support/wait.ts',
        },
      ],
    },
  },
);
