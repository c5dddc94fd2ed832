/**
 * `f`, callable any number of times and run the first time only: for what a caller hands
 * out to be called "when done" by several paths (a lease's release, a request's reply, an
 * actor's stop). Once run, the function is dropped, and what it held with it.
 */
export function once<A extends unknown[]>(f: (...args: A) => void): (...args: A) => void {
  let pending: ((...args: A) => void) | undefined = f;
  return (...args) => {
    const run = pending;
    pending = undefined;
    run?.(...args);
  };
}
