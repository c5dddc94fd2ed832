/**
 * How long a resume waits for its consumers' first attempt before CONNACK: long enough that
 * the record written then names the consumers its messages come from, short enough that a
 * stream that is away does not hold the CONNACK (docs/decisions/mqtt-store.md).
 */
export const RESUME_WAIT_MS = 2_000;

/** Resolves when `p` settles or after `ms`, whichever is first. */
export function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([
    p.then(
      () => {},
      () => {},
    ),
    late,
  ]).finally(() => clearTimeout(timer));
}
