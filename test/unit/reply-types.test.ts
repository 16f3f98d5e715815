import { describe, expectTypeOf, it } from 'vitest';
import type { DeadLetterMoveTask } from '../../client/client.js';
import type { MoveTask } from '../../core/deadLetters/deadLetterService.js';

/**
 * The SDK restates the API's reply types rather than importing core's (its declarations must not
 * pull core modules into the package's CommonJS types). Until one shared types module holds them
 * (issue #24), `npm run typecheck` fails here when a restated type drifts from core's.
 */
describe('the SDK reply types match the service types', () => {
  it('DeadLetterMoveTask is MoveTask', () => {
    expectTypeOf<DeadLetterMoveTask>().toEqualTypeOf<MoveTask>();
  });
});
