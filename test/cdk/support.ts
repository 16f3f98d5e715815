/**
 * Helpers for the construct tests: apps over the pre-built Lambda bundles (built first if missing
 * or stale, as `npm run synth` does), logical ids of constructs, CloudFormation values rendered as
 * text, and the IAM statements that apply to a role or a queue.
 */
import { App, CfnElement, Stack, type AppProps } from 'aws-cdk-lib';
import type { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { ensureLambdaBundles } from '../../scripts/bundle-lambdas.mjs';

// The constructs deploy dist/lambdas/<name>; test workers share one build (the script locks).
await ensureLambdaBundles({ quiet: true });

/**
 * An app for a construct test (the functions use the pre-built bundles: no bundling at synth).
 * Without the CDK's built-in CloudFormation validation on each synth: it only warns (its errors
 * are downgraded unless a flag says otherwise), and starting its WebAssembly validator in every
 * test file cost about 3 CPU-seconds, then ~0.5 s a synth. The templates are validated where that
 * is the test: the offline validator's own test (tableCapacity.test.ts) and CI's
 * `npm run validate:templates` over what `npm run synth` wrote.
 */
export function fastApp(context: Record<string, unknown> = {}, props: Omit<AppProps, 'context'> = {}): App {
  return new App({ builtinCloudFormationValidation: false, ...props, context });
}

/** The logical id of a construct's CloudFormation resource (its default child for an L2). */
export function idOf(c: IConstruct): string {
  const el = CfnElement.isCfnElement(c) ? c : c.node.defaultChild;
  if (!el || !CfnElement.isCfnElement(el)) throw new Error(`${c.node.path} has no CloudFormation element`);
  return Stack.of(el).resolve(el.logicalId) as string;
}

/** `{Ref:X}`, the text {@link render} gives a Ref. */
export const ref = (c: IConstruct | string) => `{Ref:${typeof c === 'string' ? c : idOf(c)}}`;
/** `{GetAtt:X.Attr}`, the text {@link render} gives an Fn::GetAtt. */
export const getAtt = (c: IConstruct | string, attr: string) => `{GetAtt:${typeof c === 'string' ? c : idOf(c)}.${attr}}`;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Obj = { [key: string]: Json };

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A CloudFormation value as text: strings as they are, `{Ref:X}`, `{GetAtt:X.Attr}`, joins
 * joined, `Fn::ImportValue` replaced by what `imports` maps its export name to.
 */
export function render(v: Json | undefined, imports: ReadonlyMap<string, string> = new Map()): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return v.map((x) => render(x, imports)).join(',');
  const keys = Object.keys(v);
  if (keys.length === 1) {
    const [k] = keys as [string];
    const arg = v[k] as Json;
    if (k === 'Ref') return `{Ref:${render(arg, imports)}}`;
    if (k === 'Fn::GetAtt')
      return Array.isArray(arg) ? `{GetAtt:${arg.map((a) => render(a, imports)).join('.')}}` : `{GetAtt:${render(arg, imports)}}`;
    if (k === 'Fn::Join' && Array.isArray(arg)) return (arg[1] as Json[]).map((p) => render(p, imports)).join(render(arg[0], imports));
    if (k === 'Fn::ImportValue') {
      const name = render(arg, imports);
      return imports.get(name) ?? `{Import:${name}}`;
    }
    if (k === 'Fn::Sub') return `{Sub:${render(arg, imports)}}`;
  }
  return JSON.stringify(v);
}

/**
 * Export name → rendered value, prefixed with the exporting stack's name (`Stack!{Ref:X}`), for
 * rendering another stack's `Fn::ImportValue`s.
 */
export function exportsOf(stackName: string, template: Template): Map<string, string> {
  const out = new Map<string, string>();
  const outputs = (template.toJSON() as Obj).Outputs;
  if (!isObj(outputs)) return out;
  for (const o of Object.values(outputs)) {
    if (isObj(o) && isObj(o.Export)) out.set(render(o.Export.Name), `${stackName}!${render(o.Value)}`);
  }
  return out;
}

export interface Resource {
  readonly Type: string;
  readonly Properties: Obj;
  readonly DeletionPolicy?: string;
  readonly UpdateReplacePolicy?: string;
  readonly DependsOn?: string[];
}

/** Every resource of `type`, by logical id. */
export function resourcesOf(template: Template, type: string): [string, Resource][] {
  const all = (template.toJSON() as { Resources: Record<string, Resource> }).Resources;
  return Object.entries(all)
    .filter(([, r]) => r.Type === type)
    .map(([id, r]) => [id, { ...r, Properties: r.Properties ?? {} }]);
}

/** The resource with this logical id (fails the test if absent). */
export function resource(template: Template, id: string): Resource {
  const r = (template.toJSON() as { Resources: Record<string, Resource> }).Resources[id];
  if (!r) throw new Error(`no resource ${id} in the template`);
  return { ...r, Properties: r.Properties ?? {} };
}

