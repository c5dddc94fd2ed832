/** The permission NATS refused, read from a nats.js error (or its cause): what a log or a SUBACK can name. */
export function missingPermission(e: unknown): { operation: string; subject: string } | undefined {
  for (let x: unknown = e; x instanceof Error; x = (x as { cause?: unknown }).cause) {
    const m = /Permissions Violation for (Publish|Subscription) to "([^"]+)"/i.exec(x.message);
    if (m) return { operation: m[1]!.toLowerCase() === "publish" ? "publish to" : "subscribe to", subject: m[2]! };
  }
  return undefined;
}
