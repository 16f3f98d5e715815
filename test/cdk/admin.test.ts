/**
 * The operator API in the construct (docs/tenant-controls.md): the admin function's role (GetItem
 * and PutItem on the tenants' items only), its four IAM-authorised routes, `grantAdmin` (those
 * routes only) versus the tenant grants (never them), and cdk-nag on a stack that uses it.
 */
import { Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { CDK_APP_MODE_CONTEXT, FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT } from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { allowed, fastApp, getAtt, idOf, ref, render, resource, resourcesOf, roleStatements, type Json, synthError } from './support.js';

let stack: Stack;
let scheduler: DyneinScheduler;
let operator: iam.Role;
let team: iam.Role;
let t: Template;

const ADMIN_ROUTES = [
  'GET /v1/admin/tenants/{tenant}',
  'POST /v1/admin/tenants/{tenant}/pause',
  'POST /v1/admin/tenants/{tenant}/resume',
  'PUT /v1/admin/tenants/{tenant}/settings',
];

beforeAll(() => {
  stack = new Stack(fastApp(), 'Admin');
  scheduler = new DyneinScheduler(stack, 'Dynein');
  const billing = scheduler.addTenant('billing');
  operator = new iam.Role(stack, 'Operator', { assumedBy: new iam.AccountRootPrincipal() });
  team = new iam.Role(stack, 'Team', { assumedBy: new iam.AccountRootPrincipal() });
  scheduler.grantAdmin(operator);
  billing.grantSchedule(team);
  billing.grantDeadLetters(team);
  billing.grantReportOutcomes(team);
  t = Template.fromStack(stack);
});

const roleOf = (fnId: string) => /^\{GetAtt:(.+)\.Arn\}$/.exec(render(resource(t, fnId).Properties.Role))![1]!;
const invokeResources = (roleId: string) => [...(allowed(roleStatements(t, roleId)).get('execute-api:Invoke') ?? [])].sort();
const routeArn = (route: string) => {
  const [method, path] = route.split(' ');
  return `arn:{Ref:AWS::Partition}:execute-api:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${ref(scheduler.httpApi)}/$default/${method}${path!.replace('{tenant}', '*')}`;
};

describe('the admin function', () => {
  it('may only GetItem and PutItem the items whose partition key starts with tenant#, and log to its own group', () => {
    const statements = roleStatements(t, roleOf(idOf(scheduler.functions.admin)));
    const granted = allowed(statements);
    expect([...granted.keys()].sort()).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem', 'logs:CreateLogStream', 'logs:PutLogEvents']);
    const table = statements.filter((s) => s.Action.some((a) => a.startsWith('dynamodb:')));
    expect(table).toHaveLength(1);
    expect(table[0]!.Resource).toEqual([getAtt(scheduler.table, 'Arn')]);
    expect(table[0]!.Condition).toEqual({ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['tenant#*'] } });
  });

  it('reads the table name, not the job id key (no secret in its environment or role)', () => {
    const env = (resource(t, idOf(scheduler.functions.admin)).Properties.Environment as { Variables: Record<string, Json> }).Variables;
    expect(render(env.DYNEIN_TABLE)).toBe(ref(scheduler.table));
    expect(env).not.toHaveProperty('DYNEIN_ID_KEY_SECRET_ARN');
  });

  it('serves exactly the four admin routes, each AWS_IAM', () => {
    const routes = resourcesOf(t, 'AWS::ApiGatewayV2::Route').filter(([, r]) => String(r.Properties.RouteKey).includes('/v1/admin/'));
    expect(routes.map(([, r]) => r.Properties.RouteKey).sort()).toEqual([...ADMIN_ROUTES].sort());
    for (const [id, r] of routes) {
      expect(r.Properties.AuthorizationType, id).toBe('AWS_IAM');
      const integrationId = /^integrations\/\{Ref:(.+)\}$/.exec(render(r.Properties.Target))![1]!;
      expect(render(resource(t, integrationId).Properties.IntegrationUri)).toBe(getAtt(scheduler.functions.admin, 'Arn'));
    }
  });
});

describe('grants', () => {
  it('grantAdmin allows execute-api:Invoke on the four admin routes (any tenant) and nothing else', () => {
    const granted = allowed(roleStatements(t, idOf(operator)));
    expect([...granted.keys()]).toEqual(['execute-api:Invoke']);
    expect(invokeResources(idOf(operator))).toEqual(ADMIN_ROUTES.map(routeArn).sort());
    for (const r of invokeResources(idOf(operator))) expect(r).toContain('/v1/admin/tenants/');
  });

  it("a tenant's grants never cover an admin route", () => {
    const resources = invokeResources(idOf(team));
    expect(resources.length).toBeGreaterThan(10);
    for (const r of resources) {
      expect(r).toContain('/v1/tenants/billing/');
      expect(r).not.toContain('/admin');
    }
  });
});

describe('cdk-nag', () => {
  it('a stack with the admin function and an operator grant synthesizes with no unacknowledged finding', () => {
    const app = fastApp({ [CDK_APP_MODE_CONTEXT]: 'inmemory', [FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT]: true });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    const s = new Stack(app, 'AdminNag');
    const sch = new DyneinScheduler(s, 'Dynein');
    const ops = new iam.Role(s, 'Operator', { assumedBy: new iam.AccountRootPrincipal() });
    sch.grantAdmin(ops);
    // The grantee's wildcard is the tenant name of the routes (as for the tenant grants): its owner acknowledges it.
    const api = `<${idOf(sch.httpApi)}>`;
    for (const route of [
      'GET/v1/admin/tenants/*',
      'POST/v1/admin/tenants/*/pause',
      'POST/v1/admin/tenants/*/resume',
      'PUT/v1/admin/tenants/*/settings',
    ])
      Validations.of(ops).acknowledge({
        id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:${api}/$default/${route}]`,
        reason: 'The operator may act on every tenant: the tenant name of the admin routes is the only wildcard.',
      });
    expect(synthError(app)).toBeUndefined();
  });
});
