/**
 * `npm start`: the local stack. It arrives with the local-stack issue (#4); until then this
 * says so and points at what already runs locally.
 */
console.log(
  [
    'dynein: the local stack (npm start) arrives with the local-stack issue.',
    'Today the scheduling core runs against embedded dynalite and fauxqs in the test suite: run `npm test`.',
  ].join('\n'),
);
