/**
 * PLACEHOLDER on the cdk13 branch (COORD-13.md, "Contract: CDK"): the lead's lambdas/schedules.ts
 * (the `/v1/tenants/{tenant}/schedules...` routes) replaces this file at merge. It only lets the
 * bundle and the constructs build; every request gets 501.
 */
export const handler = async (): Promise<{ statusCode: number; headers: Record<string, string>; body: string }> => ({
  statusCode: 501,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ error: { code: 'NotImplemented', message: 'schedules: placeholder bundle' } }),
});
