/**
 * Architecture rules checked in CI (`npm run lint:deps`): no import cycles (type-only edges
 * included), core's folders entered through their index.ts, util and model as leaves, and the
 * layering of docs/architecture.md (core is pure, constructs never load runtime code, the client
 * never loads the CDK).
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'No import cycles, type-only edges included: a cycle makes load order fragile, and two modules that need each other are one module or want a third.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-feature-through-index',
      severity: 'error',
      comment:
        'A core folder (feature, model, util) is entered through its index.ts: what else it holds is its own business. Inside a folder, files import each other directly.',
      from: { path: '^core/([^/]+)/' },
      to: { path: '^core/', pathNot: ['^core/$1/', '^core/[^/]+/index\\.ts$'] },
    },
    {
      name: 'layers-reach-core-through-index',
      severity: 'error',
      comment: 'Adapters, handlers, the local stack, constructs and the client reach a core folder only through its index.ts.',
      from: { path: '^(adapters|lambdas|local|lib|client|bin)/' },
      to: { path: '^core/', pathNot: '^core/[^/]+/index\\.ts$' },
    },
    {
      name: 'util-is-a-leaf',
      severity: 'error',
      comment: 'core/util holds small utilities that know nothing of the scheduler: they import no other core folder.',
      from: { path: '^core/util/' },
      to: { path: '^core/', pathNot: '^core/util/' },
    },
    {
      name: 'model-is-the-vocabulary',
      severity: 'error',
      comment: 'core/model is what every feature shares: it imports only core/util, never a feature.',
      from: { path: '^core/model/' },
      to: { path: '^core/', pathNot: '^core/(model|util)/' },
    },
    {
      name: 'core-is-pure',
      severity: 'error',
      comment: 'core/ holds the scheduling logic: no AWS SDK, no CDK, no other layer.',
      from: { path: '^core/' },
      to: { path: ['^(adapters|lambdas|lib|local|client|bin)/', 'node_modules/(@aws-sdk|@smithy|aws-cdk-lib|constructs)/'] },
    },
    {
      name: 'lib-no-runtime',
      severity: 'error',
      comment: 'Constructs wire resources: they never load Lambda runtime code or the AWS SDK.',
      from: { path: '^lib/' },
      to: { path: ['^(adapters|lambdas|local|client)/', 'node_modules/(@aws-sdk|@smithy|@aws-lambda-powertools|@middy)/'] },
    },
    {
      name: 'client-no-cdk',
      severity: 'error',
      comment: 'The client entry point ("dynein-serverless") must not load aws-cdk-lib, constructs or esbuild.',
      from: { path: '^client/' },
      to: { path: ['^(lib|lambdas|local|adapters)/', 'node_modules/(aws-cdk-lib|constructs|esbuild)/'] },
    },
    {
      name: 'adapters-not-up',
      severity: 'error',
      comment: 'adapters/ implement core ports; they do not reach into handlers, constructs or the local stack.',
      from: { path: '^adapters/' },
      to: { path: '^(lambdas|lib|local|client)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs'],
    },
    exclude: { path: ['^node_modules', '^dist', '^cdk\\.out'] },
  },
};
