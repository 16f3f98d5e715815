/**
 * Polyfills for Node 20, installed only where missing.
 *
 * aws-local-stepfunctions 3 (which runs the tick state machine locally) calls
 * `Promise.withResolvers` (ES2024, Node 22+) in every Task state. Import this module before
 * anything that runs aws-local-stepfunctions: `import '../local/polyfills.js';`.
 */

interface Resolvers<T> {
  promise: Promise<T>;
  resolve: (value: T | PromiseLike<T>) => void;
  reject: (reason?: unknown) => void;
}

const PromiseCtor = Promise as PromiseConstructor & { withResolvers?: <T>() => Resolvers<T> };

if (typeof PromiseCtor.withResolvers !== 'function') {
  Object.defineProperty(PromiseCtor, 'withResolvers', {
    // As the spec does, build the promise with `this` (so subclasses get their own kind).
    value: function withResolvers<T>(this: PromiseConstructor): Resolvers<T> {
      let resolve!: Resolvers<T>['resolve'];
      let reject!: Resolvers<T>['reject'];
      const promise = new this<T>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    },
    writable: true,
    configurable: true,
    enumerable: false,
  });
}

export {};
