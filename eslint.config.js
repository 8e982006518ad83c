import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The walls between rooms (docs/architecture.md). Each package may be
// imported by exactly one room; model/ and planner/ are pure.
const OWNED = {
  dockerode: 'agent/engine',
  nunjucks: 'agent/render',
  '@kubernetes/client-node': 'agent/kube',
};

function forbidden(room) {
  return Object.entries(OWNED)
    .filter(([, owner]) => owner !== room)
    .map(([name, owner]) => ({ name, message: `only ${owner}/ may import ${name}` }));
}

const PURE_PATTERNS = [
  {
    group: [
      'node:fs',
      'node:fs/*',
      'node:net',
      'node:http',
      'node:child_process',
      'fs',
      'net',
      'http',
      'child_process',
    ],
    message: 'model/ and planner/ are pure: no I/O',
  },
  {
    group: [
      '../engine/*',
      '../executor/*',
      '../reconciler/*',
      '../state/*',
      '../api/*',
      '../health/*',
      '../render/*',
      '../kube/*',
    ],
    message: 'model/ and planner/ import only model/',
  },
];

const rooms = ['agent/engine', 'agent/render', 'agent/kube'];

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
    files: ['agent/**/*.ts'],
    ignores: rooms.map((r) => `${r}/**`),
    rules: { 'no-restricted-imports': ['error', { paths: forbidden('') }] },
  },
  ...rooms.map((room) => ({
    files: [`${room}/**/*.ts`],
    rules: { 'no-restricted-imports': ['error', { paths: forbidden(room) }] },
  })),
  {
    // the rollout's decisions are pure too (agent/rollout/: not its runner or backend interface)
    files: [
      'agent/model/**/*.ts',
      'agent/planner/**/*.ts',
      'agent/rollout/spec.ts',
      'agent/rollout/windows.ts',
      'agent/rollout/decide.ts',
    ],
    rules: { 'no-restricted-imports': ['error', { paths: forbidden(''), patterns: PURE_PATTERNS }] },
  },
  {
    files: ['bin/**/*.js', 'scripts/**/*.js', 'eslint.config.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
);
