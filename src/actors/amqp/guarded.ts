/**
 * A command that throws would be rethrown by xstate outside any fiber and end the
 * process; one connection's or link's bug must end that one only.
 */
export function guarded<H extends Record<string, (e: never) => void>>(
  handlers: H,
  owner: { fail(e: unknown): void },
): H {
  const out: Record<string, (e: never) => void> = {};
  for (const [type, handler] of Object.entries(handlers)) {
    out[type] = (e) => {
      try {
        handler(e);
      } catch (error) {
        owner.fail(error);
      }
    };
  }
  return out as H;
}
