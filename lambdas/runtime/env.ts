import { readConfig } from './config.js';
import { wire, type Wiring } from './wiring.js';

/**
 * Cold start: validate the environment and build the core once per instance. A bad
 * configuration fails the cold start with every problem listed.
 */
export function wireFromEnv(needs: { inboundQueue?: boolean; idKey?: boolean } = {}): Promise<Wiring> {
  return wire(readConfig(process.env, needs));
}
