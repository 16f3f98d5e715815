/** Types of scripts/bundle-lambdas.mjs, for the TypeScript that imports it (test/cdk/support.ts). */
export declare const LAMBDA_NAMES: readonly string[];
export declare function bundleLambdas(): Promise<string[]>;
export declare function staleReason(): string | undefined;
export declare function ensureLambdaBundles(opts?: { quiet?: boolean }): Promise<boolean>;
