/** The operator API: `GET /v1/admin/tenants/{tenant}`, `POST .../pause`, `POST .../resume`, `PUT .../settings`. */
import { readConfig } from './runtime/config.js';
import { adminHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';
import { wire } from './runtime/wiring.js';

// No job ids signed or read: no id key, so no access to its secret.
const wiring = await wire(readConfig(process.env, { idKey: false }));
export const handler = lambda('admin', (t) => adminHandler(wiring, t));