/** An IAM statement with Action, NotAction and Resource as lists of rendered text. */
export interface Statement {
  readonly Sid?: string;
  readonly Effect: string;
  readonly Action: string[];
  readonly NotAction: string[];
  readonly Resource: string[];
  readonly NotResource: string[];
  readonly Principal: Json | undefined;
  readonly Condition: Obj;
  /** Where the statement comes from (logical id of the policy or role). */
  readonly source: string;
}

const list = (v: Json | undefined, imports?: ReadonlyMap<string, string>): string[] =>
  v === undefined ? [] : Array.isArray(v) ? v.map((x) => render(x, imports)) : [render(v, imports)];

function statementsOf(doc: Json | undefined, source: string, imports?: ReadonlyMap<string, string>): Statement[] {
  if (!isObj(doc)) return [];
  const s = doc.Statement;
  const raw = Array.isArray(s) ? s : s === undefined ? [] : [s];
  return raw.filter(isObj).map((st) => ({
    Sid: typeof st.Sid === 'string' ? st.Sid : undefined,
    Effect: render(st.Effect),
    Action: list(st.Action, imports),
    NotAction: list(st.NotAction, imports),
    Resource: list(st.Resource, imports),
    NotResource: list(st.NotResource, imports),
    Principal: st.Principal,
    Condition: isObj(st.Condition) ? st.Condition : {},
    source,
  }));
}

const refersTo = (targets: Json | undefined, id: string) => Array.isArray(targets) && targets.some((t) => isObj(t) && t.Ref === id);

/** Every statement of every identity policy of role `roleId`: attached policies, managed policies in the template and inline ones. */
export function roleStatements(template: Template, roleId: string, imports?: ReadonlyMap<string, string>): Statement[] {
  const out: Statement[] = [];
  for (const type of ['AWS::IAM::Policy', 'AWS::IAM::ManagedPolicy']) {
    for (const [id, p] of resourcesOf(template, type)) {
      if (refersTo(p.Properties.Roles, roleId)) out.push(...statementsOf(p.Properties.PolicyDocument, id, imports));
    }
  }
  const role = resource(template, roleId);
  const inline = role.Properties.Policies;
  if (Array.isArray(inline)) for (const p of inline) if (isObj(p)) out.push(...statementsOf(p.PolicyDocument, roleId, imports));
  return out;
}

/** Every statement of the queue policies that apply to queue `queueId`. */
export function queuePolicyStatements(template: Template, queueId: string, imports?: ReadonlyMap<string, string>): Statement[] {
  return resourcesOf(template, 'AWS::SQS::QueuePolicy')
    .filter(([, p]) => refersTo(p.Properties.Queues, queueId))
    .flatMap(([id, p]) => statementsOf(p.Properties.PolicyDocument, id, imports));
}

/**
 * Every permission statement in the template: identity policies (attached, managed, inline in
 * roles) and resource policies (queues, topics, ...). Trust policies are left out.
 */
export function allPermissionStatements(template: Template): Statement[] {
  const out: Statement[] = [];
  for (const [id, r] of Object.entries((template.toJSON() as { Resources: Record<string, Resource> }).Resources)) {
    const p = r.Properties ?? {};
    if (isObj(p.PolicyDocument)) out.push(...statementsOf(p.PolicyDocument, id));
    if (Array.isArray(p.Policies)) for (const x of p.Policies) if (isObj(x)) out.push(...statementsOf(x.PolicyDocument, id));
  }
  return out;
}

/** `service:action` pairs granted by Allow statements, each with the resources it is granted on. */
export function allowed(statements: readonly Statement[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const s of statements.filter((x) => x.Effect === 'Allow')) {
    for (const a of s.Action) {
      const set = out.get(a) ?? new Set<string>();
      for (const r of s.Resource) set.add(r);
      out.set(a, set);
    }
  }
  return out;
}

/** Condition values as a sorted list of rendered text (`ArnEquals` → `aws:PrincipalArn` → [...]). */
export function conditionValues(s: Statement, operator: string, key: string, imports?: ReadonlyMap<string, string>): string[] | undefined {
  const op = s.Condition[operator];
  if (!isObj(op) || !(key in op)) return undefined;
  return list(op[key], imports).sort();
}

/** Is `p` the anonymous principal (`"*"` or `{"AWS": "*"}`)? */
export function isAnyone(p: Json | undefined): boolean {
  return p === '*' || (isObj(p) && (p.AWS === '*' || (Array.isArray(p.AWS) && p.AWS.includes('*'))));
}

/**
 * Synthesizes `app` and answers the error it threw (cdk-nag's unacknowledged findings, a failed
 * validation), or undefined: `expect(synthError(app)).toBeUndefined()` shows the findings on failure.
 */
export function synthError(app: App): string | undefined {
  try {
    app.synth();
    return undefined;
  } catch (err) {
    return String((err as Error).message);
  }
}
