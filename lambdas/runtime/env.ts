import { readConfig } from './config';
import { wire, type Wiring } from './wiring';

/**
 * Cold start: validate the environment and build the core once per instance. A bad
 * configuration fails the cold start with every problem listed.
 */
export function wireFromEnv(needs: { inboundQueue?: boolean; idKey?: boolean } = {}): Promise<Wiring> {
  return wire(readConfig(process.env, needs));
}
