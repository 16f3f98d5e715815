/**
 * Job history in the constructs (docs/history.md): the tenant's `history` prop reaches its
 * registry item, the outcomes route is served by the status function, which may write outcome
 * records (`h#*`) and nothing else, and grantReportOutcomes gives exactly that route.
 */
import { Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { beforeAll, describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import type { DyneinTenant } from '../../lib/tenant.js';
import { allowed, fastApp, idOf, resourcesOf, roleStatements } from './support.js';

let stack: Stack;
let scheduler: DyneinScheduler;
let withHistory: DyneinTenant;
let t: Template;
const workerRole = () => stack.node.findChild('Worker') as iam.Role;

beforeAll(() => {
  stack = new Stack(fastApp(), 'History');
  scheduler = new DyneinScheduler(stack, 'Dynein');
  withHistory = scheduler.addTenant('alpha', { history: {} });
  scheduler.addTenant('beta');
  scheduler.addTenant('gamma', { history: { retention: Duration.days(30) } });
  withHistory.grantReportOutcomes(new iam.Role(stack, 'Worker', { assumedBy: new iam.AccountRootPrincipal() }));
  t = Template.fromStack(stack);
});

describe('history in the constructs', () => {
  it('registers the retention of tenants with history on (7 days by default), none for the others', () => {
    const regs = resourcesOf(t, 'Custom::DyneinTenantRegistration').map(([, r]) => r.Properties as Record<string, unknown>);
    const byName = Object.fromEntries(regs.map((p) => [p.TenantName, p.HistoryTtlMs]));
    expect(byName).toEqual({ alpha: String(7 * 86_400_000), beta: undefined, gamma: String(30 * 86_400_000) });
  });

  it('a tenant with history monitors its failed jobs by default', () => {
    expect(withHistory.monitorsFailedJobs).toBe(true);
    expect(scheduler.tenants.find((x) => x.tenantName === 'beta')!.monitorsFailedJobs).toBe(false);
  });

  it('refuses a retention outside 1 to 365 days', () => {
    const s = new Stack(fastApp(), 'Bad');
    const sch = new DyneinScheduler(s, 'Dynein');
    expect(() => sch.addTenant('alpha', { history: { retention: Duration.hours(1) } })).toThrow(
      /history.retention must be from 1 to 365 days/,
    );
  });

  it('the status function writes nothing; the outcomes route’s function batch-writes outcome and workflow items only (leading keys h#*, w*)', () => {
    const writesOf = (fn: 'status' | 'workflows') =>
      roleStatements(t, idOf(scheduler.functions[fn].role as iam.Role)).filter(
        (s) => s.Effect === 'Allow' && s.Action.some((a) => /^dynamodb:(Put|BatchWrite|Delete)/.test(a)),
      );
    expect(writesOf('status')).toEqual([]);
    const writes = writesOf('workflows');
    expect(writes).toHaveLength(1);
    expect(writes[0]!.Action).toEqual(['dynamodb:PutItem', 'dynamodb:BatchWriteItem', 'dynamodb:BatchGetItem']);
    expect(writes[0]!.Condition).toEqual({ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['w*', 'h#*'] } });
  });

  it('grantReportOutcomes: execute-api:Invoke on POST .../jobs/outcomes and .../jobs/heartbeats of the tenant only', () => {
    const granted = allowed(roleStatements(t, idOf(workerRole())));
    expect([...granted.keys()]).toEqual(['execute-api:Invoke']);
    const arns = [...granted.get('execute-api:Invoke')!];
    expect(arns.map((a) => a.slice(a.indexOf('/$default/'))).sort()).toEqual([
      '/$default/POST/v1/tenants/alpha/jobs/heartbeats',
      '/$default/POST/v1/tenants/alpha/jobs/outcomes',
    ]);
  });
});
