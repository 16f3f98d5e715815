/** The recurring-schedule routes: `PUT|GET|DELETE /v1/tenants/{tenant}/schedules/{name}`, the list, pause and resume. */
import { readConfig } from './runtime/config.js';
import { schedulesHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';
import { wire } from './runtime/wiring.js';

const wiring = await wire(readConfig(process.env, { scheduler: true }));
export const handler = lambda('schedules', (t) => schedulesHandler(wiring, t));
