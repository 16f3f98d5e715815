/**
 * `--stack NAME`: where a deployed scheduler is, read from its CloudFormation stack's outputs
 * (`ApiUrl`, and per tenant `Tenant<name>QueueUrl` / `Tenant<name>DlqUrl`, as lib/stack.ts writes
 * them), so that a team types a stack name instead of copying URLs.
 *
 * One `DescribeStacks` call of CloudFormation's query API, SigV4-signed with the signer the client
 * already uses: the CLI needs no CloudFormation SDK. The endpoint follows the AWS SDKs'
 * environment variables `AWS_ENDPOINT_URL_CLOUDFORMATION`, then `AWS_ENDPOINT_URL`.
 */
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import type { Credentials } from '../transport.js';

/** Where the commands go, from the stack's outputs. */
export interface StackTarget {
  readonly endpoint: string;
  readonly queueUrl?: string;
  readonly dlqUrl?: string;
}

/** The CloudFormation endpoint of a region, or the one the environment names. */
export function cloudFormationEndpoint(region: string, env: NodeJS.ProcessEnv): string {
  return env.AWS_ENDPOINT_URL_CLOUDFORMATION || env.AWS_ENDPOINT_URL || `https://cloudformation.${region}.amazonaws.com`;
}

/** XML text, unescaped (the five entities the query API writes). */
const unescape = (s: string) =>
  s.replace(/&(lt|gt|quot|apos|amp);/g, (_, e: string) => ({ lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' })[e]!);
const element = (xml: string, name: string) => new RegExp(`<${name}>([\\s\\S]*?)</${name}>`).exec(xml)?.[1];

/** The outputs of a `DescribeStacks` reply's (first) stack: key → value. */
export function parseOutputs(xml: string): Record<string, string> {
  const outputs = element(xml, 'Outputs') ?? '';
  const entries: [string, string][] = [];
  for (const [, member] of outputs.matchAll(/<member>([\s\S]*?)<\/member>/g)) {
    const key = element(member!, 'OutputKey');
    const value = element(member!, 'OutputValue');
    if (key !== undefined && value !== undefined) entries.push([unescape(key.trim()), unescape(value.trim())]);
  }
  return Object.fromEntries(entries);
}

/** Reads the outputs of stack `name`; an error says what CloudFormation answered and what to do. */
export async function describeStackOutputs(
  name: string,
  region: string,
  credentials: Credentials,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Record<string, string>> {
  const url = new URL(cloudFormationEndpoint(region, env));
  const body = new URLSearchParams({ Action: 'DescribeStacks', StackName: name, Version: '2010-05-15' }).toString();
  const signer = new SignatureV4({ service: 'cloudformation', region, credentials, sha256: Hash.bind(null, 'sha256') });
  const signed = await signer.sign({
    method: 'POST',
    protocol: url.protocol,
    hostname: url.hostname,
    ...(url.port ? { port: Number(url.port) } : {}),
    path: url.pathname || '/',
    headers: { host: url.host, 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' },
    body,
  });
  const headers = { ...(signed.headers as Record<string, string>) };
  delete headers.host; // fetch sets it from the URL
  let reply: Response;
  try {
    reply = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(15_000) });
  } catch (err) {
    throw new Error(`--stack ${name}: CloudFormation at ${url.origin} did not answer (${(err as Error).message})`);
  }
  const text = await reply.text();
  if (!reply.ok) {
    const message = element(text, 'Message') ?? text.slice(0, 200);
    throw new Error(
      `--stack ${name}: CloudFormation (${region}) answered ${reply.status} ${element(text, 'Code') ?? ''}: ${unescape(message)}`,
    );
  }
  return parseOutputs(text);
}

/** The output key lib/stack.ts gives a tenant's queue URL (CloudFormation keeps letters and digits of the construct id). */
export const tenantOutputKey = (tenant: string, what: 'QueueUrl' | 'DlqUrl') => `Tenant${tenant}${what}`.replace(/[^A-Za-z0-9]/g, '');

/** The endpoint and the tenant's queues from a stack's outputs; an error when it is not a Dynein stack. */
export function stackTarget(name: string, outputs: Readonly<Record<string, string>>, tenant?: string): StackTarget {
  const endpoint = outputs.ApiUrl;
  if (!endpoint)
    throw new Error(
      `--stack ${name} has no ApiUrl output (it has ${Object.keys(outputs).join(', ') || 'none'}): name the stack of DyneinStack, or pass --endpoint`,
    );
  const queueUrl = tenant ? outputs[tenantOutputKey(tenant, 'QueueUrl')] : undefined;
  const dlqUrl = tenant ? outputs[tenantOutputKey(tenant, 'DlqUrl')] : undefined;
  return { endpoint, ...(queueUrl ? { queueUrl } : {}), ...(dlqUrl ? { dlqUrl } : {}) };
}
