/**
 * Architecture rules checked in CI (`npm run lint:deps`): no import cycles, and the layering of
 * the README's code layout (core is pure, constructs never load runtime code, the client never
 * loads the CDK).
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycles, type-only edges included: a cycle makes load order fragile, and two modules that need each other are one module or want a third.',
      from: {},
      to: { circular: true },
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
