/**
 * Validates every synthesized CloudFormation template in cdk.out with the offline validator
 * bundled in aws-cdk-lib (@aws/cloudformation-validate). Exits non-zero on any ERROR or FATAL
 * diagnostic; prints warnings.
 *
 *   node --import tsx .ci/validate-templates.ts [cdk.out]
 */
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

interface Diagnostic {
  severity: string;
  ruleId: string;
  message: string;
}
interface Validator {
  CompositeEngine: new () => { validateTemplate(t: unknown): { diagnostics: Diagnostic[] }; free(): void };
  TemplateFile: new (path: string) => unknown;
}

const dir = process.argv[2] ?? 'cdk.out';
// The validator ships inside aws-cdk-lib's own node_modules.
const requireFromCdk = createRequire(createRequire(import.meta.url).resolve('aws-cdk-lib/package.json'));
const cfv = requireFromCdk('@aws/cloudformation-validate') as Validator;
const templates = readdirSync(dir).filter((f) => f.endsWith('.template.json'));
if (templates.length === 0) {
  console.error(`no *.template.json in ${dir}: run 'npx cdk synth' first`);
  process.exit(2);
}
const engine = new cfv.CompositeEngine();
let errors = 0;
try {
  for (const t of templates) {
    const { diagnostics } = engine.validateTemplate(new cfv.TemplateFile(join(dir, t)));
    const bad = diagnostics.filter((d) => d.severity === 'ERROR' || d.severity === 'FATAL');
    const warn = diagnostics.filter((d) => d.severity === 'WARN');
    for (const d of [...bad, ...warn]) console.log(`${t}: [${d.severity}] ${d.ruleId}: ${d.message}`);
    console.log(`${t}: ${bad.length} errors, ${warn.length} warnings`);
    errors += bad.length;
  }
} finally {
  engine.free();
}
process.exit(errors > 0 ? 1 : 0);
