// `npm run build`, step 1: start from an empty dist/ so that no file of an earlier build ships.
import { rmSync } from 'node:fs';

rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
