// ESLint flat config: typescript-eslint's recommended rules on every TypeScript file, zero
// warnings allowed (`npm run lint`). Formatting is Prettier's job (`npm run format:check`).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'cdk.out/', '.dynein/', 'coverage/', 'bench/results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2023,
      sourceType: 'module',
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        AbortController: 'readonly',
        AbortSignal: 'readonly',
        TextEncoder: 'readonly',
        TextDecoder: 'readonly',
        fetch: 'readonly',
        structuredClone: 'readonly',
        performance: 'readonly',
        setImmediate: 'readonly',
        queueMicrotask: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-console': 'off',
    },
  },
  {
    // Promises in the runtime code (type-aware): one left floating loses its error and its
    // ordering (a write not awaited may land after what should follow it), and a promise where a
    // boolean or a void callback is expected is always truthy or never awaited. Where a
    // background promise is meant, `void` says so.
    files: ['core/**/*.ts', 'adapters/**/*.ts', 'lambdas/**/*.ts', 'local/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  {
    // The job browser's script runs in the browser (type-checked against the DOM by tsconfig.browser.json).
    files: ['client/ui/browser/**/*.ts'],
    languageOptions: {
      globals: {
        window: 'readonly',
        document: 'readonly',
        URLSearchParams: 'readonly',
        HTMLInputElement: 'readonly',
        HTMLSelectElement: 'readonly',
      },
    },
  },
  {
    // CommonJS config files (dependency-cruiser's) run in Node's CommonJS scope.
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } },
  },
  {
    // Tests inspect untyped JSON (templates, SDK middleware args, HTTP replies). No fake is cast
    // past the type checker (`x as unknown as T`): build it whole (test/support/lambdaEvents.ts),
    // type it against the narrow port the code uses, or check untyped JSON with a parse function.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      'no-restricted-syntax': [
        'error',
        {
          selector: "TSAsExpression > TSAsExpression[typeAnnotation.type='TSUnknownKeyword']",
          message:
            '`as unknown as` hides a fake that does not fit its type: build it whole (test/support/lambdaEvents.ts: lambdaContext, httpApiEvent, sqsRecordFor), type it as the narrow port the code under test uses, or check untyped JSON with a parse function.',
        },
      ],
    },
  },
  {
    // The consumer projects CI builds (.ci/consumer-check.sh), written as their users write them:
    // CommonJS with require(), and the value imports of the cdk init template.
    files: ['.ci/consumers/**'],
    languageOptions: { globals: { __filename: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off', '@typescript-eslint/consistent-type-imports': 'off' },
  },
);
