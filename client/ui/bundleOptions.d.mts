// Types of bundleOptions.mjs, for the `dynein ui` server (client/ui/appScript.ts). Spelled out
// rather than esbuild's BuildOptions: client/ never imports esbuild, not even its types, for the
// installed package has no esbuild.
export declare const uiBundleOptions: {
  readonly entryPoints: string[];
  readonly bundle: true;
  readonly format: 'iife';
  readonly platform: 'browser';
  readonly target: string;
  readonly minify: boolean;
  readonly sourcemap: boolean;
  readonly legalComments: 'none';
  readonly charset: 'utf8';
  readonly logLevel: 'warning';
};
